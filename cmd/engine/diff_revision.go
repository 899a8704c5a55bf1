package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/diff"
	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/revisions"
)

// revisionDiffOptions are the flags of `engine diff --revision A [--against
// B] KIND/NAME`: one object rendered with two stored revisions.
type revisionDiffOptions struct {
	revision          string // A, as typed
	against           string // B, as typed; "" for the revision the object runs
	namespace         string
	revisionNamespace string

	// Parsed by validate.
	kind, name string
	a, b       int64 // b is 0 when the object's own revision is meant
}

func (o *revisionDiffOptions) flags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.revision, "revision", "", "compare two stored revisions for one object, KIND/NAME: render it with this revision number")
	cmd.Flags().StringVar(&o.against, "against", "", "with --revision: the revision number to compare with (default: the one the object runs, status.templateRevision)")
	cmd.Flags().StringVarP(&o.namespace, "namespace", "n", "", "with --revision: the object's namespace (default: the kubeconfig's)")
	cmd.Flags().StringVar(&o.revisionNamespace, "revision-namespace", "", "with --revision: namespace of the revisions (default: found by their label in any namespace)")
}

// validate checks that the flags and arguments make one of the two diffs,
// and parses those of a revision diff.
func (o *diffOptions) validate(cmd *cobra.Command, args []string) error {
	r := &o.revisions
	if r.revision == "" {
		switch {
		case r.against != "":
			return errors.New("--against needs --revision: it names the revision that --revision is compared with")
		case r.namespace != "" || r.revisionNamespace != "":
			return errors.New("--namespace and --revision-namespace go with --revision: without it, engine diff compares --templates with every object of their kinds (-f names some)")
		case len(args) > 0:
			return fmt.Errorf("unexpected argument %q: an object (KIND/NAME) is named only with --revision; without it, engine diff compares --templates with every object of their kinds (-f names some)", args[0])
		}
		return nil
	}
	switch {
	case cmd.Flags().Changed("templates"):
		return errors.New("--templates and --revision do not go together: --revision compares two stored revisions of the kind's template, --templates a directory with the cluster")
	case o.file != "":
		return errors.New("-f and --revision do not go together: name the object as KIND/NAME")
	}
	var err error
	if r.kind, r.name, err = parseObjectArgs(args); err != nil {
		return err
	}
	if r.a, err = parseRevisionNumber("--revision", r.revision); err != nil {
		return err
	}
	if r.against != "" {
		if r.b, err = parseRevisionNumber("--against", r.against); err != nil {
			return err
		}
	}
	return nil
}

// parseObjectArgs reads the object of a revision diff: KIND/NAME, or KIND NAME.
func parseObjectArgs(args []string) (kind, name string, err error) {
	usage := "--revision diffs one object: name it as KIND/NAME (mykind/web) or KIND NAME"
	switch len(args) {
	case 1:
		kind, name, ok := strings.Cut(args[0], "/")
		if !ok || kind == "" || name == "" || strings.Contains(name, "/") {
			return "", "", fmt.Errorf("%q is not KIND/NAME: %s", args[0], usage)
		}
		return kind, name, nil
	case 2:
		if args[0] == "" || args[1] == "" || strings.Contains(args[0], "/") || strings.Contains(args[1], "/") {
			return "", "", fmt.Errorf("%q is not KIND NAME: %s", strings.Join(args, " "), usage)
		}
		return args[0], args[1], nil
	case 0:
		return "", "", errors.New(usage)
	}
	return "", "", fmt.Errorf("too many arguments (%d): %s", len(args), usage)
}

// parseRevisionNumber reads a revision number as `engine rollout history` prints it.
func parseRevisionNumber(flag, v string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s %q is not a revision number: `engine rollout history KIND` lists them (1, 2, ...)", flag, v)
	}
	return n, nil
}

