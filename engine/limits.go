package engine

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/templates"
)

// Limits bound what one parent may cost the engine, so that no parent, by
// its spec or by its template, can stall or exhaust the engine for the
// others. A parent over a limit is Synced=False with a reason that names
// the limit, and is not evaluated again until its spec or its template
// changes.
type Limits struct {
	// EvaluationTimeout bounds one evaluation of the template for one
	// parent. CUE cannot be interrupted: past the timeout the worker moves
	// on while the evaluation runs to its end in the background (counted by
	// engine_evaluations_overrunning), and the parent is not evaluated
	// again until its spec or its template changes.
	EvaluationTimeout time.Duration
	// MaxChildren bounds the children and external resources one parent
	// may render.
	MaxChildren int
	// MaxRenderedBytes bounds the size of what one parent renders
	// (children, resources and status, as JSON).
	MaxRenderedBytes int
}

// DefaultLimits are generous for any template written for a purpose and
// small enough that one parent cannot take the engine down.
var DefaultLimits = Limits{EvaluationTimeout: 10 * time.Second, MaxChildren: 1000, MaxRenderedBytes: 10 << 20}

// overLimit remembers, per parent, the inputs that went over a limit, so
// they are not evaluated again.
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

// boundedRender renders the template for the parent (Render, within the
// limits). Inputs that went over a limit before are refused at once with
// the same error, without evaluating.
func (r *reconciler) boundedRender(t *templates.Template, parent *unstructured.Unstructured, observed map[string]any) (*Rendered, error) {
	if err := r.overLimit.check(t, parent); err != nil {
		return nil, err
	}
	start := time.Now()
	out, err := Render(t, parent, observed, RenderOptions{Limits: r.limits, Scoper: r.scoper})
	metricEvaluateSeconds.WithLabelValues(contract.KindString(t.GVK)).Observe(time.Since(start).Seconds())
	if err == nil && out.Result.Remembered {
		metricEvaluationsRemembered.WithLabelValues(contract.KindString(t.GVK)).Inc()
	}
	if err != nil {
		if se := (*stepError)(nil); errors.As(err, &se) {
			metricLimitExceeded.WithLabelValues(contract.KindString(t.GVK), se.reason).Inc()
			r.overLimit.record(t, parent, err)
		}
		return nil, err
	}
	return out, nil
}

// evaluateWithin runs one evaluation and waits for it at most timeout.
func evaluateWithin(t *templates.Template, in templates.Input, timeout time.Duration) (*templates.Result, error) {
	if timeout <= 0 {
		return t.Evaluate(in)
	}
	type result struct {
		out *templates.Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := t.Evaluate(in)
		done <- result{out, err}
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case res := <-done:
		return res.out, res.err
	case <-timer.C:
		metricEvaluationsOverrunning.Inc()
		go func() {
			<-done
			metricEvaluationsOverrunning.Dec()
		}()
		return nil, terminalError(contract.ReasonEvaluationTimeout, fmt.Errorf(
			"evaluating the template took longer than %s (--evaluation-timeout); it is not evaluated again for this object until its spec or the template changes", timeout))
	}
}

// checkResult refuses a rendering over the size limits.
func (l Limits) checkResult(out *templates.Result) error {
	if n := len(out.Children) + len(out.Resources); l.MaxChildren > 0 && n > l.MaxChildren {
		return terminalError(contract.ReasonTooManyChildren, fmt.Errorf(
			"the template renders %d children and resources for this object, more than the %d allowed (--max-children); nothing was applied", n, l.MaxChildren))
	}
	if l.MaxRenderedBytes > 0 && out.Size > l.MaxRenderedBytes {
		return terminalError(contract.ReasonRenderTooLarge, fmt.Errorf(
			"the template renders %d bytes for this object, more than the %d allowed (--max-rendered-bytes); nothing was applied", out.Size, l.MaxRenderedBytes))
	}
	return nil
}
