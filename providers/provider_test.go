package providers

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestClassify(t *testing.T) {
	cases := []struct {
		name      string
		err       error
		reason    string
		retryable bool
		text      string
	}{
		{"terminal", Terminal(ReasonNameConflict, "bucket %q is not ours", "b-1"), ReasonNameConflict, false, `NameConflict: bucket "b-1" is not ours`},
		{"retryable", Retryable(ReasonRateLimited, errors.New("slow down")), ReasonRateLimited, true, "RateLimited: slow down"},
		{"wrapped keeps its class", fmt.Errorf("applying data: %w", Terminal(ReasonInvalidSpec, "size must be positive")), ReasonInvalidSpec, false, "applying data: InvalidSpec: size must be positive"},
		{"unclassified is a retryable ProviderError", errors.New("connection reset"), ReasonProviderError, true, "connection reset"},
		{"a context error unclassified too", context.DeadlineExceeded, ReasonProviderError, true, "context deadline exceeded"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reason, retryable := Classify(tc.err)
			assert.Equal(t, tc.reason, reason)
			assert.Equal(t, tc.retryable, retryable)
			assert.EqualError(t, tc.err, tc.text)
		})
	}
}

func TestErrorUnwraps(t *testing.T) {
	cause := context.Canceled
	err := Retryable(ReasonTimeout, fmt.Errorf("provider gcs: Apply: %w", cause))
	require.ErrorIs(t, err, context.Canceled)
	var pe *Error
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, ReasonTimeout, pe.Reason)
	assert.True(t, pe.Retryable)
	assert.Equal(t, "Timeout: provider gcs: Apply: context canceled", err.Error())
	// Terminal formats with %w too.
	assert.ErrorIs(t, Terminal(ReasonCredentialsError, "reading key: %w", cause), context.Canceled)
}

// TestReasonsAreCamelCase: the reasons are a condition's reason
// (metav1.Condition requires CamelCase: ^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$).
func TestReasonsAreCamelCase(t *testing.T) {
	reasons := []string{ReasonNameConflict, ReasonInvalidName, ReasonInvalidSpec, ReasonImmutableField,
		ReasonCredentialsError, ReasonRateLimited, ReasonUnavailable, ReasonTimeout, ReasonProviderError, ReasonProviderUnavailable}
	seen := map[string]bool{}
	for _, r := range reasons {
		require.Regexp(t, `^[A-Z][A-Za-z]*$`, r)
		require.False(t, seen[r], "reason %s twice", r)
		seen[r] = true
	}
}

func TestRegistry(t *testing.T) {
	r := NewRegistry()
	_, ok := r.Get("gcs")
	assert.False(t, ok)
	r.Register("postgresql", nopProvider{})
	r.Register("gcs", nopProvider{})
	p, ok := r.Get("gcs")
	require.True(t, ok)
	assert.Equal(t, nopProvider{}, p)
	assert.Equal(t, []string{"gcs", "postgresql"}, r.Names())
}

func TestRefusal(t *testing.T) {
	plan, err := Refusal(Terminal(ReasonImmutableField, "spec.location changed"))
	require.NoError(t, err)
	assert.Equal(t, Plan{Action: ActionRefuse, Reason: "ImmutableField: spec.location changed"}, plan)
	down := Retryable(ReasonUnavailable, errors.New("503"))
	_, err = Refusal(down)
	assert.Same(t, down, err, "a retryable error stops the plan")
}