// run renders the object with revisions B and A and prints the diff.
func (o *revisionDiffOptions) run(cmd *cobra.Command, kubeconfig string, limits render.Limits) error {
	ctx := cmd.Context()
	fail := func(err error) error { return &exitError{code: 2, msg: err.Error()} }
	cfg, err := (&runOptions{kubeconfig: kubeconfig}).restConfig()
	if err != nil {
		return fail(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fail(err)
	}
	gvk, err := resolveKind(ctx, kindMapper(dc), o.kind)
	if err != nil {
		return fail(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: newScheme()})
	if err != nil {
		return fail(err)
	}
	parent := &unstructured.Unstructured{}
	parent.SetGroupVersionKind(gvk)
	key := client.ObjectKey{Name: o.name}
	where := ""
	if namespaced, err := c.IsObjectNamespaced(parent); err != nil {
		return fail(fmt.Errorf("resolving the kind %q: %w", o.kind, err))
	} else if namespaced {
		if key.Namespace, err = o.objectNamespace(kubeconfig); err != nil {
			return fail(err)
		}
		where = " in namespace " + key.Namespace
	}
	if err := c.Get(ctx, key, parent); err != nil {
		if apierrors.IsNotFound(err) {
			return fail(fmt.Errorf("%s %q not found%s", gvk.GroupKind(), o.name, where))
		}
		return fail(fmt.Errorf("reading %s %q%s: %w", gvk.GroupKind(), o.name, where, err))
	}
	kr, err := revisions.Find(ctx, c, gvk.GroupKind(), o.revisionNamespace)
	if err != nil {
		return fail(err)
	}
	to, err := numbered(kr, o.a, o.kind)
	if err != nil {
		return fail(err)
	}
	from, err := base(kr, parent, o.b, o.kind)
	if err != nil {
		return fail(err)
	}
	var renderings [2]diff.Rendering
	for i, rev := range []revisions.Revision{from, to} {
		t, err := revisions.LoadRevision(kr.Object(rev.Name), gvk)
		if err != nil {
			return fail(err)
		}
		renderings[i] = diff.Rendering{Name: fmt.Sprintf("revision %d", rev.Number), Template: t}
	}
	d := &diff.Differ{Client: c, Mapper: c.RESTMapper(), Out: cmd.OutOrStdout(), Limits: limits, Budget: render.NewBudget(render.BudgetLimits{})}
	sum, err := d.DiffRenderings(ctx, parent, renderings[0], renderings[1])
	if err != nil {
		return fail(err)
	}
	if sum.Changes() > 0 {
		return &exitError{code: 1}
	}
	return nil
}

// objectNamespace is -n, or the kubeconfig's namespace (in a pod, the
// pod's), or "default".
func (o *revisionDiffOptions) objectNamespace(kubeconfig string) (string, error) {
	if o.namespace != "" {
		return o.namespace, nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	ns, _, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).Namespace()
	if err != nil {
		return "", fmt.Errorf("reading the namespace from the kubeconfig (-n names one): %w", err)
	}
	return ns, nil
}

// numbered returns the stored revision with a number.
func numbered(k *revisions.Stored, n int64, arg string) (revisions.Revision, error) {
	if rev, ok := k.ByNumber(n); ok {
		return rev, nil
	}
	numbers := make([]string, len(k.Revisions))
	for i, rev := range k.Revisions {
		numbers[i] = strconv.FormatInt(rev.Number, 10)
	}
	kind, _, _ := strings.Cut(k.Kind, "/")
	return revisions.Revision{}, fmt.Errorf("%s has no revision %d: its stored revisions are %s (`engine rollout history %s`)", kind, n, strings.Join(numbers, ", "), arg)
}

// base returns the revision a diff starts from: number n, or, when n is 0,
// the one the object runs, found by its hash (a revision renumbered since
// keeps its hash).
func base(k *revisions.Stored, parent *unstructured.Unstructured, n int64, arg string) (revisions.Revision, error) {
	if n > 0 {
		return numbered(k, n, arg)
	}
	object := fmt.Sprintf("%s %s", parent.GetKind(), objectName(parent))
	number, hash := contract.ParentRevision(parent)
	switch {
	case hash != "":
		if rev, ok := k.ByHash(hash); ok {
			return rev, nil
		}
		return revisions.Revision{}, fmt.Errorf("%s runs revision %d (%s), which is no longer stored: name the revision to compare with, --against B", object, number, hash)
	case number > 0:
		return numbered(k, number, arg)
	}
	return revisions.Revision{}, fmt.Errorf("%s runs no revision yet (its status.templateRevision is empty): name the revision to compare with, --against B", object)
}

// objectName is "ns/name", or "name" for a cluster-scoped object.
func objectName(obj client.Object) string {
	if obj.GetNamespace() == "" {
		return obj.GetName()
	}
	return obj.GetNamespace() + "/" + obj.GetName()
}
