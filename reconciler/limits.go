package reconciler

import (
	"errors"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/templates"
)

// overLimit remembers, per parent, the inputs that went over a limit
// (render.Limits), so they are not evaluated again.
type overLimit struct {
	mu      sync.Mutex
	parents map[types.NamespacedName]overLimitEntry
}

type overLimitEntry struct {
	uid        types.UID
	generation int64
	template   string // the template's hash
	err        error
}

func (o *overLimit) check(t *templates.Template, parent *unstructured.Unstructured) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	e, ok := o.parents[keyOfParent(parent)]
	if ok && e.uid == parent.GetUID() && e.generation == parent.GetGeneration() && e.template == t.Hash {
		return e.err
	}
	return nil
}

func (o *overLimit) record(t *templates.Template, parent *unstructured.Unstructured, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.parents == nil {
		o.parents = map[types.NamespacedName]overLimitEntry{}
	}
	o.parents[keyOfParent(parent)] = overLimitEntry{uid: parent.GetUID(), generation: parent.GetGeneration(), template: t.Hash, err: err}
}

func (o *overLimit) forget(key types.NamespacedName) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.parents, key)
}

func keyOfParent(parent *unstructured.Unstructured) types.NamespacedName {
	return types.NamespacedName{Namespace: parent.GetNamespace(), Name: parent.GetName()}
}

// boundedRender renders the template for the parent (render.Render, within
// the limits). Inputs that went over a limit before are refused at once with
// the same error, without evaluating.
func (r *Reconciler) boundedRender(t *templates.Template, parent *unstructured.Unstructured, observed map[string]any) (*render.Rendered, error) {
	if err := r.overLimit.check(t, parent); err != nil {
		return nil, err
	}
	start := time.Now()
	out, err := render.Render(t, parent, observed, render.Options{Limits: r.limits, Scoper: r.scoper, Bound: r.bound(t, parent)})
	metricEvaluateSeconds.WithLabelValues(contract.KindString(t.GVK)).Observe(time.Since(start).Seconds())
	if err == nil && out.Result.Remembered {
		metricEvaluationsRemembered.WithLabelValues(contract.KindString(t.GVK)).Inc()
	}
	if err != nil {
		// A *render.Error from Render is a limit exceeded; an
		// evaluation error (the template's or the spec's) is not one.
		if re := (*render.Error)(nil); errors.As(err, &re) {
			metricLimitExceeded.WithLabelValues(contract.KindString(t.GVK), re.Reason).Inc()
			r.overLimit.record(t, parent, err)
		}
		return nil, err
	}
	return out, nil
}
