package gcs

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/option"

	"github.com/cuengine/engine/providers"
)

// Name is the provider name templates use: resources: x: provider: "gcs".
const Name = "gcs"

// DefaultCallTimeout bounds each API call when Options.CallTimeout is zero.
const DefaultCallTimeout = 30 * time.Second

// settingProjectID is the Settings key under which the project is recorded.
const settingProjectID = "projectID"

var _ providers.Provider = (*Provider)(nil)

// Options configure a Provider.
type Options struct {
	// CallTimeout bounds every single API call (the storage client's own
	// retries of that call included). Zero means DefaultCallTimeout.
	CallTimeout time.Duration
	// ClientOptions are passed to storage.NewClient, after the defaults
	// (Application Default Credentials, or the emulator named by
	// STORAGE_EMULATOR_HOST). Tests use option.WithEndpoint and
	// option.WithoutAuthentication.
	ClientOptions []option.ClientOption
	// RetryOptions replace the storage client's retry settings (backoff,
	// maximum attempts). Nil keeps the client's defaults, which retry
	// idempotent calls on 408, 429, 5xx and transport errors.
	RetryOptions []storage.RetryOption
}

// Provider manages GCS buckets. It is safe for concurrent use and holds one
// storage client for the process.
type Provider struct {
	client      *storage.Client
	callTimeout time.Duration
}

// New returns a Provider with one storage client. Credentials come from
// Application Default Credentials unless STORAGE_EMULATOR_HOST is set or
// opts.ClientOptions say otherwise. A failure to find credentials is a
// terminal CredentialsError.
func New(ctx context.Context, opts Options) (*Provider, error) {
	client, err := storage.NewClient(ctx, opts.ClientOptions...)
	if err != nil {
		return nil, newClientError(err)
	}
	if len(opts.RetryOptions) > 0 {
		client.SetRetry(opts.RetryOptions...)
	}
	timeout := opts.CallTimeout
	if timeout <= 0 {
		timeout = DefaultCallTimeout
	}
	return &Provider{client: client, callTimeout: timeout}, nil
}

// newClientError classifies a failure to build the storage client. The
// client makes no API call while being built: it fails only while finding or
// loading credentials (a missing or malformed key file, no ADC at all) or on
// unusable transport options, so the error is a terminal CredentialsError.
func newClientError(err error) error {
	return credentialsError("creating storage client", err, "cannot set up credentials: "+err.Error())
}

// Register adds p to r under Name.
func Register(r *providers.Registry, p *Provider) {
	r.Register(Name, p)
}

// Close releases the storage client.
func (p *Provider) Close() error {
	if err := p.client.Close(); err != nil {
		return fmt.Errorf("closing storage client: %w", err)
	}
	return nil
}

// ExternalName returns bucketName + "-" + an eight-hex-character suffix
// derived from the owner's UID and attempt, and the Settings to record with
// it ({"projectID": ...}). It makes no call: the name is checked against the
// GCS naming rules and a violation is a terminal InvalidName saying what to
// change.
func (p *Provider) ExternalName(_ context.Context, req providers.Request, attempt int) (string, map[string]string, error) {
	spec, err := parseSpec(req.Spec)
	if err != nil {
		return "", nil, err
	}
	if err := validateOwnerUID(req.Owner.UID); err != nil {
		return "", nil, err
	}
	if attempt < 0 {
		return "", nil, providers.Terminal(providers.ReasonProviderError, "naming attempt %d is negative", attempt)
	}
	if err := validateLogicalName(spec.BucketName); err != nil {
		return "", nil, err
	}
	name := physicalName(spec.BucketName, req.Owner.UID, attempt)
	if err := validateBucketName(name); err != nil {
		return "", nil, err
	}
	return name, map[string]string{settingProjectID: spec.ProjectID}, nil
}

// Observe reads the bucket without changing it. An absent bucket is
// Exists=false; a bucket that exists without this owner's label is a
// terminal NameConflict, and its state is not reported. It is not part of
// the providers.Provider contract (the engine observes through Apply,
// which returns the same Observation); the tests read buckets through it.
func (p *Provider) Observe(ctx context.Context, req providers.Request) (providers.Observation, error) {
	if err := validateRecordedName(req.ExternalName); err != nil {
		return providers.Observation{}, err
	}
	attrs, err := p.attrs(ctx, req.ExternalName)
	if err != nil {
		return providers.Observation{}, err
	}
	if attrs == nil {
		return absent(req.ExternalName), nil
	}
	if !ownedBy(attrs, req.Owner.UID) {
		return providers.Observation{}, notOwnedError(req.ExternalName, attrs, req.Owner.UID)
	}
	return observation(attrs, projectOf(req)), nil
}

// validateRecordedName checks the recorded external name before any call.
func validateRecordedName(name string) error {
	if name == "" {
		return providers.Terminal(providers.ReasonInvalidName, "no external name recorded: the engine must call ExternalName first")
	}
	return validateBucketName(name)
}

// projectOf is the project recorded in Settings, else the spec's.
func projectOf(req providers.Request) string {
	if p := req.Settings[settingProjectID]; p != "" {
		return p
	}
	if s, ok := req.Spec[fieldProjectID].(string); ok {
		return s
	}
	return ""
}

// withTimeout runs fn with its own deadline of p.callTimeout, so each API
// call is bounded whatever the caller's deadline.
func (p *Provider) withTimeout(ctx context.Context, fn func(ctx context.Context) error) error {
	callCtx, cancel := context.WithTimeout(ctx, p.callTimeout)
	defer cancel()
	err := fn(callCtx)
	if err != nil && ctx.Err() == nil && errors.Is(callCtx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("no answer within the per-call timeout of %s: %w", p.callTimeout, err)
	}
	return err
}

// attrs reads the bucket's metadata. It returns nil, nil when the bucket
// does not exist.
func (p *Provider) attrs(ctx context.Context, name string) (*storage.BucketAttrs, error) {
	var attrs *storage.BucketAttrs
	err := p.withTimeout(ctx, func(ctx context.Context) error {
		var err error
		attrs, err = p.client.Bucket(name).Attrs(ctx)
		return err
	})
	op := fmt.Sprintf("reading bucket %q", name)
	switch {
	case err == nil:
		return attrs, nil
	case isBucketNotFound(err):
		return nil, nil
	case httpCode(err) == http.StatusForbidden:
		return nil, credentialsError(op, err, forbiddenSummary(err)+
			"; if the bucket belongs to another project, Apply reports it as a NameConflict")
	default:
		return nil, classify(op, err)
	}
}
