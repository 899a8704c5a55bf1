// Package postgresql is the engine's provider for PostgreSQL databases,
// registered under the name "postgresql".
//
// A template declares a database as
//
//	resources: db: {
//		provider: "postgresql"
//		spec: {
//			database: "shop"  // logical name of the database
//			owner:    "shop"  // logical name of its login role; defaults to database
//		}
//		connectionSecret: name: "shop-db"
//	}
//
// Each resource is one database and one login role that owns it, on the
// server of the admin connection. Their physical names are the logical ones
// plus "_" and an eight-hex-character suffix derived from the owner's UID,
// the resource's local name and the naming attempt (Provider.ExternalName):
// the database's is the external name, the role's is recorded in Settings
// under "role". Logical names are lower-case letters, digits and '_',
// starting with a letter, at most 54 bytes, so the physical ones fit in
// PostgreSQL's 63-byte identifiers; anything else is a terminal InvalidName
// before any SQL runs. Identifiers are always quoted with pgx.Identifier's
// Sanitize; no text of a spec is ever part of a statement otherwise.
//
// Ownership. The provider comments the role and the database it creates
// with engine-owner-uid=<owner UID> (COMMENT ON ROLE / DATABASE). It never
// alters, adopts or drops one without that mark: a same-named database or
// role someone else made is a terminal NameConflict and is left untouched.
// A database without a comment but owned by our (marked) role is ours too:
// CREATE DATABASE cannot share a transaction with its COMMENT, so a crash
// between the two leaves exactly that, and the next Apply adds the mark.
//
// Credentials. The role's password is generated (crypto/rand) when the role
// is created, and again when the request says ResetCredentials (the engine
// lost the Secret that held it). It is returned only in the Observation's
// Sensitive outputs (username, password, database, host, port, uri), never
// in State or in an error. Every Apply returns the non-secret ones
// (username, database, host, port) in Sensitive too, so the engine can
// keep the Secret's other fields current.
//
// Drift. Apply recreates a role or database dropped out of band (a role
// recreated gets a new password, delivered like a reset), restores the
// role's LOGIN and the database's owner.
//
// Deletion drops the database (WITH (FORCE), which ends its sessions) and
// then the role; absent ones are success, unmarked ones a NameConflict.
//
// The admin connection comes from libpq's environment (PGHOST, PGPORT,
// PGUSER, PGPASSWORD, PGSSLMODE, ...) or a connection string
// (Options.ConnString). The admin role needs LOGIN, CREATEDB and
// CREATEROLE, no more (a superuser works): before it creates a database
// owned by a role, or gives one back to it, the provider grants that role
// to the admin (joinRole), as PostgreSQL requires of whoever makes
// another role a database's owner. Its password never appears in an error.
package postgresql
