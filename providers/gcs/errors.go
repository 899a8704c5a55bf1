package gcs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"

	"github.com/cuengine/engine/providers"
)

// credentialsHelp tells a user how to give the provider credentials. It
// names mechanisms only, never values.
const credentialsHelp = "provide Google Cloud credentials through Application Default Credentials: " +
	"set GOOGLE_APPLICATION_CREDENTIALS to a service account key file or run " +
	"`gcloud auth application-default login`; on GKE use Workload Identity and grant the " +
	"Kubernetes service account roles/storage.admin on the project; for an emulator set " +
	"STORAGE_EMULATOR_HOST (e.g. localhost:4443)"

// credentialDiscoveryMarkers are fragments of the messages the auth libraries
// return when no usable credentials were found or a credentials file could
// not be used.
var credentialDiscoveryMarkers = []string{
	"could not find default credentials",
	"google_application_credentials",
	"credentials: ",
	"cannot fetch token",
	"unable to parse credentials",
}

// safeError carries a message that is safe to show (no response bodies, no
// tokens) while keeping the original error reachable through errors.Is/As.
type safeError struct {
	msg string
	err error
}

func (e *safeError) Error() string { return e.msg }
func (e *safeError) Unwrap() error { return e.err }

// classify turns an error of the storage client into a classified
// *providers.Error. op is the lower-case action that failed, such as
// `get bucket "x"`. The callers handle the codes with a meaning of their own
// (404, 409, 412) before calling classify.
func classify(op string, err error) error {
	if err == nil {
		return nil
	}
	var pe *providers.Error
	if errors.As(err, &pe) {
		return err
	}
	if isCredentialDiscoveryError(err) {
		return credentialsError(op, err, "no usable credentials were found")
	}
	var gerr *googleapi.Error
	if errors.As(err, &gerr) {
		return classifyAPIError(op, err, gerr)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return providers.Retryable(providers.ReasonTimeout, fmt.Errorf("%s: deadline exceeded: %w", op, err))
	}
	if errors.Is(err, context.Canceled) {
		return providers.Retryable(providers.ReasonProviderError, fmt.Errorf("%s: canceled: %w", op, err))
	}
	if isNetworkError(err) {
		return providers.Retryable(providers.ReasonUnavailable, fmt.Errorf("%s: %w", op, err))
	}
	return providers.Retryable(providers.ReasonProviderError, fmt.Errorf("%s: %w", op, err))
}

// classifyAPIError classifies an HTTP error returned by the JSON API.
func classifyAPIError(op string, err error, gerr *googleapi.Error) error {
	code := gerr.Code
	safe := &safeError{msg: apiErrorSummary(gerr), err: err}
	switch {
	case code == http.StatusTooManyRequests:
		return providers.Retryable(providers.ReasonRateLimited, fmt.Errorf("%s: rate limited: %w", op, safe))
	case code >= 500:
		return providers.Retryable(providers.ReasonUnavailable, fmt.Errorf("%s: service unavailable: %w", op, safe))
	case code == http.StatusRequestTimeout:
		return providers.Retryable(providers.ReasonTimeout, fmt.Errorf("%s: request timeout: %w", op, safe))
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return credentialsError(op, err, apiErrorSummary(gerr))
	default:
		return &providers.Error{
			Reason: providers.ReasonProviderError,
			Err:    fmt.Errorf("%s: %w", op, safe),
		}
	}
}

// credentialsError is the terminal error for missing or insufficient
// credentials. cause is a short, secret-free description.
func credentialsError(op string, err error, cause string) error {
	return &providers.Error{
		Reason: providers.ReasonCredentialsError,
		Err: fmt.Errorf("%s: %w",
			op, &safeError{msg: cause + "; " + credentialsHelp, err: err}),
	}
}

// apiErrorSummary is the code and message of an API error, without the raw
// body or headers.
func apiErrorSummary(gerr *googleapi.Error) string {
	msg := gerr.Message
	if msg == "" {
		msg = http.StatusText(gerr.Code)
	}
	return fmt.Sprintf("HTTP %d: %s", gerr.Code, msg)
}

// isCredentialDiscoveryError reports whether err comes from looking for or
// loading credentials rather than from the storage API.
func isCredentialDiscoveryError(err error) bool {
	var gerr *googleapi.Error
	if errors.As(err, &gerr) {
		return false
	}
	msg := strings.ToLower(err.Error())
	for _, m := range credentialDiscoveryMarkers {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return false
}

// isNetworkError reports whether err is a transport failure (refused,
// reset, DNS) rather than an answer from the service.
func isNetworkError(err error) bool {
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	var urlErr *url.Error
	return errors.As(err, &urlErr)
}

// httpCode returns the HTTP status of an API error, or 0.
func httpCode(err error) int {
	var gerr *googleapi.Error
	if errors.As(err, &gerr) {
		return gerr.Code
	}
	return 0
}

// isBucketNotFound reports whether err says the bucket does not exist:
// storage.ErrBucketNotExist from Attrs, a plain 404 from Delete.
func isBucketNotFound(err error) bool {
	return errors.Is(err, storage.ErrBucketNotExist) || httpCode(err) == http.StatusNotFound
}

// isObjectNotFound reports whether err says the object (generation) is gone.
func isObjectNotFound(err error) bool {
	return errors.Is(err, storage.ErrObjectNotExist) || httpCode(err) == http.StatusNotFound
}

// forbiddenSummary is the secret-free summary of a 401/403 error.
func forbiddenSummary(err error) string {
	var gerr *googleapi.Error
	if errors.As(err, &gerr) {
		return apiErrorSummary(gerr)
	}
	return "permission denied"
}
