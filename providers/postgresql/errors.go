package postgresql

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cuengine/engine/providers"
)

// SQLSTATE codes with a meaning of their own to the provider.
const (
	codeDuplicateObject   = "42710" // CREATE ROLE of a taken name
	codeDuplicateDatabase = "42P04"
	codeUndefinedObject   = "42704"
	codeInvalidCatalog    = "3D000" // no such database
	codeInsufficientPriv  = "42501"
	codeObjectInUse       = "55006"
	codeDependentObjects  = "2BP01"
)

// safeError carries a message that is safe to show (no statement text, no
// password) while keeping the original reachable through errors.Is/As.
type safeError struct {
	msg string
	err error
}

func (e *safeError) Error() string { return e.msg }
func (e *safeError) Unwrap() error { return e.err }

// classify turns an error of pgx into a classified *providers.Error. op is
// the lower-case action that failed, such as `creating role "x"`. Messages
// keep PostgreSQL's own text and SQLSTATE, never the statement, and the
// admin password is scrubbed from them.
func (p *Provider) classify(op string, err error) error {
	if err == nil {
		return nil
	}
	var pe *providers.Error
	if errors.As(err, &pe) {
		return err
	}
	safe := &safeError{msg: scrub(summary(err), p.secret), err: err}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return classifyPg(op, pgErr, safe)
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return providers.Retryable(providers.ReasonTimeout, fmt.Errorf("%s: deadline exceeded: %w", op, safe))
	case errors.Is(err, context.Canceled):
		return providers.Retryable(providers.ReasonProviderError, fmt.Errorf("%s: canceled: %w", op, safe))
	case isNetworkError(err):
		return providers.Retryable(providers.ReasonUnavailable, fmt.Errorf("%s: server unreachable: %w", op, safe))
	}
	return providers.Retryable(providers.ReasonProviderError, fmt.Errorf("%s: %w", op, safe))
}

// classifyPg classifies an error the server answered, by SQLSTATE class.
func classifyPg(op string, pgErr *pgconn.PgError, safe error) error {
	code := pgErr.Code
	switch {
	case strings.HasPrefix(code, "28"), code == codeInsufficientPriv:
		return &providers.Error{Reason: providers.ReasonCredentialsError,
			Err: fmt.Errorf("%s: %w; %s", op, safe, connHelp)}
	case strings.HasPrefix(code, "08"), strings.HasPrefix(code, "53"), strings.HasPrefix(code, "57"):
		return providers.Retryable(providers.ReasonUnavailable, fmt.Errorf("%s: server unavailable: %w", op, safe))
	case strings.HasPrefix(code, "40"), code == codeObjectInUse, code == codeDependentObjects:
		return providers.Retryable(providers.ReasonProviderError, fmt.Errorf("%s: %w", op, safe))
	default:
		return &providers.Error{Reason: providers.ReasonProviderError, Err: fmt.Errorf("%s: %w", op, safe)}
	}
}

// summary is the secret-free text of an error: a server error's severity,
// message and SQLSTATE (not its detail, which may quote values); a
// connection error's cause.
func summary(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return fmt.Sprintf("%s: %s (SQLSTATE %s)", pgErr.Severity, pgErr.Message, pgErr.Code)
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) && ce.Unwrap() != nil {
		return "connecting to the server: " + ce.Unwrap().Error()
	}
	return err.Error()
}

// scrub removes the admin password from a message, should any library put
// it there.
func scrub(msg, secret string) string {
	if secret == "" {
		return msg
	}
	return strings.ReplaceAll(msg, secret, "***")
}

// isNetworkError reports whether err is a transport failure rather than an
// answer from the server.
func isNetworkError(err error) bool {
	var netErr net.Error
	var ce *pgconn.ConnectError
	return errors.As(err, &netErr) || errors.As(err, &ce)
}

// pgCode is the SQLSTATE of a server error, or "".
func pgCode(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}
