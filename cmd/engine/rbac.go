package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/cuengine/engine/templates"
)

type rbacOptions struct {
	templates      string
	name           string
	serviceAccount string
	namespace      string
	installCRDs    bool
}

func newRBACCommand() *cobra.Command {
	o := &rbacOptions{}
	cmd := &cobra.Command{
		Use:   "rbac",
		Short: "Print the least-privilege ClusterRole and binding for the templates",
		Long: `Print a ClusterRole granting exactly what the engine needs to serve the
templates (the parent kinds, their status, the child kinds the templates can
produce, read-only access to the kinds they reference, events, the leader
election lease, and CRDs with --install-crds), and a ClusterRoleBinding to the
engine's ServiceAccount.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			set, err := templates.Load(o.templates)
			if err != nil {
				return &exitError{code: 1, msg: err.Error()}
			}
			role, binding := templates.RBAC(set, templates.RBACOptions{
				Name: o.name, ServiceAccount: o.serviceAccount, Namespace: o.namespace, InstallCRDs: o.installCRDs,
			})
			for i, obj := range []any{role, binding} {
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
	cmd.Flags().StringVar(&o.name, "name", "engine", "name of the ClusterRole and ClusterRoleBinding")
	cmd.Flags().StringVar(&o.serviceAccount, "service-account", "engine", "ServiceAccount the engine runs as")
	cmd.Flags().StringVar(&o.namespace, "namespace", "engine-system", "namespace of the ServiceAccount")
	cmd.Flags().BoolVar(&o.installCRDs, "install-crds", false, "also allow managing CustomResourceDefinitions (engine run --install-crds)")
	return cmd
}

// dropCreationTimestamp removes the null creationTimestamp Go's types print.
func dropCreationTimestamp(doc string) string {
	return strings.Replace(doc, "  creationTimestamp: null\n", "", 1)
}
