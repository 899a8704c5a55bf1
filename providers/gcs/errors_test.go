package gcs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"cloud.google.com/go/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/googleapi"

	"github.com/cuengine/engine/providers"
)

// secret stands for anything that must never reach an error message.
const secret = "ya29.SECRET-TOKEN-VALUE"

func TestClassify(t *testing.T) {
	api := func(code int) error {
		return &googleapi.Error{Code: code, Message: fmt.Sprintf("message %d", code), Body: `{"token":"` + secret + `"}`}
	}
	refused := &url.Error{Op: "Get", URL: "http://127.0.0.1:1/storage/v1/b/x", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}
	tests := []struct {
		name      string
		err       error
		reason    string
		retryable bool
		contains  []string
	}{
		{"429", api(429), providers.ReasonRateLimited, true, []string{"HTTP 429"}},
		{"500", api(500), providers.ReasonUnavailable, true, []string{"HTTP 500"}},
		{"503", api(503), providers.ReasonUnavailable, true, []string{"HTTP 503"}},
		{"408", api(408), providers.ReasonTimeout, true, nil},
		{"401", api(401), providers.ReasonCredentialsError, false, []string{"GOOGLE_APPLICATION_CREDENTIALS", "Workload Identity", "STORAGE_EMULATOR_HOST"}},
		{"403", api(403), providers.ReasonCredentialsError, false, []string{"HTTP 403", "Application Default Credentials"}},
		{"400", api(400), providers.ReasonProviderError, false, []string{"HTTP 400", "message 400"}},
		{"deadline", fmt.Errorf("get: %w", context.DeadlineExceeded), providers.ReasonTimeout, true, []string{"deadline exceeded"}},
		{"canceled", fmt.Errorf("get: %w", context.Canceled), providers.ReasonProviderError, true, []string{"canceled"}},
		{"503 until the deadline", fmt.Errorf("retry failed with %w; last error: %w", context.DeadlineExceeded, api(503)), providers.ReasonUnavailable, true, nil},
		{"no default credentials", errors.New("dialing: credentials: could not find default credentials. See https://cloud.google.com/docs/authentication/external/set-up-adc for more information"), providers.ReasonCredentialsError, false, []string{"no usable credentials", "gcloud auth application-default login"}},
		{"connection refused", refused, providers.ReasonUnavailable, true, []string{"connection refused"}},
		{"unknown", errors.New("boom"), providers.ReasonProviderError, true, []string{"boom"}},
		{"already classified", providers.Terminal(providers.ReasonNameConflict, "taken"), providers.ReasonNameConflict, false, []string{"taken"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := classify("reading bucket \"x\"", tc.err)
			pe := requireReason(t, err, tc.reason, tc.retryable)
			for _, c := range tc.contains {
				assert.Contains(t, pe.Error(), c)
			}
			assert.NotContains(t, pe.Error(), secret)
			reason, retryable := providers.Classify(err)
			assert.Equal(t, tc.reason, reason)
			assert.Equal(t, tc.retryable, retryable)
			assert.True(t, errors.Is(err, tc.err) || errors.As(err, new(*providers.Error)), "the cause stays reachable")
		})
	}
	assert.NoError(t, classify("x", nil))
}

func TestClassifyKeepsCauseReachable(t *testing.T) {
	cause := &googleapi.Error{Code: 503}
	err := classify("x", cause)
	var gerr *googleapi.Error
	require.True(t, errors.As(err, &gerr))
	assert.Same(t, cause, gerr)
}

func TestNotFoundHelpers(t *testing.T) {
	assert.True(t, isBucketNotFound(fmt.Errorf("wrap: %w", storage.ErrBucketNotExist)))
	assert.True(t, isBucketNotFound(&googleapi.Error{Code: 404}))
	assert.False(t, isBucketNotFound(&googleapi.Error{Code: 403}))
	assert.True(t, isObjectNotFound(storage.ErrObjectNotExist))
	assert.False(t, isObjectNotFound(errors.New("x")))
}

// TestNewWithUnusableCredentials points ADC at a missing key file: the
// discovery fails without any network call and New reports a terminal
// CredentialsError that explains how to provide credentials.
func TestNewWithUnusableCredentials(t *testing.T) {
	t.Setenv("STORAGE_EMULATOR_HOST", "")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", filepath.Join(t.TempDir(), "missing-key.json"))

	_, err := New(context.Background(), Options{})
	pe := requireReason(t, err, providers.ReasonCredentialsError, false)
	assert.Contains(t, pe.Error(), "GOOGLE_APPLICATION_CREDENTIALS")
	assert.Contains(t, pe.Error(), "Workload Identity")
}

// TestNewWithMalformedKeyNeverPrintsIt loads a key file that cannot be
// parsed and checks that none of its content reaches the error.
func TestNewWithMalformedKeyNeverPrintsIt(t *testing.T) {
	t.Setenv("STORAGE_EMULATOR_HOST", "")
	key := filepath.Join(t.TempDir(), "key.json")
	require.NoError(t, os.WriteFile(key, []byte(`{"type":"service_account","private_key":"`+secret+`"`), 0o600))
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", key)

	_, err := New(context.Background(), Options{})
	pe := requireReason(t, err, providers.ReasonCredentialsError, false)
	assert.NotContains(t, pe.Error(), secret)
}
