package diff

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/templates"
)

// Summary counts, per parent kind, what a template change would do.
type Summary struct {
	Kind      string
	Parents   int
	Created   int
	Changed   int
	Pruned    int
	Unchanged int
	Conflicts int
	Adopted   int // existing objects granted to their parent (also counted as changed or unchanged)
	Failed    int // parents the new template cannot evaluate
	Waiting   int // parents left alone: a reference of theirs does not exist
	// External resources, as their providers plan them (plans.go).
	ResourcesCreated, ResourcesUpdated, ResourcesUnchanged int
	// ResourcesRefused would fail without writing (an immutable field).
	ResourcesRefused int
	// ResourcesReplaced and ResourcesDeleted lose a resource's data.
	ResourcesReplaced, ResourcesDeleted int
	// ResourcesOrphaned leave the template and stay in place.
	ResourcesOrphaned int
	// ResourcesUnplanned were not planned (no provider plugins given).
	ResourcesUnplanned int
}

// Changes is the number of objects and external resources that would
// change.
func (s Summary) Changes() int {
	return s.Created + s.Changed + s.Pruned + s.ResourcesCreated + s.ResourcesUpdated + s.ResourcesRefused + s.Destroys() + s.ResourcesOrphaned
}

// Destroys is the number of external resources that would be deleted or
// replaced: their data would be lost.
func (s Summary) Destroys() int { return s.ResourcesReplaced + s.ResourcesDeleted }

// Differ computes what the templates would change in a live cluster. It is
// read-only: it lists and gets, and runs server-side apply as a dry run, so
// the apiserver's defaulting and admission shape the result, but it never
// persists anything.
type Differ struct {
	Client client.Client
	Mapper meta.RESTMapper
	Out    io.Writer
	// Limits bound each rendering, as in the engine; zero fields take
	// render.DefaultLimits.
	Limits render.Limits
	// Budget remembers the parents over a limit across the diff's
	// renderings, and bounds the evaluations that overran; nil remembers
	// nothing.
	Budget *render.Budget
	// Providers plan the external resources (plans.go); nil: they are
	// listed, not planned.
	Providers Providers
}

// DiffKind diffs every live parent of the template's kind (or only the given
// parents, when any) and writes a unified diff per object to Out.
func (d *Differ) DiffKind(ctx context.Context, t *templates.Template, only []*unstructured.Unstructured) (Summary, error) {
	sum := Summary{Kind: contract.KindString(t.GVK)}
	parents := only
	if len(parents) == 0 {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(t.GVK.GroupVersion().WithKind(t.GVK.Kind + "List"))
		if err := d.Client.List(ctx, list); err != nil {
			return sum, fmt.Errorf("listing %s: %w", t.GVK.Kind, err)
		}
		for i := range list.Items {
			parents = append(parents, &list.Items[i])
		}
	}
	for _, p := range parents {
		sum.Parents++
		if err := d.diffParent(ctx, t, p, &sum); err != nil {
			return sum, err
		}
	}
	return sum, nil
}

func (d *Differ) diffParent(ctx context.Context, t *templates.Template, parent *unstructured.Unstructured, sum *Summary) error {
	existing, err := d.children(ctx, t, parent)
	if err != nil {
		return err
	}
	live := render.NewLiveChildren(existing)
	in, err := d.observe(ctx, t, parent, live.Observed(parent))
	var missing *render.MissingReferencesError
	if errors.As(err, &missing) {
		// The engine would wait, changing nothing.
		sum.Waiting++
		fmt.Fprintf(d.Out, "# %s %s/%s: %v\n", parent.GetKind(), parent.GetNamespace(), parent.GetName(), missing)
		return nil
	}
	var out *render.Rendered
	if err == nil {
		out, err = render.Render(t, parent, in.Observed, d.renderOptions())
	}
	if err != nil {
		sum.Failed++
		fmt.Fprintf(d.Out, "# %s %s/%s: the new template fails: %s\n", parent.GetKind(), parent.GetNamespace(), parent.GetName(), templates.Summary(err, 3))
		return nil
	}
	for _, err := range out.Refused {
		sum.Failed++
		fmt.Fprintf(d.Out, "# %s %s/%s: %v\n", parent.GetKind(), parent.GetNamespace(), parent.GetName(), err)
	}
	kept := make(map[render.ChildKey]bool, len(out.Children))
	for _, obj := range out.Children {
		if cluster := render.ClusterOf(obj); cluster != "" {
			// Said, never diffed against this cluster, where it is not.
			fmt.Fprintf(d.Out, "# %s %s/%s: %s %s goes to workload cluster %s: not compared (engine diff reads this cluster only)\n",
				parent.GetKind(), parent.GetNamespace(), parent.GetName(), obj.GetKind(), obj.GetName(), cluster)
			continue
		}
		kept[render.ObjectKeyOf(obj)] = true
		if err := d.diffChild(ctx, parent, obj, live.Get(obj), sum); err != nil {
			return err
		}
	}
	for _, c := range existing {
		if !kept[render.ObjectKeyOf(c)] && !render.IsDeclaredConnectionSecret(out.Result.Resources, c) {
			sum.Pruned++
			d.write(parent, c, "pruned", clean(c), "")
		}
	}
	d.planResources(ctx, parent, out.Result.Resources, sum)
	return nil
}

