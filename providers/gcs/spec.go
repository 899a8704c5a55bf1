package gcs

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/cuengine/engine/providers"
)

// Spec field names, as written in a template's resources.<name>.spec.
const (
	fieldProjectID    = "projectID"
	fieldBucketName   = "bucketName"
	fieldLocation     = "location"
	fieldStorageClass = "storageClass"
	fieldLabels       = "labels"
	fieldVersioning   = "versioning"
	fieldUBLA         = "uniformBucketLevelAccess"
	fieldForceDestroy = "forceDestroy"
)

// Defaults for optional spec fields.
const (
	DefaultLocation     = "US"
	DefaultStorageClass = "STANDARD"
)

// knownFields lists every accepted spec field, sorted.
var knownFields = []string{
	fieldBucketName, fieldForceDestroy, fieldLabels, fieldLocation,
	fieldProjectID, fieldStorageClass, fieldUBLA, fieldVersioning,
}

// storageClasses are the storage classes a bucket can be created with.
var storageClasses = []string{
	"STANDARD", "NEARLINE", "COLDLINE", "ARCHIVE",
	"MULTI_REGIONAL", "REGIONAL", "DURABLE_REDUCED_AVAILABILITY",
}

// bucketSpec is the validated spec of one bucket, defaults applied.
type bucketSpec struct {
	ProjectID                string
	BucketName               string
	Location                 string
	StorageClass             string
	Labels                   map[string]string
	Versioning               bool
	UniformBucketLevelAccess bool
	ForceDestroy             bool
}

// parseSpec validates a spec decoded from JSON and applies defaults. Errors
// are terminal InvalidSpec naming the field.
func parseSpec(m map[string]any) (bucketSpec, error) {
	if err := checkKnownFields(m); err != nil {
		return bucketSpec{}, err
	}
	s := bucketSpec{}
	var err error
	if s.ProjectID, err = requiredString(m, fieldProjectID); err != nil {
		return bucketSpec{}, err
	}
	if strings.ContainsAny(s.ProjectID, "/ \t\n") {
		return bucketSpec{}, invalidSpec(fieldProjectID, "%q must be a project ID such as \"my-project\"", s.ProjectID)
	}
	if s.BucketName, err = requiredString(m, fieldBucketName); err != nil {
		return bucketSpec{}, err
	}
	if s.Location, err = optionalString(m, fieldLocation, DefaultLocation); err != nil {
		return bucketSpec{}, err
	}
	s.Location = strings.ToUpper(s.Location)
	if s.StorageClass, err = storageClass(m); err != nil {
		return bucketSpec{}, err
	}
	if s.Labels, err = labelsField(m); err != nil {
		return bucketSpec{}, err
	}
	if s.Versioning, err = optionalBool(m, fieldVersioning, false); err != nil {
		return bucketSpec{}, err
	}
	if s.UniformBucketLevelAccess, err = optionalBool(m, fieldUBLA, true); err != nil {
		return bucketSpec{}, err
	}
	if s.ForceDestroy, err = optionalBool(m, fieldForceDestroy, false); err != nil {
		return bucketSpec{}, err
	}
	return s, nil
}

// invalidSpec is the terminal InvalidSpec error for one field.
func invalidSpec(field, format string, args ...any) error {
	return providers.Terminal(providers.ReasonInvalidSpec, "spec.%s %s", field, fmt.Sprintf(format, args...))
}

func checkKnownFields(m map[string]any) error {
	var unknown []string
	for k := range m {
		if !slices.Contains(knownFields, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	return invalidSpec(unknown[0], "is not a known field (known: %s)", strings.Join(knownFields, ", "))
}

func requiredString(m map[string]any, field string) (string, error) {
	v, ok := m[field]
	if !ok || v == nil {
		return "", invalidSpec(field, "is required")
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

func optionalString(m map[string]any, field, def string) (string, error) {
	v, ok := m[field]
	if !ok || v == nil {
		return def, nil
	}
	s, ok := v.(string)
	if !ok {
		return "", invalidSpec(field, "must be a string, got %T", v)
	}
	if s == "" {
		return "", invalidSpec(field, "must not be empty (omit it for the default %q)", def)
	}
	return s, nil
}

func optionalBool(m map[string]any, field string, def bool) (bool, error) {
	v, ok := m[field]
	if !ok || v == nil {
		return def, nil
	}
	b, ok := v.(bool)
	if !ok {
		return false, invalidSpec(field, "must be a boolean, got %T", v)
	}
	return b, nil
}

func storageClass(m map[string]any) (string, error) {
	s, err := optionalString(m, fieldStorageClass, DefaultStorageClass)
	if err != nil {
		return "", err
	}
	s = strings.ToUpper(s)
	if !slices.Contains(storageClasses, s) {
		return "", invalidSpec(fieldStorageClass, "%q is not a storage class (one of %s)", s, strings.Join(storageClasses, ", "))
	}
	return s, nil
}

// labelsField reads spec.labels, a JSON object of strings.
func labelsField(m map[string]any) (map[string]string, error) {
	v, ok := m[fieldLabels]
	if !ok || v == nil {
		return map[string]string{}, nil
	}
	out := map[string]string{}
	switch l := v.(type) {
	case map[string]string:
		maps.Copy(out, l)
	case map[string]any:
		for k, raw := range l {
			s, ok := raw.(string)
			if !ok {
				return nil, invalidSpec(fieldLabels+"."+k, "must be a string, got %T", raw)
			}
			out[k] = s
		}
	default:
		return nil, invalidSpec(fieldLabels, "must be an object of strings, got %T", v)
	}
	if err := validateLabels(out); err != nil {
		return nil, err
	}
	return out, nil
}

// deleteOptions are the parts of a spec Delete needs. A missing or empty
// spec (the template no longer compiles) means no forceDestroy.
func deleteOptions(m map[string]any) (forceDestroy bool, err error) {
	return optionalBool(m, fieldForceDestroy, false)
}
