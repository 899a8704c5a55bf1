package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/cuengine/engine/templates"
	"github.com/cuengine/engine/templates/rbac"
)

type rbacOptions struct {
	templates            string
	name                 string
	serviceAccount       string
	namespace            string
	revisionNamespace    string
	installCRDs          bool
	webhook              bool
	webhookConfiguration string
	webhookSecret        string
}

func newRBACCommand() *cobra.Command {
	o := &rbacOptions{}
	cmd := &cobra.Command{
		Use:   "rbac",
		Short: "Print the least-privilege roles and bindings for the templates",
		Long: `Print the roles granting exactly what the engine needs to serve the
templates, bound to the engine's ServiceAccount:

  a ClusterRole and its ClusterRoleBinding: the parent kinds, their status,
  the child kinds the templates can produce, read-only access to the kinds
  they reference, events, the TokenReviews and
  SubjectAccessReviews that guard the metrics endpoint, and with
  --install-crds the CRDs (updates only of the templates' own);
  a Role and its RoleBinding in --namespace: the leader election and shard
  Leases, and the templates' revisions (ControllerRevisions), which go to a
  second Role in --revision-namespace if it differs; with --webhook, the
  webhook's certificate Secret there, and its ValidatingWebhookConfiguration
  in the ClusterRole (writes only of its own);
  referenced Secrets and ConfigMaps (read only) in a Role per namespace the
  references can reach, when every reference of the kind names its
  namespace; otherwise in the ClusterRole, and for Secrets a note on
  standard error says which reference needs them cluster-wide.

A child whose apiVersion or kind a template computes gets no rule, and one
whose namespace it computes from the spec may be refused by the template's
policy: both are warnings on standard error, with the child's file:line.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			set, err := templates.Load(o.templates)
			if err != nil {
				return &exitError{code: 1, msg: err.Error()}
			}
			printRBACWarnings(cmd.ErrOrStderr(), set)
			roles := rbac.Generate(set, rbac.Options{
				Name: o.name, ServiceAccount: o.serviceAccount, Namespace: o.namespace,
				RevisionNamespace: o.revisionNamespace, InstallCRDs: o.installCRDs,
			})
			if o.webhook {
				addWebhookRBAC(roles, o.webhookConfiguration, o.webhookSecret)
			}
			for _, note := range roles.Notes {
				fmt.Fprintf(cmd.ErrOrStderr(), "note: %s\n", note)
			}
			for i, obj := range roles.Objects() {
				b, err := yaml.Marshal(obj)
				if err != nil {
					return err
				}
				if i > 0 {
					fmt.Fprintln(cmd.OutOrStdout(), "---")
				}
				fmt.Fprint(cmd.OutOrStdout(), dropCreationTimestamp(string(b)))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&o.templates, "templates", "templates", "templates directory")
	cmd.Flags().StringVar(&o.name, "name", "engine", "name of the roles and bindings")
	cmd.Flags().StringVar(&o.serviceAccount, "service-account", "engine", "ServiceAccount the engine runs as")
	cmd.Flags().StringVar(&o.namespace, "namespace", "engine-system", "namespace of the ServiceAccount and of the engine's Leases (engine run --leader-election-namespace)")
	cmd.Flags().StringVar(&o.revisionNamespace, "revision-namespace", "", "namespace of the templates' revisions (engine run --revision-namespace; default: --namespace)")
	cmd.Flags().BoolVar(&o.installCRDs, "install-crds", false, "also allow managing CustomResourceDefinitions (engine run --install-crds)")
	cmd.Flags().BoolVar(&o.webhook, "webhook", true, "also allow the webhook server: its ValidatingWebhookConfiguration, and its certificate Secret in --namespace (engine run --webhook-port; false with --webhook-port=0)")
	cmd.Flags().StringVar(&o.webhookConfiguration, "webhook-configuration", "engine.cuengine.dev", "engine run --webhook-configuration")
	cmd.Flags().StringVar(&o.webhookSecret, "webhook-secret", "engine-webhook-certs", "engine run --webhook-secret")
	return cmd
}

// printRBACWarnings prints the children whose kind or namespace the
// templates compute, which the roles cannot grant or the policy may refuse.
func printRBACWarnings(w io.Writer, set *templates.Set) {
	for _, t := range set.Templates() {
		for _, rw := range rbac.Warnings(t) {
			fmt.Fprintf(w, "warning: %s\n", rw)
		}
	}
}

// dropCreationTimestamp removes the null creationTimestamp Go's types print.
func dropCreationTimestamp(doc string) string {
	return strings.Replace(doc, "  creationTimestamp: null\n", "", 1)
}
