package reconciler

import (
	"errors"
	"time"

	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/providers"
	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/revisions"
)

// errorClass says what a failed step needs before it can succeed.
type errorClass int

const (
	// transient: something that may go away by itself (the apiserver or a
	// cloud API unavailable, a timeout). Retried with the controller's
	// exponential backoff.
	transient errorClass = iota
	// waiting: not a failure but an order of things (the cache has not
	// seen a write yet, a dependency is not ready). Retried after a fixed
	// delay, without an error log.
	waiting
	// terminal: the spec or the template is wrong (schema violation,
	// template error, a child the apiserver or the policy refuses).
	// Retrying cannot help until the parent or the template changes, and
	// both bring an event.
	terminal
)

func (c errorClass) String() string {
	switch c {
	case waiting:
		return "waiting"
	case terminal:
		return "terminal"
	}
	return "transient"
}

// ConflictDelay is how long a step that lost an optimistic-lock race waits:
// the cache brings the newer object meanwhile.
const ConflictDelay = 100 * time.Millisecond

// stepError is an error a step has already classified.
type stepError struct {
	class  errorClass
	reason string        // the Synced condition's reason
	after  time.Duration // waiting only: when to look again
	err    error
}

func (e *stepError) Error() string { return e.err.Error() }
func (e *stepError) Unwrap() error { return e.err }

func terminalError(reason string, err error) error {
	return &stepError{class: terminal, reason: reason, err: err}
}

// waitingError is an order of things that is not there yet: looked at
// again after the delay, without an error log.
func waitingError(reason string, after time.Duration, err error) error {
	return &stepError{class: waiting, reason: reason, after: after, err: err}
}

// classify is the one place that decides what an error means for the
// reconcile: an error a step classified keeps its class; a pin the
// rollout does not follow (revisions.PinError) is a terminal
// RevisionNotFound; a rendering
// refused (a *render.Error: a limit exceeded, a child the policy refuses)
// is terminal with its reason, but over the evaluation budget it waits
// BudgetRetry (FreshBudgetRetry for a parent never seen to overrun) unless
// the parent's annotation says it overran with this template and
// generation; a provider error
// is transient when the provider says it may go away, otherwise it waits
// for the slow resource resync (a credential fixed, a name released); an
// apiserver error is terminal when the request itself was refused (invalid,
// forbidden, too large), waiting on an optimistic-lock conflict, and
// transient otherwise.
func classify(err error, resourceResync time.Duration) (errorClass, string, time.Duration) {
	var se *stepError
	if errors.As(err, &se) {
		return se.class, se.reason, se.after
	}
	var pin *revisions.PinError
	if errors.As(err, &pin) {
		return terminal, contract.ReasonRevisionNotFound, 0
	}
	var re *render.Error
	if errors.As(err, &re) {
		switch {
		case re.Reason != contract.ReasonEvaluationBudgetExceeded, render.OverranBefore(err):
			// An object that overran with this template and generation
			// waits for a change of either, as after any limit.
		case render.RefusedFresh(err):
			return waiting, re.Reason, FreshBudgetRetry
		default:
			return waiting, re.Reason, BudgetRetry
		}
		return terminal, re.Reason, 0
	}
	var pe *providers.Error
	if errors.As(err, &pe) {
		if pe.Retryable {
			return transient, pe.Reason, 0
		}
		return waiting, pe.Reason, resourceResync
	}
	switch {
	case apierrors.IsConflict(err):
		return waiting, contract.ReasonConflict, ConflictDelay
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err), apierrors.IsForbidden(err),
		apierrors.IsRequestEntityTooLargeError(err), apierrors.IsMethodNotSupported(err):
		return terminal, contract.ReasonApplyFailed, 0
	}
	return transient, contract.ReasonNotSynced, 0
}

// needsHuman reports whether a problem holds the parent until a person
// changes something (the parent, the template, the policy, what they name):
// a terminal problem, or a provider's refusal it does not expect to go
// away by itself (a name taken elsewhere, bad credentials, an immutable
// field), which only a slow resync looks at again. Such a problem makes
// the parent Stalled; everything else is still converging.
func needsHuman(err error) bool {
	class, _, _ := classify(err, 0)
	if class == terminal {
		return true
	}
	var pe *providers.Error
	return errors.As(err, &pe) && !pe.Retryable
}

// outcome turns the way a reconcile ended into what controller-runtime
// acts on: a terminal error is wrapped in reconcile.TerminalError (counted
// in controller_runtime_terminal_reconcile_errors_total, never requeued), a
// waiting one becomes a RequeueAfter, a transient one is returned for the
// controller's backoff.
func outcome(res ctrl.Result, err error, resourceResync time.Duration) (ctrl.Result, error) {
	if err == nil {
		return res, nil
	}
	class, _, after := classify(err, resourceResync)
	switch class {
	case terminal:
		return ctrl.Result{}, reconcile.TerminalError(err)
	case waiting:
		if res.RequeueAfter > 0 && res.RequeueAfter < after {
			after = res.RequeueAfter
		}
		return ctrl.Result{RequeueAfter: after}, nil
	}
	return ctrl.Result{}, err
}

// Retries of transient failures (the controller's backoff): each parent
// backs off exponentially up to maxRetryDelay, and all parents of a kind
// together are retried at most retryQPS per second. controller-runtime's
// defaults (up to 1000 s per parent, 10 per second in all) turn an outage
// of seconds into minutes of recovery for a fleet: every parent fails
// during the outage, and its retry waits far past the end of it.
const (
	maxRetryDelay = 10 * time.Second
	retryQPS      = 50
	retryBurst    = 500
)

// RetryLimiter is the rate limiter of a kind's controller. The status
// writer (statuswriter.go) retries failed status writes the same way.
func RetryLimiter[T comparable]() workqueue.TypedRateLimiter[T] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[T](5*time.Millisecond, maxRetryDelay),
		&workqueue.TypedBucketRateLimiter[T]{Limiter: rate.NewLimiter(rate.Limit(retryQPS), retryBurst)},
	)
}
