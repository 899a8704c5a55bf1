package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/cuengine/engine/templates"
	"github.com/cuengine/engine/templates/policy"
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
	clustersNamespace    string
	cluster              string
	user                 string
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
policy: both are warnings on standard error, with the child's file:line.

When a template's policy.clusters allows a workload cluster, the Role in
--clusters-namespace (by default --namespace) also grants get, list and
watch on the Secrets there that register the clusters.

With --cluster NAME it prints instead what the engine needs in that
workload cluster, to apply there: a ClusterRole with get, list, watch,
create, patch and delete on the kinds of the children the templates may
put in NAME (those whose cluster field names it, and those whose cluster
field is computed when their policy.clusters allows NAME), bound to the
identity of the kubeconfig its cluster Secret holds: --user, or the
ServiceAccount --service-account in --namespace of that cluster.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.checkFlags(cmd); err != nil {
				return err
			}
			set, err := templates.Load(o.templates)
			if err != nil {
				return &exitError{code: 1, msg: err.Error()}
			}
			printRBACWarnings(cmd.ErrOrStderr(), set)
			if o.cluster != "" {
				return o.printCluster(cmd.OutOrStdout(), set)
			}
			roles := rbac.Generate(set, rbac.Options{
				Name: o.name, ServiceAccount: o.serviceAccount, Namespace: o.namespace,
				RevisionNamespace: o.revisionNamespace, InstallCRDs: o.installCRDs,
				ClustersNamespace: o.clustersNamespace,
			})
			if o.webhook {
				addWebhookRBAC(roles, o.webhookConfiguration, o.webhookSecret)
			}
			for _, note := range roles.Notes {
				fmt.Fprintf(cmd.ErrOrStderr(), "note: %s\n", note)
			}
			return printObjects(cmd.OutOrStdout(), roles.Objects())
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
	cmd.Flags().StringVar(&o.clustersNamespace, "clusters-namespace", "", `namespace of the Secrets that register the workload clusters (engine run --clusters-namespace; default: --namespace; "-": none), granted when a template's policy.clusters allows a cluster`)
	cmd.Flags().StringVar(&o.cluster, "cluster", "", "print instead the ClusterRole and binding the engine needs in this registered workload cluster")
	cmd.Flags().StringVar(&o.user, "user", "", "with --cluster: bind the role to this user of the workload cluster instead of --service-account")
	return cmd
}

// clusterOnlyFlags are the flags of the engine's own roles, which mean
// nothing for a workload cluster's.
var clusterOnlyFlags = []string{"revision-namespace", "install-crds", "webhook", "webhook-configuration", "webhook-secret", "clusters-namespace"}

// checkFlags refuses flags that --cluster would ignore, and --user
// without it.
func (o *rbacOptions) checkFlags(cmd *cobra.Command) error {
	if o.cluster == "" {
		if o.user != "" {
			return &exitError{code: 2, msg: "--user binds a workload cluster's role: give --cluster NAME"}
		}
		return nil
	}
	if msg := policy.ClusterNameProblem(o.cluster); msg != "" {
		return &exitError{code: 2, msg: "--cluster: " + msg}
	}
	for _, name := range clusterOnlyFlags {
		if cmd.Flags().Changed(name) {
			return &exitError{code: 2, msg: fmt.Sprintf("--%s shapes the engine's roles in its own cluster, not in workload cluster %s: drop it, or --cluster", name, o.cluster)}
		}
	}
	return nil
}

// printCluster prints the role of workload cluster o.cluster, or fails
// when no template may put children there.
func (o *rbacOptions) printCluster(w io.Writer, set *templates.Set) error {
	roles := rbac.GenerateCluster(set, o.cluster, rbac.ClusterOptions{
		Name: o.name, ServiceAccount: o.serviceAccount, Namespace: o.namespace, User: o.user,
	})
	if len(roles.Templates) == 0 {
		return &exitError{code: 1, msg: fmt.Sprintf("no template's policy.clusters allows cluster %q: the engine puts nothing there", o.cluster)}
	}
	return printObjects(w, roles.Objects())
}

// printObjects prints objects as YAML documents.
func printObjects(w io.Writer, objs []any) error {
	for i, obj := range objs {
		b, err := yaml.Marshal(obj)
		if err != nil {
			return err
		}
		if i > 0 {
			fmt.Fprintln(w, "---")
		}
		fmt.Fprint(w, dropCreationTimestamp(string(b)))
	}
	return nil
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
