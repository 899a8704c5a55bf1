package postgresql

import (
	"context"
	"strconv"

	"github.com/cuengine/engine/providers"
)

// Plan says what Apply would do to the role and the database, reading
// the catalog and writing nothing: the same checks in the same order,
// stopped before each statement. A password Apply would set is a
// sensitive change, without its value.
func (p *Provider) Plan(ctx context.Context, req providers.Request) (providers.Plan, error) {
	if req.ExternalName == "" {
		// No name recorded yet: the first Apply creates both.
		spec, err := parseSpec(req.Spec)
		if err != nil {
			return providers.Refusal(err)
		}
		return providers.Plan{Action: providers.ActionCreate, Changes: []providers.Change{
			{Field: fieldDatabase, To: strconv.Quote(spec.Database)},
			{Field: fieldOwner, To: strconv.Quote(spec.Owner)},
			{Field: "password", Sensitive: true},
		}}, nil
	}
	n, err := checkApply(req)
	if err != nil {
		return providers.Refusal(err)
	}
	uid := req.Owner.UID
	db, err := p.readDatabase(ctx, n.database)
	if err != nil {
		return providers.Plan{}, err
	}
	if db != nil && db.comment != ownerMark(uid) && (db.comment != "" || db.owner != n.role) {
		return providers.Refusal(notOwnedError("database", n.database, db.comment, uid))
	}
	role, err := p.readRole(ctx, n.role)
	if err != nil {
		return providers.Plan{}, err
	}
	var changes []providers.Change
	switch {
	case role == nil:
		changes = append(changes,
			providers.Change{Field: "role", To: strconv.Quote(n.role)},
			providers.Change{Field: "password", Sensitive: true})
	case role.comment != ownerMark(uid):
		return providers.Refusal(notOwnedError("role", n.role, role.comment, uid))
	default:
		if !role.canLogin {
			changes = append(changes, providers.Change{Field: "role.login", From: "false", To: "true"})
		}
		if req.ResetCredentials {
			changes = append(changes, providers.Change{Field: "password", Sensitive: true})
		}
	}
	if db == nil {
		changes = append(changes, providers.Change{Field: "database", To: strconv.Quote(n.database)},
			providers.Change{Field: "database.owner", To: strconv.Quote(n.role)})
		return providers.Plan{Action: providers.ActionCreate, Changes: changes}, nil
	}
	if db.comment == "" {
		changes = append(changes, providers.Change{Field: "database.mark", To: strconv.Quote(ownerMark(uid))})
	}
	if db.owner != n.role {
		changes = append(changes, providers.Change{Field: "database.owner", From: strconv.Quote(db.owner), To: strconv.Quote(n.role)})
	}
	if len(changes) == 0 {
		return providers.Plan{Action: providers.ActionNone}, nil
	}
	return providers.Plan{Action: providers.ActionUpdate, Changes: changes}, nil
}