func (d *Differ) renderOptions() render.Options {
	return render.Options{Limits: d.Limits, Scoper: render.MapperScoper{Mapper: d.Mapper}, Budget: d.Budget}
}

// observe is what t sees of the parent: live with the view of each of
// its references read from the cluster, as the engine reads them
// (render.Observe). A reference that does not exist is a
// *render.MissingReferencesError.
func (d *Differ) observe(ctx context.Context, t *templates.Template, parent *unstructured.Unstructured, live map[string]any) (*render.Observation, error) {
	return render.Observe(ctx, t, parent, live, render.LiveReader{Reader: d.Client}, render.ObserveOptions{Scoper: render.MapperScoper{Mapper: d.Mapper}, Limits: d.Limits})
}

// diffChild dry-runs the apply of one desired child and diffs the result
// against the live object.
func (d *Differ) diffChild(ctx context.Context, parent, obj, live *unstructured.Unstructured, sum *Summary) error {
	if live == nil {
		holder, err := render.HolderOf(ctx, d.Client, parent, obj)
		if err != nil {
			return err
		}
		if holder.Conflict != "" {
			sum.Conflicts++
			fmt.Fprintf(d.Out, "# %s %s/%s: %s\n", parent.GetKind(), parent.GetNamespace(), parent.GetName(), holder.Conflict)
			return nil
		}
		if holder.Adopt {
			sum.Adopted++
			fmt.Fprintf(d.Out, "# %s %s/%s: %s %s/%s would be adopted: its owner granted it (%s); the fields only its previous managers set are removed then, and not shown below\n",
				parent.GetKind(), parent.GetNamespace(), parent.GetName(), obj.GetKind(), obj.GetNamespace(), obj.GetName(), contract.AnnotationAdoptBy)
		}
		live = holder.Live
	}
	sent := obj
	if live != nil {
		// What the template leaves to other writers keeps its live value
		// (leftfields.go), as the engine applies it.
		for _, l := range leftAlone(obj, live) {
			fmt.Fprintf(d.Out, "# %s %s/%s: %s %s/%s: %s\n", parent.GetKind(), parent.GetNamespace(), parent.GetName(), obj.GetKind(), obj.GetNamespace(), obj.GetName(), l)
		}
		sent = render.KeepingLive(obj, live)
	}
	applied := render.WithAppliedHash(sent, render.AppliedHash(obj))
	err := d.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(applied), client.FieldOwner(contract.FieldManager), client.ForceOwnership, client.DryRunAll)
	if err != nil {
		sum.Failed++
		fmt.Fprintf(d.Out, "# %s %s/%s: the apiserver would refuse %s %s: %v\n", parent.GetKind(), parent.GetNamespace(), parent.GetName(), obj.GetKind(), obj.GetName(), err)
		return nil
	}
	after := clean(applied)
	if live == nil {
		sum.Created++
		d.write(parent, obj, "created", "", after)
		return nil
	}
	before := clean(live)
	if before == after {
		sum.Unchanged++
		return nil
	}
	sum.Changed++
	d.write(parent, obj, "changed", before, after)
	return nil
}

