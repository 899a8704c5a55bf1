package postgresql

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"

	"github.com/cuengine/engine/providers"
)

func TestClassify(t *testing.T) {
	p := &Provider{secret: "adm1n-s3cret"}
	pg := func(code, msg string) error { return &pgconn.PgError{Severity: "ERROR", Code: code, Message: msg} }
	cases := []struct {
		name      string
		err       error
		reason    string
		retryable bool
		want      string
	}{
		{"wrong password", pg("28P01", `password authentication failed for user "admin"`), providers.ReasonCredentialsError, false,
			`CredentialsError: creating role "r": ERROR: password authentication failed for user "admin" (SQLSTATE 28P01); ` + connHelp},
		{"missing privilege", pg("42501", "permission denied to create database"), providers.ReasonCredentialsError, false,
			`CredentialsError: creating role "r": ERROR: permission denied to create database (SQLSTATE 42501); ` + connHelp},
		{"too many connections", pg("53300", "sorry, too many clients already"), providers.ReasonUnavailable, true,
			`Unavailable: creating role "r": server unavailable: ERROR: sorry, too many clients already (SQLSTATE 53300)`},
		{"shutting down", pg("57P01", "terminating connection due to administrator command"), providers.ReasonUnavailable, true,
			`Unavailable: creating role "r": server unavailable: ERROR: terminating connection due to administrator command (SQLSTATE 57P01)`},
		{"serialization", pg("40001", "could not serialize access"), providers.ReasonProviderError, true,
			`ProviderError: creating role "r": ERROR: could not serialize access (SQLSTATE 40001)`},
		{"in use", pg("55006", "database is being accessed by other users"), providers.ReasonProviderError, true,
			`ProviderError: creating role "r": ERROR: database is being accessed by other users (SQLSTATE 55006)`},
		{"anything else", pg("42601", "syntax error"), providers.ReasonProviderError, false,
			`ProviderError: creating role "r": ERROR: syntax error (SQLSTATE 42601)`},
		{"deadline", fmt.Errorf("reading: %w", context.DeadlineExceeded), providers.ReasonTimeout, true,
			`Timeout: creating role "r": deadline exceeded: reading: context deadline exceeded`},
		{"network", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}, providers.ReasonUnavailable, true,
			`Unavailable: creating role "r": server unreachable: dial tcp: connection refused`},
		{"the admin password scrubbed", errors.New("some library said adm1n-s3cret"), providers.ReasonProviderError, true,
			`ProviderError: creating role "r": some library said ***`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := p.classify(`creating role "r"`, c.err)
			reason, retryable := providers.Classify(err)
			assert.Equal(t, c.reason, reason)
			assert.Equal(t, c.retryable, retryable)
			assert.Equal(t, c.want, err.Error())
			assert.ErrorIs(t, err, c.err, "the cause stays reachable")
		})
	}
}
