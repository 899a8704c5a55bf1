package gcs

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/googleapis/gax-go/v2"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"

	"github.com/cuengine/engine/providers"
)

// testUID is the owner UID of most tests: a Kubernetes UID.
const testUID = "0b6f3c1e-8d2a-4f57-9c3e-2a1d5e7f9b10"

// fastRetry makes the storage client's own retries quick in tests.
var fastRetry = []storage.RetryOption{
	storage.WithBackoff(gax.Backoff{Initial: 5 * time.Millisecond, Max: 20 * time.Millisecond, Multiplier: 2}),
}

// newTestProvider returns a provider talking to the JSON API at baseURL
// through client options (option.WithEndpoint + WithoutAuthentication), the
// way storage v1.70.0 accepts a plain-HTTP endpoint without credentials.
func newTestProvider(t *testing.T, baseURL string, timeout time.Duration) *Provider {
	t.Helper()
	p, err := New(context.Background(), Options{
		CallTimeout: timeout,
		ClientOptions: []option.ClientOption{
			option.WithEndpoint(baseURL + "/storage/v1/"),
			option.WithoutAuthentication(),
		},
		RetryOptions: fastRetry,
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	return p
}

// spec is a valid spec with the given overrides.
func spec(overrides map[string]any) map[string]any {
	s := map[string]any{
		"projectID":                "proj-a",
		"bucketName":               "data",
		"location":                 "EU",
		"uniformBucketLevelAccess": true,
	}
	for k, v := range overrides {
		if v == nil {
			delete(s, k)
			continue
		}
		s[k] = v
	}
	return s
}

// namedRequest builds a request for uid and s and records its external name
// for attempt, as the engine does before the first Apply.
func namedRequest(t *testing.T, p *Provider, uid string, s map[string]any, attempt int) providers.Request {
	t.Helper()
	req := providers.Request{
		Name:  "bucket",
		Owner: providers.Owner{UID: uid, Namespace: "ns", Name: "app", Kind: "App"},
		Spec:  s,
	}
	name, settings, err := p.ExternalName(context.Background(), req, attempt)
	require.NoError(t, err)
	req.ExternalName = name
	req.Settings = settings
	return req
}

// requireReason asserts that err is a classified provider error with the
// given reason and retryability.
func requireReason(t *testing.T, err error, reason string, retryable bool) *providers.Error {
	t.Helper()
	require.Error(t, err)
	var pe *providers.Error
	require.True(t, errors.As(err, &pe), "error %v is not a *providers.Error", err)
	require.Equal(t, reason, pe.Reason, "error: %v", err)
	require.Equal(t, retryable, pe.Retryable, "error: %v", err)
	return pe
}

// itoa formats a generation number.
func itoa(n int64) string { return strconv.FormatInt(n, 10) }
