package main

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/diff"
	"github.com/cuengine/engine/engine"
	"github.com/cuengine/engine/providers"
	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/templates"
)

type diffOptions struct {
	templates     string
	file          string
	kubeconfig    string
	revisions     revisionDiffOptions
	limits        render.Limits
	providerDir   string
	planResources bool
}

func newDiffCommand() *cobra.Command {
	o := &diffOptions{}
	cmd := &cobra.Command{
		Use:   "diff [--templates DIR] | --revision A [--against B] KIND/NAME",
		Short: "Show what the templates would change in the cluster, or how two stored revisions differ for one object",
		Long: `Diff renders every existing parent of the templates' kinds (or only the
objects in -f) with the templates in --templates and the live state of their
children, dry-runs a server-side apply of each child, and prints a unified
diff per object that would be created, changed or pruned, then a summary per
kind. External resources (buckets, databases) are planned by their
providers, read only: each says Create, Update with the fields that change,
Refuse (an immutable field, a foreign resource) or Replace, and a resource
the template no longer renders is Delete or Orphan as its deletionPolicy
says; a secret is shown as "(sensitive) set", never its value. The provider
plugins are those of engine run (--provider-dir), with the same
credentials from the environment. It never writes. Run it before a
template edit goes live.

With --revision A and one object (KIND/NAME, or KIND NAME, in -n NAMESPACE
or the kubeconfig's), it compares two stored revisions of the kind's
template instead: it renders the object with revision B (--against; by
default the revision the object runs, status.templateRevision) and with
revision A, both seeing the observed state of its live children, and prints
a unified diff of each child, external resource and status field that
differs, from B to A. Nothing is printed when they render the same. No dry
run: both sides are what the engine would apply. KIND is what kubectl takes
(MyKind, mykinds, mk, MyKind.webapp.my.domain); the revisions are found as
` + "`engine rollout`" + ` finds them, --revision-namespace names their namespace.

Exit status: 0 when nothing would change (or the two revisions render the
same), 1 when something would (or they differ), 2 on error, 3 when an
external resource would be deleted or replaced (its data lost).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validate(cmd, args); err != nil {
				return &exitError{code: 2, msg: err.Error()}
			}
			if o.revisions.revision != "" {
				return o.revisions.run(cmd, o.kubeconfig, o.limits)
			}
			return o.run(cmd)
		},
	}
	cmd.Flags().StringVar(&o.templates, "templates", "templates", "templates directory (the version to compare with the cluster)")
	cmd.Flags().StringVarP(&o.file, "filename", "f", "", "diff only the parents in this file")
	cmd.Flags().StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster)")
	cmd.Flags().StringVar(&o.providerDir, "provider-dir", "", "directory of the provider plugins that plan the external resources (default: the engine binary's directory)")
	cmd.Flags().BoolVar(&o.planResources, "plan-resources", true, "ask the providers what they would do to the external resources (false: list them, unplanned)")
	addLimitFlags(cmd.Flags(), &o.limits)
	o.revisions.flags(cmd)
	return cmd
}

func (o *diffOptions) run(cmd *cobra.Command) error {
	ctx := cmd.Context()
	cfg, err := (&runOptions{kubeconfig: o.kubeconfig}).restConfig()
	if err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	// Children are checked against the cluster's schemas too (another
	// operator's CRDs), as engine run checks them.
	cluster, err := engine.NewClusterSchemas(cfg)
	if err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	set, err := templates.LoadWith(o.templates, templates.LoadOptions{Cluster: cluster})
	if err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	for _, u := range set.Unchecked() {
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s\n", u)
	}
	c, err := client.New(cfg, client.Options{Scheme: newScheme()})
	if err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	only := map[schema.GroupVersionKind][]*unstructured.Unstructured{}
	if o.file != "" {
		objs, err := readObjects(o.file, cmd.InOrStdin())
		if err != nil {
			return &exitError{code: 2, msg: err.Error()}
		}
		for _, obj := range objs {
			if _, ok := set.Lookup(obj.GroupVersionKind()); !ok {
				return &exitError{code: 2, msg: fmt.Sprintf("%s %s: no template for %s", obj.GetKind(), obj.GetName(), obj.GroupVersionKind())}
			}
			live := obj.DeepCopy()
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), live); err == nil {
				obj = live // the stored object, with its UID: its children are found
			}
			only[obj.GroupVersionKind()] = append(only[obj.GroupVersionKind()], obj)
		}
	}
	d := &diff.Differ{Client: c, Mapper: c.RESTMapper(), Out: cmd.OutOrStdout(), Limits: o.limits, Budget: render.NewBudget(render.BudgetLimits{})}
	if o.planResources && slices.ContainsFunc(set.Templates(), (*templates.Template).HasResources) {
		registry, stop, err := o.startProviders(ctx)
		if err != nil {
			return &exitError{code: 2, msg: err.Error()}
		}
		defer stop()
		d.Providers = registry
	}
	var sums []diff.Summary
	changes, destroys := 0, 0
	for _, t := range set.Templates() {
		if o.file != "" && len(only[t.GVK]) == 0 {
			continue
		}
		sum, err := d.DiffKind(ctx, t, only[t.GVK])
		if err != nil {
			return &exitError{code: 2, msg: fmt.Sprintf("template %s: %v", t.Path, err)}
		}
		sums = append(sums, sum)
		changes += sum.Changes()
		destroys += sum.Destroys()
	}
	fmt.Fprintln(cmd.OutOrStdout(), "# summary")
	diff.FormatSummary(cmd.OutOrStdout(), sums)
	switch {
	case destroys > 0:
		return &exitError{code: 3}
	case changes > 0:
		return &exitError{code: 1}
	}
	return nil
}

// startProviders runs the provider plugins on demand (the first plan
// starts a plugin) until stop, which waits for them to end.
func (o *diffOptions) startProviders(ctx context.Context) (*providers.Registry, func(), error) {
	registry, plugins, err := newProviders(logr.Discard(), o.providerDir, pluginPing{})
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, p := range plugins {
		wg.Go(func() { _ = p.Run(ctx) })
	}
	return registry, func() { cancel(); wg.Wait() }, nil
}
