package reconciler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/providers"
	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/revisions"
)

// TestClassify: what each kind of error means for the reconcile, and
// what controller-runtime is told to do about it.
func TestClassify(t *testing.T) {
	const resync = 5 * time.Minute
	gr := schema.GroupResource{Group: "apps", Resource: "deployments"}
	conflict := apierrors.NewConflict(gr, "web", errors.New("the object has been modified"))
	retryable := providers.Retryable(providers.ReasonUnavailable, errors.New("503"))
	notRetryable := providers.Terminal(providers.ReasonCredentialsError, "no credentials")

	type want int
	const (
		returned want = iota // the error, for the controller's backoff
		terminalErr
		requeued // no error, a RequeueAfter
	)
	for _, tc := range []struct {
		name   string
		err    error
		res    ctrl.Result // what the reconcile returned with the error
		class  errorClass
		reason string
		after  time.Duration
		want   want
		result ctrl.Result
	}{
		{name: "conflict", err: conflict, class: waiting, reason: "Conflict", after: ConflictDelay, want: requeued, result: ctrl.Result{RequeueAfter: ConflictDelay}},
		{name: "wrapped conflict", err: fmt.Errorf("writing status: %w", conflict), class: waiting, reason: "Conflict", after: ConflictDelay, want: requeued, result: ctrl.Result{RequeueAfter: ConflictDelay}},
		{name: "invalid", err: apierrors.NewInvalid(schema.GroupKind{Kind: "Service"}, "web", field.ErrorList{field.Required(field.NewPath("spec"), "")}),
			class: terminal, reason: contract.ReasonApplyFailed, want: terminalErr},
		{name: "forbidden", err: apierrors.NewForbidden(gr, "web", errors.New("no")), class: terminal, reason: contract.ReasonApplyFailed, want: terminalErr},
		{name: "bad request", err: apierrors.NewBadRequest("no"), class: terminal, reason: contract.ReasonApplyFailed, want: terminalErr},
		{name: "too large", err: apierrors.NewRequestEntityTooLargeError("1.5 MB"), class: terminal, reason: contract.ReasonApplyFailed, want: terminalErr},
		{name: "unavailable", err: apierrors.NewServiceUnavailable("etcd"), class: transient, reason: contract.ReasonNotSynced, want: returned},
		{name: "provider retryable", err: retryable, class: transient, reason: providers.ReasonUnavailable, want: returned},
		{name: "provider not retryable", err: fmt.Errorf("resource bucket: %w", notRetryable), class: waiting, reason: providers.ReasonCredentialsError,
			after: resync, want: requeued, result: ctrl.Result{RequeueAfter: resync}},
		{name: "provider not retryable, sooner requeue asked", err: notRetryable, res: ctrl.Result{RequeueAfter: time.Minute},
			class: waiting, reason: providers.ReasonCredentialsError, after: resync, want: requeued, result: ctrl.Result{RequeueAfter: time.Minute}},
		{name: "generic", err: errors.New("boom"), class: transient, reason: contract.ReasonNotSynced, want: returned},
		{name: "deadline", err: context.DeadlineExceeded, class: transient, reason: contract.ReasonNotSynced, want: returned},
		{name: "classified terminal keeps its reason", err: fmt.Errorf("step: %w", terminalError(contract.ReasonChildConflict, errors.New("taken"))),
			class: terminal, reason: contract.ReasonChildConflict, want: terminalErr},
		{name: "refused rendering keeps its reason", err: fmt.Errorf("rendering: %w", &render.Error{Reason: contract.ReasonRenderTooLarge, Err: errors.New("too large")}),
			class: terminal, reason: contract.ReasonRenderTooLarge, want: terminalErr},
		{name: "refused child keeps its reason", err: &render.Error{Reason: contract.ReasonChildRefused, Err: &render.ChildError{Child: "c", Msg: "elsewhere"}},
			class: terminal, reason: contract.ReasonChildRefused, want: terminalErr},
		{name: "a pin not followed", err: fmt.Errorf("template: %w", &revisions.PinError{Err: errors.New("pinned to revision 7, which is not stored")}),
			class: terminal, reason: contract.ReasonRevisionNotFound, want: terminalErr},
		{name: "classified waiting keeps its delay", err: waitingErr("Dependency", 3*time.Second, errors.New("not yet")),
			class: waiting, reason: "Dependency", after: 3 * time.Second, want: requeued, result: ctrl.Result{RequeueAfter: 3 * time.Second}},
		{name: "classified waiting, later requeue asked", err: waitingErr("Dependency", 3*time.Second, errors.New("not yet")), res: ctrl.Result{RequeueAfter: time.Hour},
			class: waiting, reason: "Dependency", after: 3 * time.Second, want: requeued, result: ctrl.Result{RequeueAfter: 3 * time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			class, reason, after := classify(tc.err, resync)
			assert.Equal(t, tc.class, class, "class %s", class)
			assert.Equal(t, tc.reason, reason)
			assert.Equal(t, tc.after, after)

			res, err := outcome(tc.res, tc.err, resync)
			switch tc.want {
			case terminalErr:
				assert.True(t, isTerminal(err), "reconcile.TerminalError: %v", err)
				assert.ErrorIs(t, err, tc.err)
				assert.Equal(t, ctrl.Result{}, res)
			case returned:
				assert.Equal(t, tc.err, err)
				assert.Equal(t, ctrl.Result{}, res)
			case requeued:
				assert.NoError(t, err)
				assert.Equal(t, tc.result, res)
			}
		})
	}
	t.Run("no error", func(t *testing.T) {
		res, err := outcome(ctrl.Result{RequeueAfter: time.Second}, nil, resync)
		assert.NoError(t, err)
		assert.Equal(t, ctrl.Result{RequeueAfter: time.Second}, res)
	})
}

