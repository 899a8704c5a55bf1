package render

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/evaluator"
	"github.com/cuengine/engine/templates"
)

// Convert returns obj, received as raw (JSON), in version to of its kind
// (templates.Template.Convert), as JSON, within the limits an evaluation has: the evaluation timeout, and the
// rendered size for the converted object. It is the conversion webhook's
// one door to a template, so a parent cannot cost the engine more by being
// read in another version than by being reconciled. ended, when not nil,
// runs once the CUE work has ended: at once, or when a conversion that
// ran past the timeout finally does (the webhook holds a slot until then).
//
// With a pool, it converts in an evaluator process (stopped at the
// timeout, at a lower CPU priority than the engine: a flood of webhook
// requests yields the CPU to reconciles): a template that may run away
// (Template.MayRunAway) always, waiting for a process; another one there
// when a process is free at once, else in the engine's process, once
// share (when not nil) gives it a share of the engine's CPUs (it calls
// the release it returns when the conversion returns).
func Convert(t *templates.Template, obj *unstructured.Unstructured, raw []byte, to string, limits Limits, pool *evaluator.Pool, share Share, ended func()) ([]byte, error) {
	limits = limits.WithDefaults()
	if pool != nil {
		out, err := inPool(limits, t, ended, func(ctx context.Context) ([]byte, error) {
			out, _, err := pool.Convert(ctx, poolKey(obj), limits.EvaluationTimeout, t, [][]byte{raw}, to)
			if err != nil {
				return nil, err
			}
			return out[0], nil
		})
		if !errors.Is(err, errNoProcessFree) {
			if err != nil {
				return nil, err
			}
			return out, limits.checkConverted(len(out), to)
		}
	}
	release, err := share.take()
	if err != nil {
		if ended != nil {
			ended()
		}
		return nil, err
	}
	defer release()
	out, err := within(limits.EvaluationTimeout, nil, func() (*unstructured.Unstructured, error) {
		if ended != nil {
			defer ended()
		}
		return t.Convert(obj, to)
	})
	var re *Error
	if errors.As(err, &re) && re.Reason == contract.ReasonEvaluationTimeout {
		return nil, &Error{Reason: re.Reason, Err: fmt.Errorf("the conversion to %s took longer than %s (--evaluation-timeout)", to, limits.EvaluationTimeout)}
	}
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(out.Object)
	if err != nil {
		return nil, fmt.Errorf("encoding the converted object: %w", err)
	}
	return b, limits.checkConverted(len(b), to)
}

// Share takes a share of the engine's CPUs for an evaluation in its
// process, or says why not; the webhook's bound of the CPUs its requests
// take (a flood of them leaves the rest to reconciles).
type Share func() (release func(), err error)

func (s Share) take() (func(), error) {
	if s == nil {
		return func() {}, nil
	}
	return s()
}

// ConvertBatch is Convert of objs, all of t's kind and namespace (raws:
// their JSON as received), in one request to an evaluator process of
// pool, each object bounded as one conversion is: their JSON, or the
// index of the first that failed and its error. A template that may run
// away waits for a process; another one takes a process only if one is
// free at once, else ErrNoProcessFree: nothing was converted and ended
// was not run (convert them with Convert). ended, when not nil, runs once
// the process is done.
func ConvertBatch(t *templates.Template, objs []*unstructured.Unstructured, raws [][]byte, to string, limits Limits, pool *evaluator.Pool, ended func()) ([][]byte, int, error) {
	limits = limits.WithDefaults()
	failed := 0
	out, err := inPool(limits, t, ended, func(ctx context.Context) ([][]byte, error) {
		out, answered, err := pool.Convert(ctx, poolKey(objs[0]), limits.EvaluationTimeout, t, raws, to)
		failed = answered
		return out, err
	})
	if errors.Is(err, errNoProcessFree) {
		return nil, 0, ErrNoProcessFree
	}
	if err != nil {
		return nil, failed, err
	}
	for i, b := range out {
		if err := limits.checkConverted(len(b), to); err != nil {
			return nil, i, err
		}
	}
	return out, 0, nil
}

// ErrNoProcessFree is ConvertBatch's answer when no evaluator process is
// free at once for a template that may not run away.
var ErrNoProcessFree = errors.New("no evaluator process is free")

// errNoProcessFree is inPool's answer for a template that may not run
// away when no process of the pool is free at once: it evaluates in
// process instead.
var errNoProcessFree = errors.New("no evaluator process is free")

// inPool runs fn, a webhook's call into the pool, and then ended. A
// template that may run away waits for a process (isolated). Another one
// takes a process free at once; if every process is busy with other
// kinds' and namespaces' evaluations it gets errNoProcessFree (and ended
// is not run), to evaluate in process, as others' evaluations must not
// stop it; if its own kind's or namespace's hold all they may (a flood
// of its own), it waits for one of theirs as a template that may run
// away does.
func inPool[T any](limits Limits, t *templates.Template, ended func(), fn func(ctx context.Context) (T, error)) (T, error) {
	if !t.MayRunAway() {
		now, cancel := context.WithCancel(context.Background())
		cancel() // a process free at once, or none
		out, err := fn(now)
		if be := (*evaluator.BusyError)(nil); errors.As(err, &be) && be.Full {
			var zero T
			return zero, errNoProcessFree
		} else if be == nil {
			if ended != nil {
				ended()
			}
			return isolated(limits, func(context.Context) (T, error) { return out, err })
		}
	}
	if ended != nil {
		defer ended()
	}
	return isolated(limits, fn)
}

// checkConverted refuses a conversion of size bytes over
// --max-rendered-bytes.
func (l Limits) checkConverted(size int, to string) error {
	if l.MaxRenderedBytes > 0 && size > l.MaxRenderedBytes {
		return &Error{Reason: contract.ReasonRenderTooLarge, Err: fmt.Errorf(
			"the conversion to %s gives %d bytes, more than the %d allowed (--max-rendered-bytes)", to, size, l.MaxRenderedBytes)}
	}
	return nil
}

// ValidateParent checks obj against its template's schema
// (templates.Template.ValidateParent) within the evaluation timeout: the
// admission webhook's door, bounded as Convert is, in the pool as Convert
// is; share and ended as Convert's.
func ValidateParent(t *templates.Template, obj *unstructured.Unstructured, limits Limits, pool *evaluator.Pool, share Share, ended func()) error {
	limits = limits.WithDefaults()
	if pool != nil {
		_, err := inPool(limits, t, ended, func(ctx context.Context) (struct{}, error) {
			return struct{}{}, pool.ValidateParent(ctx, poolKey(obj), limits.EvaluationTimeout, t, obj)
		})
		if !errors.Is(err, errNoProcessFree) {
			return err
		}
	}
	release, err := share.take()
	if err != nil {
		if ended != nil {
			ended()
		}
		return err
	}
	defer release()
	_, err = within(limits.EvaluationTimeout, nil, func() (struct{}, error) {
		if ended != nil {
			defer ended()
		}
		return struct{}{}, t.ValidateParent(obj)
	})
	var re *Error
	if errors.As(err, &re) && re.Reason == contract.ReasonEvaluationTimeout {
		return &Error{Reason: re.Reason, Err: fmt.Errorf("validating the object took longer than %s (--evaluation-timeout)", limits.EvaluationTimeout)}
	}
	return err
}
