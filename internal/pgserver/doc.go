// Package pgserver starts a throwaway PostgreSQL server from the machine's
// own binaries (Debian's postgresql-15: initdb, pg_ctl), for the tests of
// providers/postgresql and engine/, and for `engine dev`.
//
// Each Server is a fresh cluster in its own temporary directory, listening
// on a free loopback port and on a Unix socket in that directory, with one
// superuser ("admin") whose password is generated. Run as root (as CI does),
// the cluster is created and run as the `postgres` user, since PostgreSQL
// refuses to run as root. Stop removes the directory.
//
// It does not install PostgreSQL: when the binaries are missing, Start
// fails with the command that installs them (hack/postgres.sh install).
package pgserver
