package reconciler

import (
	"context"
	"errors"
	"fmt"

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

// readReferences reads the parent's references (render.Observe, through
// the engine's cache), which is told what the parent references, so that a
// change of any of them requeues the parent. A reference the policy
// refuses is a terminal problem; a reference that does not exist makes the
// parent wait: the reconcile ends here, so nothing is created, updated or
// deleted on its account (the children it has are kept as they are), and
// the watch brings it back when the object appears. The observation's
// Observed holds the references' views alone: Reconcile merges them with
// what it observes of the children once it reads them (Observation.With),
// after the settled check. Nil for a template without references.
func (r *Reconciler) readReferences(ctx context.Context, t *templates.Template, parent *unstructured.Unstructured, owned render.OwnedChildren, st *status) (*render.Observation, error) {
	key := types.NamespacedName{Namespace: parent.GetNamespace(), Name: parent.GetName()}
	if !t.HasReferences() {
		r.forgetReferences(key) // a template edited to have none
		return nil, nil
	}
	if r.references == nil {
		return nil, fmt.Errorf("template %s has references, and this engine reads none", t.Path)
	}
	obs, err := render.Observe(ctx, t, parent, nil, r.references, render.ObserveOptions{
		Scoper: r.scoper, Limits: r.limits, Children: len(owned),
		Placed: func(refs []templates.Reference) { r.references.Track(key, refs) },
	})
	var read *render.ReadReferenceError
	var re *render.Error
	var missing *render.MissingReferencesError
	switch {
	case err == nil:
		return obs, nil
	case errors.As(err, &read):
		return nil, err
	case errors.As(err, &re) && re.Reason == contract.ReasonReferenceRefused:
		err = terminalError(re.Reason, re)
		st.fail(re.Reason, err)
		st.ready = condition{status: metav1.ConditionFalse, reason: re.Reason, message: SafeMessage(re.Error())}
		return nil, err
	case errors.As(err, &missing):
		err := waitingError(contract.ReasonReferenceNotFound, 0, missing)
		st.fail(contract.ReasonReferenceNotFound, err)
		st.ready = condition{status: metav1.ConditionFalse, reason: contract.ReasonReferenceNotFound, message: SafeMessage(err.Error())}
		return nil, err
	default: // the references cannot be evaluated
		return nil, st.templateFailed(err)
	}
}

// forgetReferences stops requeueing the parent for its references.
func (r *Reconciler) forgetReferences(key types.NamespacedName) {
	if r.references != nil {
		r.references.Track(key, nil)
	}
}
