package plugin

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cuengine/engine/providers"
)

// wireError is a provider's error as it crosses the socket: a
// providers.Error keeps its reason and retryability; any other error only
// its text, and is classified on the engine's side as it would be in
// process (a retryable ProviderError).
type wireError struct {
	Classified bool   `json:"classified,omitempty"`
	Reason     string `json:"reason,omitempty"`
	Retryable  bool   `json:"retryable,omitempty"`
	Message    string `json:"message"`
}

func errorToWire(err error) *wireError {
	if err == nil {
		return nil
	}
	var pe *providers.Error
	if errors.As(err, &pe) {
		msg := "error"
		if pe.Err != nil {
			msg = pe.Err.Error()
		}
		return &wireError{Classified: true, Reason: pe.Reason, Retryable: pe.Retryable, Message: msg}
	}
	return &wireError{Message: err.Error()}
}

func errorFromWire(w *wireError) error {
	if w == nil {
		return nil
	}
	if !w.Classified {
		return errors.New(w.Message)
	}
	return &providers.Error{Reason: w.Reason, Retryable: w.Retryable, Err: errors.New(w.Message)}
}

// transportError classifies a failed call (the error is gRPC's, not the
// provider's): the caller's deadline or cancellation is a retryable
// Timeout that still matches context.DeadlineExceeded or Canceled; a
// plugin that is gone is ProviderUnavailable.
func transportError(ctx context.Context, name, method string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return providers.Retryable(providers.ReasonTimeout, fmt.Errorf("provider %s: %s: %w", name, method, ctxErr))
	}
	if status.Code(err) == codes.DeadlineExceeded {
		return providers.Retryable(providers.ReasonTimeout, fmt.Errorf("provider %s: %s: %w", name, method, context.DeadlineExceeded))
	}
	// Unavailable, or Canceled when the connection closed under the call:
	// the plugin died or is being restarted.
	return unavailable(name, fmt.Errorf("%s: %s", method, status.Convert(err).Message()))
}

func unavailable(name string, err error) error {
	return providers.Retryable(providers.ReasonProviderUnavailable, fmt.Errorf("provider %s: plugin unavailable: %w", name, err))
}
