package reconciler

import (
	"context"
	"errors"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/templates"
)

// References is what the reconciler needs of the engine's cache of
// referenced objects: objects the templates read and never write.
type References interface {
	// Track records what the parent references, so that a change of any
	// of them (its appearance too) requeues the parent; nil forgets it.
	Track(parent types.NamespacedName, refs []templates.Reference)
	// Read returns the cached objects the reference may match, its kind
	// watched from then on: only to be read.
	Read(ctx context.Context, ref templates.Reference) ([]*unstructured.Unstructured, error)
}

// referenced is what one reconcile read of the parent's references.
type referenced struct {
	// observed holds each reference's view by local name (render.Observed).
	observed map[string]any
	// versions identifies every object read, with its resource version,
	// for the settled check's fingerprint.
	versions []string
}

// readReferences evaluates the parent's references (render.ResolveReferences),
// tells the reference cache to requeue the parent when any of them changes,
// and reads them. A reference the policy refuses is a terminal problem; a
// reference that does not exist makes the parent wait: the reconcile ends
// here, so nothing is created, updated or deleted on its account (the
// children it has are kept as they are), and the watch brings it back when
// the object appears. Nil for a template without references.
func (r *Reconciler) readReferences(ctx context.Context, t *templates.Template, parent *unstructured.Unstructured, owned render.OwnedChildren, st *status) (*referenced, error) {
	key := types.NamespacedName{Namespace: parent.GetNamespace(), Name: parent.GetName()}
	if !t.HasReferences() {
		r.forgetReferences(key) // a template edited to have none
		return nil, nil
	}
	if r.references == nil {
		return nil, fmt.Errorf("template %s has references, and this engine reads none", t.Path)
	}
	refs, err := render.ResolveReferences(t, parent, r.scoper, r.limits)
	if err != nil {
		r.forgetReferences(key)
		var re *render.Error
		if errors.As(err, &re) && re.Reason == contract.ReasonReferenceRefused {
			err = terminalError(re.Reason, re)
			st.fail(re.Reason, err)
			st.ready = condition{status: metav1.ConditionFalse, reason: re.Reason, message: SafeMessage(re.Error())}
			return nil, err
		}
		return nil, st.templateFailed(err)
	}
	r.references.Track(key, refs)
	out := &referenced{observed: make(map[string]any, len(refs))}
	var missing []templates.Reference
	for _, ref := range refs {
		objs, err := r.references.Read(ctx, ref)
		if err != nil {
			return nil, fmt.Errorf("reading reference %s: %w", ref.Name, err)
		}
		view, ok := render.Observed(ref, objs)
		if !ok {
			missing = append(missing, ref)
			continue
		}
		out.observed[ref.Name] = view
		for _, o := range objs {
			if render.Matches(ref, o) {
				out.versions = append(out.versions, fmt.Sprintf("%s=%s/%s/%s/%s", ref.Name, o.GroupVersionKind(), o.GetNamespace(), o.GetName(), o.GetResourceVersion()))
			}
		}
	}
	if len(missing) > 0 {
		err := waitingError(contract.ReasonReferenceNotFound, 0, render.MissingReferences(missing, len(owned)))
		st.fail(contract.ReasonReferenceNotFound, err)
		st.ready = condition{status: metav1.ConditionFalse, reason: contract.ReasonReferenceNotFound, message: SafeMessage(err.Error())}
		return nil, err
	}
	slices.Sort(out.versions)
	return out, nil
}

// withReferences returns the observed state with the references' views.
func withReferences(observed map[string]any, refs *referenced) map[string]any {
	if refs == nil || len(refs.observed) == 0 {
		return observed
	}
	out := make(map[string]any, len(observed)+len(refs.observed))
	for k, v := range observed {
		out[k] = v
	}
	for k, v := range refs.observed {
		out[k] = v
	}
	return out
}

// forgetReferences stops requeueing the parent for its references.
func (r *Reconciler) forgetReferences(key types.NamespacedName) {
	if r.references != nil {
		r.references.Track(key, nil)
	}
}
