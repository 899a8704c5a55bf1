package postgresql

import (
	"context"
	"fmt"

	"github.com/cuengine/engine/providers"
)

// Delete drops the database, ending its sessions (WITH (FORCE)), then the
// role. It needs no spec, only the recorded names. Absent objects are
// success; an object without this owner's mark is never dropped
// (NameConflict). A database without a mark but owned by our role is ours
// (see Apply).
func (p *Provider) Delete(ctx context.Context, req providers.Request) error {
	if err := validateOwnerUID(req.Owner.UID); err != nil {
		return err
	}
	n, err := recordedNames(req)
	if err != nil {
		return err
	}
	uid := req.Owner.UID
	role, err := p.readRole(ctx, n.role)
	if err != nil {
		return err
	}
	roleOurs := role != nil && role.comment == ownerMark(uid)
	db, err := p.readDatabase(ctx, n.database)
	if err != nil {
		return err
	}
	if db != nil {
		if db.comment != ownerMark(uid) && !(db.comment == "" && roleOurs && db.owner == n.role) {
			return notOwnedError("database", n.database, db.comment, uid)
		}
		if err := p.exec(ctx, "dropping database", "DROP DATABASE IF EXISTS "+ident(n.database)+" WITH (FORCE)"); err != nil {
			return p.classify(fmt.Sprintf("dropping database %q", n.database), err)
		}
	}
	if role == nil {
		return nil
	}
	if !roleOurs {
		return notOwnedError("role", n.role, role.comment, uid)
	}
	if err := p.exec(ctx, "dropping role", "DROP ROLE IF EXISTS "+ident(n.role)); err != nil {
		if pgCode(err) == codeDependentObjects {
			return providers.Retryable(providers.ReasonProviderError, fmt.Errorf(
				"dropping role %q: it still owns objects or holds privileges in another database; "+
					"reassign or drop them (REASSIGN OWNED BY / DROP OWNED BY in that database): %w", n.role, &safeError{msg: summary(err), err: err}))
		}
		return p.classify(fmt.Sprintf("dropping role %q", n.role), err)
	}
	return nil
}
