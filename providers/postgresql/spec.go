package postgresql

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/cuengine/engine/providers"
)

// Spec field names, as written in a template's resources.<name>.spec.
const (
	fieldDatabase = "database"
	fieldOwner    = "owner"
)

// knownFields lists every accepted spec field, sorted.
var knownFields = []string{fieldDatabase, fieldOwner}

// dbSpec is the validated spec of one database.
type dbSpec struct {
	// Database and Owner are the logical names of the database and its role.
	Database string
	Owner    string
}

// parseSpec validates a spec decoded from JSON and applies the default
// owner. Errors are terminal: InvalidSpec for the shape, InvalidName for a
// name PostgreSQL identifiers (or our suffix) cannot carry.
func parseSpec(m map[string]any) (dbSpec, error) {
	var unknown []string
	for k := range m {
		if !slices.Contains(knownFields, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return dbSpec{}, invalidSpec(unknown[0], "is not a known field (known: %s)", strings.Join(knownFields, ", "))
	}
	var s dbSpec
	var err error
	if s.Database, err = stringField(m, fieldDatabase, true); err != nil {
		return dbSpec{}, err
	}
	if s.Owner, err = stringField(m, fieldOwner, false); err != nil {
		return dbSpec{}, err
	}
	if s.Owner == "" {
		s.Owner = s.Database
	}
	if err := validateLogicalName(fieldDatabase, s.Database); err != nil {
		return dbSpec{}, err
	}
	if err := validateLogicalName(fieldOwner, s.Owner); err != nil {
		return dbSpec{}, err
	}
	return s, nil
}

func stringField(m map[string]any, field string, required bool) (string, error) {
	v, ok := m[field]
	if !ok || v == nil {
		if required {
			return "", invalidSpec(field, "is required")
		}
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", invalidSpec(field, "must be a string, got %T", v)
	}
	if s == "" {
		return "", invalidSpec(field, "must not be empty")
	}
	return s, nil
}

// invalidSpec is the terminal InvalidSpec error for one field.
func invalidSpec(field, format string, args ...any) error {
	return providers.Terminal(providers.ReasonInvalidSpec, "spec.%s %s", field, fmt.Sprintf(format, args...))
}
