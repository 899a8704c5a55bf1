package render

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/templates"
)

// ReferenceReader reads the objects a placed reference may match, each
// with the reference's kind set; a named object that does not exist is
// none, not an error. The objects are only read. The engine's cache of
// referenced objects is one (package engine), LiveReader reads the
// cluster, Given the objects an offline rendering is given.
type ReferenceReader interface {
	Read(ctx context.Context, ref templates.Reference) ([]*unstructured.Unstructured, error)
}

// ObserveOptions are what Observe places the references with and how it
// reports.
type ObserveOptions struct {
	// Scoper tells namespaced kinds from cluster-scoped ones; nil is
	// OfflineScoper.
	Scoper Scoper
	// Limits bound the evaluation of the references; zero fields take
	// DefaultLimits.
	Limits Limits
	// Children counts the children the parent has, for the message of a
	// missing reference (MissingReferencesError).
	Children int
	// Placed, when set, is told the placed references once they are
	// known, before any is read; nil when they cannot be placed. The
	// engine's cache watches what it is told (reconciler/references.go).
	Placed func(refs []templates.Reference)
}

// Observation is what a template sees of one parent's inputs.
type Observation struct {
	// Observed is the live state Observe was given with each reference's
	// view (Observed) by its local name over it.
	Observed map[string]any
	// Versions identifies every object a reference matched, with its
	// resource version, sorted: what changes when an input does.
	Versions []string

	// views are the references' views alone, by local name.
	views map[string]any
}

// MissingReferencesError is a parent a reference of which does not exist:
// the engine waits for it, changing nothing. It says which and what the
// engine does meanwhile: nothing, keeping the children there are.
type MissingReferencesError struct {
	// References are the missing references, by local name.
	References []templates.Reference
	// Children counts the children the parent has meanwhile.
	Children int
}

func (e *MissingReferencesError) Error() string {
	names := make([]string, len(e.References))
	for i, ref := range e.References {
		names[i] = fmt.Sprintf("%s (references.%s)", ref, ref.Name)
	}
	if e.Children > 0 {
		return fmt.Sprintf("referenced %s not found: the %d existing children are kept as they are, nothing is created, updated or deleted until it exists again",
			strings.Join(names, ", "), e.Children)
	}
	return fmt.Sprintf("waiting for referenced %s: nothing is created until it exists", strings.Join(names, ", "))
}

// ReadReferenceError is a reference the reader could not read.
type ReadReferenceError struct {
	// Name is the reference's local name.
	Name string
	Err  error
}

func (e *ReadReferenceError) Error() string {
	return fmt.Sprintf("reading reference %s: %v", e.Name, e.Err)
}

func (e *ReadReferenceError) Unwrap() error { return e.Err }

// Observe is the one door for what a template sees of a parent: it
// resolves the template's references (ResolveReferences), reads each
// through r, and returns live, the observed state of the children and
// resources, with each reference's view (Observed) over it. A reference
// whose view the reader gives by local name (Given.ByName) is not read.
// The reconcile reads through the engine's cache, the rollout's hold
// check through the cache or the cluster, `engine diff` through the
// cluster (LiveReader), `engine render` and `engine test` through the
// objects they are given (Given).
//
// A reference the policy refuses is ResolveReferences' error; one that
// cannot be read is a *ReadReferenceError; every reference
// that does not exist is in one *MissingReferencesError. live is not
// modified.
func Observe(ctx context.Context, t *templates.Template, parent *unstructured.Unstructured, live map[string]any, r ReferenceReader, opts ObserveOptions) (*Observation, error) {
	refs, err := ResolveReferences(t, parent, opts.Scoper, opts.Limits)
	if opts.Placed != nil {
		opts.Placed(refs) // nil on err
	}
	if err != nil {
		return nil, err
	}
	out := &Observation{views: make(map[string]any, len(refs))}
	given, _ := r.(Given)
	var missing []templates.Reference
	for _, ref := range refs {
		if view, ok := given.ByName[ref.Name]; ok {
			out.views[ref.Name] = view
			continue
		}
		objs, err := r.Read(ctx, ref)
		if err != nil {
			return nil, &ReadReferenceError{Name: ref.Name, Err: err}
		}
		view, ok := Observed(ref, objs)
		if !ok {
			missing = append(missing, ref)
			continue
		}
		out.views[ref.Name] = view
		for _, o := range objs {
			if Matches(ref, o) {
				out.Versions = append(out.Versions, fmt.Sprintf("%s=%s/%s/%s/%s", ref.Name, o.GroupVersionKind(), o.GetNamespace(), o.GetName(), o.GetResourceVersion()))
			}
		}
	}
	if len(missing) > 0 {
		return nil, &MissingReferencesError{References: missing, Children: opts.Children}
	}
	slices.Sort(out.Versions)
	out.Observed = out.With(live)
	return out, nil
}

// With returns live with the references' views over it: live itself when
// there are none, else a new map. The reconcile reads its references
// before the content of its children, and merges them here once it has.
func (o *Observation) With(live map[string]any) map[string]any {
	if o == nil || len(o.views) == 0 {
		return live
	}
	out := make(map[string]any, len(live)+len(o.views))
	maps.Copy(out, live)
	maps.Copy(out, o.views)
	return out
}

// LiveReader reads references from the cluster, or any client.Reader.
type LiveReader struct {
	Reader client.Reader
}

// Read implements ReferenceReader: the named object, or the objects the
// selector matches, each with the reference's kind set.
func (l LiveReader) Read(ctx context.Context, ref templates.Reference) ([]*unstructured.Unstructured, error) {
	if ref.ByName() {
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(ref.GVK)
		err := l.Reader.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.ObjectName}, obj)
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return []*unstructured.Unstructured{obj}, nil
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(ref.GVK.GroupVersion().WithKind(ref.GVK.Kind + "List"))
	opts := []client.ListOption{client.MatchingLabels(ref.Selector)}
	if ref.Namespace != "" {
		opts = append(opts, client.InNamespace(ref.Namespace))
	}
	if err := l.Reader.List(ctx, list, opts...); err != nil {
		return nil, err
	}
	out := make([]*unstructured.Unstructured, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
		out[i].SetGroupVersionKind(ref.GVK)
	}
	return out, nil
}

// Read implements ReferenceReader: every given live object, of which
// Observed keeps those the reference matches. A reference ByName gives is
// not read (Observe).
func (g Given) Read(context.Context, templates.Reference) ([]*unstructured.Unstructured, error) {
	return g.Live, nil
}