// TestStatusErr: the problems a reconcile recorded make one error,
// classed by the most urgent: transient, then the shortest wait, then
// terminal; its message is Synced's.
func TestStatusErr(t *testing.T) {
	const resync = 5 * time.Minute
	term := terminalError(contract.ReasonChildRefused, errors.New("refused"))
	wait5 := waitingErr("Slow", 5*time.Second, errors.New("slow"))
	wait1 := waitingErr("Quick", time.Second, errors.New("quick"))
	transientErr := providers.Retryable(providers.ReasonUnavailable, errors.New("503"))
	providerWait := providers.Terminal(providers.ReasonCredentialsError, "no credentials")
	for _, tc := range []struct {
		name   string
		errs   []error
		class  errorClass
		reason string
		after  time.Duration
		msg    string
	}{
		{"terminal only", []error{term}, terminal, contract.ReasonChildRefused, 0, "refused"},
		{"the shortest wait", []error{term, wait5, wait1}, waiting, "Quick", time.Second, "refused; slow; quick"},
		{"transient first", []error{term, wait1, transientErr}, transient, providers.ReasonUnavailable, 0, "refused; quick; Unavailable: 503"},
		{"a provider wait is the resource resync", []error{term, providerWait}, waiting, providers.ReasonCredentialsError, resync, "refused; CredentialsError: no credentials"},
		{"a problem found twice counts once", []error{term, term}, terminal, contract.ReasonChildRefused, 0, "refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newStatus()
			for _, err := range tc.errs {
				st.fail("", err)
			}
			err := st.err(resync)
			require.Error(t, err)
			class, reason, after := classify(err, resync)
			assert.Equal(t, tc.class, class, "class %s", class)
			assert.Equal(t, tc.reason, reason)
			assert.Equal(t, tc.after, after)
			assert.Equal(t, tc.msg, err.Error())
			assert.Equal(t, tc.msg, st.synced.message)
			assert.Equal(t, classReason(tc.errs[0]), st.synced.reason, "Synced's reason is the first problem's")
		})
	}
	t.Run("no problem", func(t *testing.T) {
		assert.NoError(t, newStatus().err(resync))
	})
}

func classReason(err error) string {
	_, reason, _ := classify(err, 0)
	return reason
}

// TestSafeMessage: messages are printable and bounded to maxMessage
// bytes, cut at a rune boundary.
func TestSafeMessage(t *testing.T) {
	long := strings.Repeat("a", maxMessage+10)
	// "é" is two bytes, so byte maxMessage-3 (odd) is the middle of one: the
	// cut steps back to maxMessage-4.
	runes := strings.Repeat("é", maxMessage)
	for _, tc := range []struct {
		name, in, out string
	}{
		{"short", "all good", "all good"},
		{"exactly the bound", strings.Repeat("a", maxMessage), strings.Repeat("a", maxMessage)},
		{"cut", long, long[:maxMessage-3] + "..."},
		{"cut at a rune boundary", runes, runes[:maxMessage-4] + "..."},
		{"newline and tab become spaces", "a\nb\tc", "a b c"},
		{"control characters dropped", "a\x00b\x1bc", "abc"},
		{"bidirectional overrides dropped", "user\u202Etxt.exe", "usertxt.exe"},
		{"invalid UTF-8 replaced", "a\xffb", "a\uFFFDb"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := SafeMessage(tc.in)
			assert.Equal(t, tc.out, got)
			assert.LessOrEqual(t, len(got), maxMessage)
			assert.True(t, utf8.ValidString(got))
		})
	}
}

// waitingErr is an error a step classified as waiting on something else.
func waitingErr(reason string, after time.Duration, err error) error {
	return &stepError{class: waiting, reason: reason, after: after, err: err}
}
