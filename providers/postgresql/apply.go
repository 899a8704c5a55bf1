package postgresql

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/cuengine/engine/providers"
)

// Apply makes the role and the database exist, marked as the owner's, the
// role able to log in and owning the database. It never touches a role or
// database without this owner's mark (NameConflict). A role it creates, or
// resets because req.ResetCredentials, gets a new password, returned in the
// Observation's Sensitive outputs only.
func (p *Provider) Apply(ctx context.Context, req providers.Request) (providers.Observation, error) {
	n, err := checkApply(req)
	if err != nil {
		return providers.Observation{}, err
	}
	uid := req.Owner.UID
	// The database first, read-only: a foreign database under our name
	// must stop us before we create a role that would then be left over.
	db, err := p.readDatabase(ctx, n.database)
	if err != nil {
		return providers.Observation{}, err
	}
	if db != nil && db.comment != ownerMark(uid) && (db.comment != "" || db.owner != n.role) {
		return providers.Observation{}, notOwnedError("database", n.database, db.comment, uid)
	}
	password, err := p.ensureRole(ctx, n.role, uid, req.ResetCredentials)
	if err != nil {
		return providers.Observation{}, err
	}
	if err := p.ensureDatabase(ctx, n, uid, db); err != nil {
		return providers.Observation{}, err
	}
	return p.observation(n, password), nil
}

// checkApply validates everything Apply can check without a call.
func checkApply(req providers.Request) (names, error) {
	spec, err := parseSpec(req.Spec)
	if err != nil {
		return names{}, err
	}
	if err := validateOwnerUID(req.Owner.UID); err != nil {
		return names{}, err
	}
	n, err := recordedNames(req)
	if err != nil {
		return names{}, err
	}
	if recorded := logicalNameOf(n.database); recorded != spec.Database {
		return names{}, immutableField(fieldDatabase, recorded, spec.Database)
	}
	if recorded := logicalNameOf(n.role); recorded != spec.Owner {
		return names{}, immutableField(fieldOwner, recorded, spec.Owner)
	}
	return n, nil
}

// immutableField is the terminal error for a renamed database or role.
func immutableField(field, current, wanted string) error {
	return providers.Terminal(providers.ReasonImmutableField,
		"spec.%s changed from %q to %q, but the engine does not rename databases or roles: set it back to %q, "+
			"or remove the resource and declare a new one (with deletionPolicy: \"Orphan\" to keep the old database)",
		field, current, wanted, current)
}

// ensureRole creates the role when absent, or checks it is ours and
// corrects it. It returns the password when it set one.
func (p *Provider) ensureRole(ctx context.Context, role, uid string, reset bool) (string, error) {
	info, err := p.readRole(ctx, role)
	if err != nil {
		return "", err
	}
	if info == nil {
		return p.createRole(ctx, role, uid)
	}
	if info.comment != ownerMark(uid) {
		return "", notOwnedError("role", role, info.comment, uid)
	}
	if !reset && info.canLogin {
		return "", nil
	}
	password := ""
	sql := "ALTER ROLE " + ident(role) + " WITH LOGIN"
	if reset {
		if password, err = newPassword(); err != nil {
			return "", err
		}
		lit, err := passwordLiteral(password)
		if err != nil {
			return "", err
		}
		sql += " PASSWORD " + lit
	}
	if err := p.exec(ctx, "altering role", sql); err != nil {
		return "", p.classify(fmt.Sprintf("altering role %q", role), err)
	}
	return password, nil
}

// createRole creates the role with a new password and its mark, in one
// transaction: a role without its mark never exists.
func (p *Provider) createRole(ctx context.Context, role, uid string) (string, error) {
	password, err := newPassword()
	if err != nil {
		return "", err
	}
	lit, err := passwordLiteral(password)
	if err != nil {
		return "", err
	}
	err = p.withTimeout(ctx, func(ctx context.Context) error {
		return pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "CREATE ROLE "+ident(role)+" WITH LOGIN PASSWORD "+lit); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "COMMENT ON ROLE "+ident(role)+" IS "+commentLiteral(uid))
			return err
		})
	})
	switch {
	case err == nil:
		return password, nil
	case pgCode(err) == codeDuplicateObject:
		// Created meanwhile (a concurrent Apply, or someone else): the
		// next Apply reads it and decides.
		return "", providers.Retryable(providers.ReasonProviderError, fmt.Errorf("role %q appeared while being created; retrying", role))
	default:
		return "", p.classify(fmt.Sprintf("creating role %q", role), err)
	}
}

// ensureDatabase creates the database when absent (db nil), marks it when
// it is ours but unmarked, and gives it back to the role when its owner
// drifted.
func (p *Provider) ensureDatabase(ctx context.Context, n names, uid string, db *dbInfo) error {
	if db == nil {
		if err := p.joinRole(ctx, n.role); err != nil {
			return err
		}
		err := p.exec(ctx, "creating database", "CREATE DATABASE "+ident(n.database)+" OWNER "+ident(n.role))
		switch {
		case pgCode(err) == codeDuplicateDatabase:
			return providers.Retryable(providers.ReasonProviderError, fmt.Errorf("database %q appeared while being created; retrying", n.database))
		case err != nil:
			return p.classify(fmt.Sprintf("creating database %q", n.database), err)
		}
		return p.markDatabase(ctx, n.database, uid)
	}
	if db.comment == "" {
		// Unmarked: ours only if our role owns it (a crash between
		// CREATE DATABASE and its COMMENT).
		if db.owner != n.role {
			return notOwnedError("database", n.database, "", uid)
		}
		if err := p.markDatabase(ctx, n.database, uid); err != nil {
			return err
		}
	}
	if db.owner != n.role {
		if err := p.joinRole(ctx, n.role); err != nil {
			return err
		}
		if err := p.exec(ctx, "altering database", "ALTER DATABASE "+ident(n.database)+" OWNER TO "+ident(n.role)); err != nil {
			return p.classify(fmt.Sprintf("giving database %q back to role %q", n.database, n.role), err)
		}
	}
	return nil
}

// joinRole makes the admin role a member of role, unless it is one
// already (a superuser always is): PostgreSQL (15) lets a role create a
// database owned by another, or give one to another, only when it is a
// member of that role. CREATEROLE is the right to grant it.
func (p *Provider) joinRole(ctx context.Context, role string) error {
	var member bool
	err := p.withTimeout(ctx, func(ctx context.Context) error {
		return p.pool.QueryRow(ctx, `SELECT pg_has_role(current_user, $1, 'MEMBER')`, role).Scan(&member)
	})
	if err != nil {
		return p.classify(fmt.Sprintf("reading the admin's membership of role %q", role), err)
	}
	if member {
		return nil
	}
	if err := p.exec(ctx, "granting role", "GRANT "+ident(role)+" TO CURRENT_USER"); err != nil {
		return p.classify(fmt.Sprintf("granting role %q to the admin role", role), err)
	}
	return nil
}

func (p *Provider) markDatabase(ctx context.Context, database, uid string) error {
	if err := p.exec(ctx, "commenting database", "COMMENT ON DATABASE "+ident(database)+" IS "+commentLiteral(uid)); err != nil {
		return p.classify(fmt.Sprintf("marking database %q as ours", database), err)
	}
	return nil
}
