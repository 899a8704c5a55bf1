package gcs

import (
	"context"

	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cuengine/engine/providers"
)

// newOfflineProvider is a provider whose client is never used: ExternalName
// makes no call.
func newOfflineProvider(t *testing.T) *Provider {
	t.Helper()
	return newTestProvider(t, "http://127.0.0.1:1", 0)
}

func TestExternalNameRules(t *testing.T) {
	p := newOfflineProvider(t)
	tests := []struct {
		name       string
		bucketName any
		uid        string
		wantReason string // empty: valid
		wantMsg    []string
	}{
		{name: "valid", bucketName: "data"},
		{name: "valid with dots and underscores", bucketName: "my.data_set-1"},
		{name: "short logical name is fine once suffixed", bucketName: "a"},
		{name: "longest logical name", bucketName: strings.Repeat("a", MaxLogicalNameLen)},
		{
			name: "too long", bucketName: strings.Repeat("a", MaxLogicalNameLen+1),
			wantReason: providers.ReasonInvalidName,
			wantMsg:    []string{"is 55 characters", "longest allowed is 54", "8-character suffix", "at most 63"},
		},
		{
			name: "uppercase", bucketName: "MyData",
			wantReason: providers.ReasonInvalidName,
			wantMsg:    []string{`'M'`, "position 0", "lowercase letters"},
		},
		{
			name: "goog prefix", bucketName: "googdata",
			wantReason: providers.ReasonInvalidName, wantMsg: []string{`must not start with "goog"`},
		},
		{
			name: "contains google", bucketName: "my-google-data",
			wantReason: providers.ReasonInvalidName, wantMsg: []string{`must not contain "google"`},
		},
		{
			name: "ip address", bucketName: "192.168.5.4",
			wantReason: providers.ReasonInvalidName, wantMsg: []string{"IP address"},
		},
		{
			name: "starts with dash", bucketName: "-data",
			wantReason: providers.ReasonInvalidName, wantMsg: []string{"start and end with a lowercase letter or a digit"},
		},
		{
			name: "ends with dot", bucketName: "data.",
			wantReason: providers.ReasonInvalidName, wantMsg: []string{"start and end"},
		},
		{
			name: "empty dot component", bucketName: "a..b",
			wantReason: providers.ReasonInvalidName, wantMsg: []string{`".."`},
		},
		{
			name: "space", bucketName: "my data",
			wantReason: providers.ReasonInvalidName, wantMsg: []string{`' '`},
		},
		{
			name: "not a string", bucketName: 42.0,
			wantReason: providers.ReasonInvalidSpec, wantMsg: []string{"spec.bucketName must be a string"},
		},
		{
			name: "empty", bucketName: "",
			wantReason: providers.ReasonInvalidSpec, wantMsg: []string{"spec.bucketName must not be empty"},
		},
		{
			name: "empty owner uid", bucketName: "data", uid: "-",
			wantReason: providers.ReasonProviderError, wantMsg: []string{"owner UID is empty"},
		},
		{
			name: "owner uid unusable as label value", bucketName: "data", uid: "Not/A-UID",
			wantReason: providers.ReasonProviderError, wantMsg: []string{"cannot be a label value"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			uid := testUID
			switch tc.uid {
			case "":
			case "-":
				uid = ""
			default:
				uid = tc.uid
			}
			req := providers.Request{Owner: providers.Owner{UID: uid}, Spec: spec(map[string]any{"bucketName": tc.bucketName})}
			name, settings, err := p.ExternalName(context.Background(), req, 0)
			if tc.wantReason == "" {
				require.NoError(t, err)
				assert.Regexp(t, regexp.MustCompile(`^`+regexp.QuoteMeta(tc.bucketName.(string))+`-[0-9a-f]{8}$`), name)
				assert.LessOrEqual(t, len(name), 63)
				assert.Equal(t, map[string]string{"projectID": "proj-a"}, settings)
				return
			}
			pe := requireReason(t, err, tc.wantReason, false)
			for _, m := range tc.wantMsg {
				assert.Contains(t, pe.Error(), m)
			}
			assert.Empty(t, name)
		})
	}
}

func TestExternalNameDeterministicPerAttempt(t *testing.T) {
	p := newOfflineProvider(t)
	req := providers.Request{Owner: providers.Owner{UID: testUID}, Spec: spec(nil)}
	seen := map[string]int{}
	for attempt := 0; attempt < 5; attempt++ {
		first, _, err := p.ExternalName(context.Background(), req, attempt)
		require.NoError(t, err)
		again, _, err := p.ExternalName(context.Background(), req, attempt)
		require.NoError(t, err)
		assert.Equal(t, first, again, "attempt %d must be deterministic", attempt)
		prev, dup := seen[first]
		assert.False(t, dup, "attempt %d repeats the name of attempt %d", attempt, prev)
		seen[first] = attempt
	}
	other := providers.Request{Owner: providers.Owner{UID: "another-uid"}, Spec: spec(nil)}
	name, _, err := p.ExternalName(context.Background(), other, 0)
	require.NoError(t, err)
	_, dup := seen[name]
	assert.False(t, dup, "another owner must get another name")

	_, _, err = p.ExternalName(context.Background(), req, -1)
	requireReason(t, err, providers.ReasonProviderError, false)
}

func TestValidateBucketNamePhysical(t *testing.T) {
	tests := []struct {
		name, bucket, want string
	}{
		{"valid", "data-0a1b2c3d", ""},
		{"too short", "ab", "3 to 63 characters"},
		{"too long", strings.Repeat("a", 64), "3 to 63 characters"},
		{"ip address", "10.0.0.1", "IP address"},
		{"google", "xgooglex", "google"},
		{"goog prefix", "goog-data", "goog"},
		{"uppercase", "Data-1", "'D'"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := validateBucketName(tc.bucket)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			pe := requireReason(t, err, providers.ReasonInvalidName, false)
			assert.Contains(t, pe.Error(), tc.want)
		})
	}
}

func TestLogicalNameOf(t *testing.T) {
	assert.Equal(t, "data", logicalNameOf("data-0a1b2c3d"))
	assert.Equal(t, "my-data", logicalNameOf("my-data-0a1b2c3d"))
	assert.Equal(t, "nodash", logicalNameOf("nodash"))
}
