package render

import (
	"fmt"
	"time"

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
	// again until its spec or its template changes; what such evaluations
	// may hold engine-wide is the Budget's to bound.
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

// WithDefaults fills the zero fields from DefaultLimits: the one place
// limits are defaulted (Render does it, and so does the engine for what it
// hands its reconcilers and rollouts).
func (l Limits) WithDefaults() Limits {
	if l.EvaluationTimeout == 0 {
		l.EvaluationTimeout = DefaultLimits.EvaluationTimeout
	}
	if l.MaxChildren == 0 {
		l.MaxChildren = DefaultLimits.MaxChildren
	}
	if l.MaxRenderedBytes == 0 {
		l.MaxRenderedBytes = DefaultLimits.MaxRenderedBytes
	}
	return l
}

// evaluateWithin runs one evaluation and waits for it at most timeout.
// An evaluation past the timeout is counted in the budget, if any, until
// it ends.
func evaluateWithin(t *templates.Template, in templates.Input, timeout time.Duration, call *budgetCall) (*templates.Result, error) {
	return within(timeout, call, func() (*templates.Result, error) { return t.Evaluate(in) })
}

// within runs one evaluation (fn) bounded by timeout; an overrun is left to
// finish in the background, counted (and in the budget's call, if any).
func within[T any](timeout time.Duration, call *budgetCall, fn func() (T, error)) (T, error) {
	if timeout <= 0 {
		return fn()
	}
	type result struct {
		out T
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := fn()
		done <- result{out, err}
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case res := <-done:
		return res.out, res.err
	case <-timer.C:
		metricEvaluationsOverrunning.Inc()
		ended := call.overran()
		go func() {
			<-done
			ended()
			metricEvaluationsOverrunning.Dec()
		}()
		var none T
		return none, &Error{Reason: contract.ReasonEvaluationTimeout, Err: fmt.Errorf(
			"evaluating the template took longer than %s (--evaluation-timeout); it is not evaluated again for this object until its spec or the template changes", timeout)}
	}
}

// checkResult refuses a rendering over the size limits.
func (l Limits) checkResult(out *templates.Result) error {
	if n := len(out.Children) + len(out.Resources); l.MaxChildren > 0 && n > l.MaxChildren {
		return &Error{Reason: contract.ReasonTooManyChildren, Err: fmt.Errorf(
			"the template renders %d children and resources for this object, more than the %d allowed (--max-children); nothing was applied", n, l.MaxChildren)}
	}
	if l.MaxRenderedBytes > 0 && out.Size > l.MaxRenderedBytes {
		return &Error{Reason: contract.ReasonRenderTooLarge, Err: fmt.Errorf(
			"the template renders %d bytes for this object, more than the %d allowed (--max-rendered-bytes); nothing was applied", out.Size, l.MaxRenderedBytes)}
	}
	return nil
}
