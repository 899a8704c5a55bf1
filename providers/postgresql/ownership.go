package postgresql

import (
	"strings"

	"github.com/cuengine/engine/providers"
)

// ownerMarkPrefix starts the comment on every role and database the
// provider creates; the owner's UID follows. It is the proof of ownership.
const ownerMarkPrefix = "engine-owner-uid="

// ownerMark is the comment that marks an object as uid's.
func ownerMark(uid string) string { return ownerMarkPrefix + uid }

// validateOwnerUID checks that the UID is a Kubernetes UID (hex digits and
// dashes): it is written into a COMMENT literal, so nothing else may pass.
func validateOwnerUID(uid string) error {
	if uid == "" {
		return providers.Terminal(providers.ReasonProviderError, "owner UID is empty: the engine must pass the parent's metadata.uid")
	}
	if len(uid) > 64 || strings.Trim(uid, "0123456789abcdef-") != "" {
		return providers.Terminal(providers.ReasonProviderError, "owner UID %q is not a Kubernetes UID (lower-case hex digits and '-')", uid)
	}
	return nil
}

// commentLiteral is the SQL literal of the ownership comment. The UID is
// validated to hex and dashes, so the literal needs no escaping.
func commentLiteral(uid string) string { return "'" + ownerMark(uid) + "'" }

// notOwnedError is the terminal NameConflict for an object that exists
// without this owner's mark. It never touches the object.
func notOwnedError(what, name, comment, uid string) error {
	found := "no ownership comment"
	if strings.HasPrefix(comment, ownerMarkPrefix) {
		found = "comment " + comment
	} else if comment != "" {
		found = "another comment"
	}
	return providers.Terminal(providers.ReasonNameConflict,
		"%s %q exists but is not owned by this object (%s, want %s); it is left untouched and a new name is needed",
		what, name, found, ownerMark(uid))
}
