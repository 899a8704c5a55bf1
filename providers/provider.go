package providers

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
)

// Owner identifies the parent object that owns an external resource.
type Owner struct {
	UID       string
	Namespace string
	Name      string
	Kind      string
}

// Request describes one external resource for one call.
type Request struct {
	// Name is the resource's local name in the template (resources.<name>).
	Name string
	// ExternalName is the physical name recorded on the parent before the
	// first create. It is never empty in Apply or Delete.
	ExternalName string
	// Owner is the parent the resource belongs to.
	Owner Owner
	// Spec is the template's resources.<name>.spec, concrete. Empty in
	// Delete when the template no longer compiles: deletion needs only the
	// external name (and the recorded Settings).
	Spec map[string]any
	// Settings are the provider-specific values recorded on the parent with
	// the external name (for GCS: the project), so Delete works without Spec.
	Settings map[string]string
	// ResetCredentials asks Apply to issue new credentials (a new password)
	// and return them in the Observation's Sensitive outputs. The engine sets
	// it when the resource declares a connectionSecret and that Secret does
	// not exist (first create, or deleted out of band): the secret it held is
	// lost, and only a new one can be delivered. Providers without
	// credentials ignore it.
	ResetCredentials bool
}

// Observation is what a provider knows of a resource now. State is what the
// template sees as observed.<name>.
type Observation struct {
	// Exists is false when the resource is absent.
	Exists bool
	// Ready is true when the resource is usable.
	Ready bool
	// State is the provider's view: physical name, URL, location... Plain
	// JSON-compatible values only.
	State map[string]any
	// Sensitive are outputs nobody may see but the parent's connection
	// Secret: passwords, keys, connection URIs that carry them. The engine
	// writes them only into the Secret a resource's connectionSecret names,
	// never into status, observed, events, logs or errors. Nil when the
	// provider has none, or has none to give on this call (a password is
	// known only when it is set).
	Sensitive map[string][]byte
}

// Provider manages one kind of external resource. Every method is
// idempotent and must respect ctx's deadline.
type Provider interface {
	// ExternalName returns the physical name for a resource that has none
	// recorded yet. It is deterministic for (spec, owner, attempt): a retry
	// after a crash yields the same name. attempt is bumped by the engine
	// after a NameConflict, to move to a new name. It validates the name
	// against the external system's rules and returns a terminal error
	// before any call is made. Settings are recorded with the name. It
	// returns when ctx ends (a plugin's ExternalName is a call to another
	// process).
	ExternalName(ctx context.Context, req Request, attempt int) (name string, settings map[string]string, err error)
	// Apply creates the resource or corrects its mutable fields to match the spec.
	Apply(ctx context.Context, req Request) (Observation, error)
	// Delete removes the resource. An absent resource is success.
	Delete(ctx context.Context, req Request) error
	// Plan says what Apply would do with req now, reading the external
	// system and writing nothing. An empty req.ExternalName is a resource
	// that has none recorded yet: its plan is a create. What Apply would
	// refuse (an immutable field, a foreign resource, an invalid spec) is
	// a plan with ActionRefuse, not an error; errors are for what stops
	// the plan itself (the system does not answer, credentials).
	Plan(ctx context.Context, req Request) (Plan, error)
}

// Action is what Apply would do to a resource.
type Action string

// The actions of a Plan, from the least to the most disruptive.
const (
	// ActionNone: the resource is as the spec says.
	ActionNone Action = "None"
	// ActionUpdate: Apply corrects the fields in Changes in place.
	ActionUpdate Action = "Update"
	// ActionCreate: the resource is absent and Apply creates it.
	ActionCreate Action = "Create"
	// ActionRefuse: Apply would fail without writing (Reason says why);
	// the resource stays as it is.
	ActionRefuse Action = "Refuse"
	// ActionReplace: Apply would delete the resource and create it anew
	// (data is lost). Neither built-in provider replaces: both refuse a
	// change they cannot make in place.
	ActionReplace Action = "Replace"
)

// Plan is what Apply would do to one resource, written before it does.
type Plan struct {
	Action Action
	// Changes are the fields Apply would set, in a stable order.
	Changes []Change
	// Reason says why a plan is ActionRefuse or ActionReplace.
	Reason string
}

// Refusal is the plan of an Apply that would fail with err without
// writing: a terminal error is ActionRefuse with its message, and any
// other error stops the plan (returned as it is).
func Refusal(err error) (Plan, error) {
	if _, retryable := Classify(err); retryable {
		return Plan{}, err
	}
	return Plan{Action: ActionRefuse, Reason: err.Error()}, nil
}

// Change is one field Apply would set. A sensitive field's values are
// never carried: Sensitive says a secret would be set or replaced.
type Change struct {
	// Field is the field in the provider's terms (a spec field where the
	// spec names it: "labels.team", "versioning").
	Field string
	// From is the current value, empty on a create.
	From string
	// To is the value Apply would set.
	To        string
	Sensitive bool
}

// Reasons for provider errors. They end up as the reason of the parent's
// Synced condition, so they are CamelCase.
const (
	ReasonNameConflict     = "NameConflict"
	ReasonInvalidName      = "InvalidName"
	ReasonInvalidSpec      = "InvalidSpec"
	ReasonImmutableField   = "ImmutableField"
	ReasonCredentialsError = "CredentialsError"
	ReasonRateLimited      = "RateLimited"
	ReasonUnavailable      = "Unavailable"
	ReasonTimeout          = "Timeout"
	ReasonProviderError    = "ProviderError"
	// ReasonProviderUnavailable: the provider's plugin is not running
	// (starting, restarting, refused at the handshake) or died during the
	// call. Retryable; nothing is deleted meanwhile.
	ReasonProviderUnavailable = "ProviderUnavailable"
)

// Error is a classified provider error.
type Error struct {
	// Reason is a CamelCase word such as NameConflict.
	Reason string
	// Retryable errors are retried with backoff; terminal ones wait for a
	// change of the spec (or of the world, on a slow resync).
	Retryable bool
	Err       error
}

func (e *Error) Error() string { return e.Reason + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Terminal returns an error that retrying will not fix.
func Terminal(reason string, format string, args ...any) error {
	return &Error{Reason: reason, Err: fmt.Errorf(format, args...)}
}

// Retryable returns an error that may go away by itself.
func Retryable(reason string, err error) error {
	return &Error{Reason: reason, Retryable: true, Err: err}
}

// Classify returns the reason and retryability of err. Unclassified errors
// are retryable ProviderErrors.
func Classify(err error) (reason string, retryable bool) {
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Reason, pe.Retryable
	}
	return ReasonProviderError, true
}

// Registry maps provider names to providers. It is safe for concurrent use.
type Registry struct {
	mu        sync.RWMutex
	providers map[string]Provider
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{providers: map[string]Provider{}} }

// Register adds a provider under name, replacing any earlier one.
func (r *Registry) Register(name string, p Provider) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.providers[name] = p
}

// Get returns the provider registered under name.
func (r *Registry) Get(name string) (Provider, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	p, ok := r.providers[name]
	return p, ok
}

// Names returns the registered names, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.providers))
	for n := range r.providers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
