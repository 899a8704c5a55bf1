package render

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/evaluator"
	"github.com/cuengine/engine/templates"
)

// Isolate has the budget send to pool the evaluations that may run away:
// those of a template a parent can make as large as it likes
// (templates.Template.MayRunAway, what `engine vet` warns of), and those
// of an object whose evaluation ran past the timeout before (a suspect),
// whatever its template. There an evaluation past the timeout or past the
// process's memory is stopped, so it holds nothing afterwards and counts
// in no bar of the budget; the rest evaluate in the engine's process,
// where they cost least. Called once, before the budget is used.
func (b *Budget) Isolate(pool *evaluator.Pool) { b.pool = pool }

// Pool returns the pool Isolate gave, nil for none (or a nil budget).
func (b *Budget) Pool() *evaluator.Pool {
	if b == nil {
		return nil
	}
	return b.pool
}

// isolation returns the pool for t and the call, or nil to evaluate in
// process.
func (c *budgetCall) isolation(t *templates.Template) *evaluator.Pool {
	if c == nil || c.b.pool == nil {
		return nil
	}
	if t.MayRunAway() || c.annotated {
		return c.b.pool
	}
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	if e := c.b.objects[c.key]; e != nil && e.uid == c.uid && e.overran {
		return c.b.pool
	}
	return nil
}

// admitIsolated is admit for an evaluation in a process: only the
// memory of inputs that went over a limit refuses it; the bars on what
// evaluations past the timeout hold in process do not apply.
func (c *budgetCall) admitIsolated() error {
	b := c.b
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.objects[c.key]
	if e != nil && e.uid != c.uid {
		delete(b.objects, c.key)
		e = nil
	}
	if e != nil && e.err != nil && e.inputs == c.inputs && e.template == c.template {
		b.remembered.Add(1)
		metricEvaluationsRefused.WithLabelValues("remembered").Inc()
		return &rememberedError{e.err}
	}
	if c.current {
		b.remembered.Add(1)
		metricEvaluationsRefused.WithLabelValues("remembered").Inc()
		return &rememberedError{&Error{Reason: contract.ReasonEvaluationBudgetExceeded, Err: errOverranBefore}}
	}
	b.evaluated.Add(1)
	return nil
}

// evaluateIsolated is evaluate in a process of pool.
func evaluateIsolated(pool *evaluator.Pool, t *templates.Template, parent *unstructured.Unstructured, observed map[string]any, limits Limits, call *budgetCall) (*templates.Result, error) {
	if err := call.admitIsolated(); err != nil {
		return nil, err
	}
	out, err := isolated(limits, func(ctx context.Context) (*templates.Result, error) {
		return pool.Evaluate(ctx, poolKey(parent), limits.EvaluationTimeout, t, templates.Input{Parent: parent, Observed: observed})
	})
	if err == nil {
		err = limits.checkResult(out)
	}
	call.done(err)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// poolKey is the parent's share of the pool: its kind and namespace.
func poolKey(parent *unstructured.Unstructured) evaluator.Key {
	return evaluator.Key{Kind: parent.GroupVersionKind().GroupKind().String(), Namespace: parent.GetNamespace()}
}

// isolated runs fn, which calls into a pool, waiting for a process at
// most the evaluation timeout, and turns the pool's refusals into the
// limits' errors.
func isolated[T any](limits Limits, fn func(ctx context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limits.EvaluationTimeout)
	defer cancel()
	out, err := fn(ctx)
	var le *evaluator.LimitError
	var be *evaluator.BusyError
	switch {
	case errors.As(err, &le) && le.Memory:
		err = &Error{Reason: contract.ReasonEvaluationMemoryExceeded, Err: fmt.Errorf(
			"evaluating the template: %s; it is not evaluated again for this object until its spec or the template changes", le)}
	case errors.As(err, &le):
		err = &Error{Reason: contract.ReasonEvaluationTimeout, Err: fmt.Errorf(
			"evaluating the template took longer than %s (--evaluation-timeout) and was stopped; it is not evaluated again for this object until its spec or the template changes", le.Timeout)}
	case errors.As(err, &be):
		metricEvaluationsRefused.WithLabelValues("busy").Inc()
		err = &Error{Reason: contract.ReasonEvaluationBudgetExceeded, Err: &freshRefusal{fmt.Errorf(
			"this template is evaluated in the engine's evaluator processes, and %s: it is evaluated again shortly", be.Reason)}}
	}
	return out, err
}
