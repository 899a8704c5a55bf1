package postgresql

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/cuengine/engine/providers"
)

const (
	// suffixLen is the number of hex characters appended to a logical name.
	suffixLen = 8
	// maxIdentifierLen is PostgreSQL's limit (NAMEDATALEN-1) in bytes;
	// longer identifiers are silently truncated, which would break names.
	maxIdentifierLen = 63
	// MaxLogicalNameLen is the longest logical name: the physical one must
	// fit in 63 bytes after "_" and the suffix are appended.
	MaxLogicalNameLen = maxIdentifierLen - 1 - suffixLen
)

// reservedPrefix: roles named pg_* are reserved by PostgreSQL.
const reservedPrefix = "pg_"

// settingRole is the Settings key under which the role's name is recorded.
const settingRole = "role"

// nameSuffix is the deterministic suffix of a resource's names: the first
// eight hex characters of sha256(uid + "/" + local name + "/" + attempt).
// The local name is part of it because databases and roles are names on
// the whole server: two resources of one parent must not share a role.
func nameSuffix(uid, local string, attempt int) string {
	sum := sha256.Sum256([]byte(uid + "/" + local + "/" + strconv.Itoa(attempt)))
	return hex.EncodeToString(sum[:])[:suffixLen]
}

// physicalName joins a logical name and a suffix.
func physicalName(logical, suffix string) string { return logical + "_" + suffix }

// logicalNameOf is the logical part of a physical name: all before the
// last "_".
func logicalNameOf(physical string) string {
	if i := strings.LastIndexByte(physical, '_'); i >= 0 {
		return physical[:i]
	}
	return physical
}

// validateLogicalName checks spec.<field>: lower-case letters, digits and
// '_', starting with a letter, short enough for the suffix. Errors are
// terminal InvalidName and say what to change.
func validateLogicalName(field, name string) error {
	if len(name) > MaxLogicalNameLen {
		return providers.Terminal(providers.ReasonInvalidName,
			"spec.%s %q is %d bytes; the longest allowed is %d because the engine appends \"_\" and a %d-character suffix, "+
				"and PostgreSQL names are at most %d bytes", field, name, len(name), MaxLogicalNameLen, suffixLen, maxIdentifierLen)
	}
	if err := checkIdentifier(name); err != nil {
		return providers.Terminal(providers.ReasonInvalidName, "spec.%s %q: %w", field, name, err)
	}
	return nil
}

// validatePhysicalName checks a recorded name before any SQL uses it.
func validatePhysicalName(what, name string) error {
	if name == "" {
		return providers.Terminal(providers.ReasonInvalidName, "no %s name recorded: the engine must call ExternalName first", what)
	}
	if len(name) > maxIdentifierLen {
		return providers.Terminal(providers.ReasonInvalidName, "%s name %q is longer than %d bytes", what, name, maxIdentifierLen)
	}
	if err := checkIdentifier(name); err != nil {
		return providers.Terminal(providers.ReasonInvalidName, "%s name %q: %w", what, name, err)
	}
	return nil
}

// checkIdentifier allows only names that need no quoting to mean what they
// say: [a-z][a-z0-9_]*, not starting with pg_.
func checkIdentifier(name string) error {
	if name == "" {
		return fmt.Errorf("must not be empty")
	}
	for i, r := range name {
		ok := (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9' && i > 0) || (r == '_' && i > 0)
		if !ok {
			return fmt.Errorf("character %q at position %d is not allowed: use lower-case letters, digits and '_', starting with a letter", r, i)
		}
	}
	if strings.HasPrefix(name, reservedPrefix) {
		return fmt.Errorf("must not start with %q (reserved by PostgreSQL)", reservedPrefix)
	}
	return nil
}
