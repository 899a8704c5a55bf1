package postgresql

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// roleInfo is what the catalog says of a role.
type roleInfo struct {
	canLogin bool
	comment  string
}

// dbInfo is what the catalog says of a database.
type dbInfo struct {
	owner   string
	comment string
}

// readRole reads a role; nil when absent. Names are parameters, never text.
func (p *Provider) readRole(ctx context.Context, name string) (*roleInfo, error) {
	var info roleInfo
	var comment *string
	err := p.withTimeout(ctx, func(ctx context.Context) error {
		return p.pool.QueryRow(ctx,
			`SELECT rolcanlogin, shobj_description(oid, 'pg_authid') FROM pg_roles WHERE rolname = $1`, name,
		).Scan(&info.canLogin, &comment)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, p.classify(fmt.Sprintf("reading role %q", name), err)
	}
	if comment != nil {
		info.comment = *comment
	}
	return &info, nil
}

// readDatabase reads a database; nil when absent.
func (p *Provider) readDatabase(ctx context.Context, name string) (*dbInfo, error) {
	var info dbInfo
	var comment *string
	err := p.withTimeout(ctx, func(ctx context.Context) error {
		return p.pool.QueryRow(ctx,
			`SELECT pg_get_userbyid(datdba), shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = $1`, name,
		).Scan(&info.owner, &comment)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, p.classify(fmt.Sprintf("reading database %q", name), err)
	}
	if comment != nil {
		info.comment = *comment
	}
	return &info, nil
}

// exec runs one statement built from quoted identifiers and validated
// literals only. what names it in errors; the statement never appears.
func (p *Provider) exec(ctx context.Context, what, sql string) error {
	err := p.withTimeout(ctx, func(ctx context.Context) error {
		_, err := p.pool.Exec(ctx, sql)
		return err
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// ident quotes one identifier with pgx's own quoting.
func ident(name string) string { return pgx.Identifier{name}.Sanitize() }