// children lists the parent's existing children of every kind its template
// can produce: the labelled objects that are provably its own.
func (d *Differ) children(ctx context.Context, t *templates.Template, parent *unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	inv, proofs := render.InventoryOf(parent), render.ProofsOf(parent)
	for _, gvk := range t.ChildKinds() {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := d.Client.List(ctx, list, client.MatchingLabels{contract.LabelParentUID: string(parent.GetUID())}); err != nil {
			if meta.IsNoMatchError(err) {
				continue
			}
			return nil, fmt.Errorf("listing %s: %w", gvk.Kind, err)
		}
		for i := range list.Items {
			if render.IsOurs(parent, &list.Items[i], inv, proofs) {
				out = append(out, &list.Items[i])
			}
		}
	}
	return out, nil
}

// clean renders an object as YAML without the fields that change on every
// write (resource version, managed fields, status...).
func clean(obj *unstructured.Unstructured) string {
	if obj == nil {
		return ""
	}
	c := obj.DeepCopy()
	for _, f := range [][]string{
		{"metadata", "managedFields"}, {"metadata", "resourceVersion"}, {"metadata", "generation"},
		{"metadata", "creationTimestamp"}, {"metadata", "uid"}, {"metadata", "annotations", contract.AnnotationAppliedHash},
		{"metadata", "annotations", "deployment.kubernetes.io/revision"}, {"status"},
	} {
		unstructured.RemoveNestedField(c.Object, f...)
	}
	if _, ok := obj.GetAnnotations()[contract.AnnotationConnectionSecretOf]; ok {
		hideSecretValues(c)
	}
	if len(c.GetAnnotations()) == 0 {
		unstructured.RemoveNestedField(c.Object, "metadata", "annotations")
	}
	b, err := yaml.Marshal(c.Object)
	if err != nil {
		return fmt.Sprintf("# %v\n", err)
	}
	return string(b)
}

func (d *Differ) write(parent, obj *unstructured.Unstructured, what, before, after string) {
	name := fmt.Sprintf("%s %s/%s", obj.GetKind(), obj.GetNamespace(), obj.GetName())
	text := Unified("live/"+name, "new/"+name, before, after)
	fmt.Fprintf(d.Out, "# %s %s/%s: %s %s\n%s", parent.GetKind(), parent.GetNamespace(), parent.GetName(), name, what, text)
}

// Unified returns the unified diff, with three lines of context, of two
// texts named fromFile and toFile; "" when they are equal.
func Unified(fromFile, toFile, a, b string) string {
	text, _ := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: splitLines(a), B: splitLines(b), FromFile: fromFile, ToFile: toFile, Context: 3,
	})
	return text
}

// splitLines splits text into its lines, each with its newline; none for
// "" (difflib.SplitLines adds an empty last line, which a diff would show).
func splitLines(text string) []string {
	if text == "" {
		return nil
	}
	lines := strings.SplitAfter(text, "\n")
	if last := len(lines) - 1; lines[last] == "" {
		lines = lines[:last]
	} else {
		lines[last] += "\n"
	}
	return lines
}

// FormatSummary writes one line per kind.
func FormatSummary(w io.Writer, sums []Summary) {
	sort.Slice(sums, func(i, j int) bool { return sums[i].Kind < sums[j].Kind })
	for _, s := range sums {
		var parts []string
		for _, p := range []struct {
			n    int
			what string
		}{{s.Created, "created"}, {s.Changed, "changed"}, {s.Pruned, "pruned"}, {s.Unchanged, "unchanged"}, {s.Adopted, "adopted"}, {s.Conflicts, "conflicts"}, {s.Failed, "failed"}, {s.Waiting, "waiting for references"},
			{s.ResourcesCreated, "resources created"}, {s.ResourcesUpdated, "resources updated"}, {s.ResourcesUnchanged, "resources unchanged"}, {s.ResourcesRefused, "resources refused"},
			{s.ResourcesReplaced, "resources replaced"}, {s.ResourcesDeleted, "resources deleted"}, {s.ResourcesOrphaned, "resources orphaned"}, {s.ResourcesUnplanned, "resources not planned"}} {
			if p.n > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", p.n, p.what))
			}
		}
		if len(parts) == 0 {
			parts = []string{"no children"}
		}
		fmt.Fprintf(w, "%s: %d parents: %s\n", s.Kind, s.Parents, strings.Join(parts, ", "))
	}
}
