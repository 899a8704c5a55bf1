// Package migration moves the stored objects of a custom resource to its
// CRD's storage version, so etcd holds only that version, and then drops
// the older versions from the CRD's status.storedVersions: the step that
// lets a template stop serving an old version of its parent's API.
//
// A Migrator lists the kind in pages and updates each object unchanged,
// at a bounded rate. The apiserver writes an object only when its stored
// bytes change, which they do exactly when it is stored in another
// version: an object already in the storage version costs a read and no
// write, so a migration interrupted by a restart is resumed by running it
// again. An object someone else updated meanwhile was stored in the
// storage version by that write (a conflict counts as done); one the
// apiserver refuses (its schema or an admission webhook) stops the
// migration short of trimming storedVersions, named in the error.
// Progress (objects rewritten, already current, failed) goes to a
// callback, for the engine's log and events, and to metrics.
//
// It does not decide when to migrate (the engine does, as the leader,
// after a template moves the storage version), nor convert anything
// (the apiserver does, through the CRD's conversion). It imports
// nothing of ours.
package migration
