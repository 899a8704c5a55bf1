package gcs

import (
	"sort"
	"strconv"
	"strings"

	"cloud.google.com/go/storage"

	"github.com/cuengine/engine/providers"
)

// bucketUpdate returns the update that brings the bucket's mutable fields
// (labels, versioning, storage class, uniform bucket-level access) to the
// spec, and the changes it makes (none: nothing differs). Labels set by
// Google services ("goog-" keys) are left alone.
func bucketUpdate(spec bucketSpec, attrs *storage.BucketAttrs, uid string) (storage.BucketAttrsToUpdate, []providers.Change) {
	var ua storage.BucketAttrsToUpdate
	changes := diffLabels(&ua, desiredLabels(spec.Labels, uid), attrs.Labels)
	if attrs.VersioningEnabled != spec.Versioning {
		ua.VersioningEnabled = spec.Versioning
		changes = append(changes, boolChange(fieldVersioning, attrs.VersioningEnabled, spec.Versioning))
	}
	if !strings.EqualFold(attrs.StorageClass, spec.StorageClass) {
		ua.StorageClass = spec.StorageClass
		changes = append(changes, providers.Change{Field: fieldStorageClass, From: strconv.Quote(attrs.StorageClass), To: strconv.Quote(spec.StorageClass)})
	}
	if attrs.UniformBucketLevelAccess.Enabled != spec.UniformBucketLevelAccess {
		ua.UniformBucketLevelAccess = &storage.UniformBucketLevelAccess{Enabled: spec.UniformBucketLevelAccess}
		changes = append(changes, boolChange(fieldUBLA, attrs.UniformBucketLevelAccess.Enabled, spec.UniformBucketLevelAccess))
	}
	return ua, changes
}

// diffLabels records in ua the labels to set and to delete so that have
// becomes want, and returns them as changes sorted by key.
func diffLabels(ua *storage.BucketAttrsToUpdate, want, have map[string]string) []providers.Change {
	var changes []providers.Change
	for k, v := range want {
		if cur, ok := have[k]; !ok || cur != v {
			ua.SetLabel(k, v)
			c := providers.Change{Field: fieldLabels + "." + k, To: strconv.Quote(v)}
			if ok {
				c.From = strconv.Quote(cur)
			}
			changes = append(changes, c)
		}
	}
	for k, v := range have {
		if _, ok := want[k]; !ok && !strings.HasPrefix(k, systemLabelPrefix) {
			ua.DeleteLabel(k)
			changes = append(changes, providers.Change{Field: fieldLabels + "." + k, From: strconv.Quote(v)})
		}
	}
	sort.Slice(changes, func(i, j int) bool { return changes[i].Field < changes[j].Field })
	return changes
}

func boolChange(field string, from, to bool) providers.Change {
	return providers.Change{Field: field, From: strconv.FormatBool(from), To: strconv.FormatBool(to)}
}
