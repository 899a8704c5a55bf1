package gcs

import (
	"strings"

	"cloud.google.com/go/storage"
)

// bucketUpdate returns the update that brings the bucket's mutable fields
// (labels, versioning, storage class, uniform bucket-level access) to the
// spec, and whether anything differs. Labels set by Google services
// ("goog-" keys) are left alone.
func bucketUpdate(spec bucketSpec, attrs *storage.BucketAttrs, uid string) (storage.BucketAttrsToUpdate, bool) {
	var ua storage.BucketAttrsToUpdate
	changed := diffLabels(&ua, desiredLabels(spec.Labels, uid), attrs.Labels)
	if attrs.VersioningEnabled != spec.Versioning {
		ua.VersioningEnabled = spec.Versioning
		changed = true
	}
	if !strings.EqualFold(attrs.StorageClass, spec.StorageClass) {
		ua.StorageClass = spec.StorageClass
		changed = true
	}
	if attrs.UniformBucketLevelAccess.Enabled != spec.UniformBucketLevelAccess {
		ua.UniformBucketLevelAccess = &storage.UniformBucketLevelAccess{Enabled: spec.UniformBucketLevelAccess}
		changed = true
	}
	return ua, changed
}

// diffLabels records in ua the labels to set and to delete so that have
// becomes want, and reports whether there are any.
func diffLabels(ua *storage.BucketAttrsToUpdate, want, have map[string]string) bool {
	changed := false
	for k, v := range want {
		if cur, ok := have[k]; !ok || cur != v {
			ua.SetLabel(k, v)
			changed = true
		}
	}
	for k := range have {
		if _, ok := want[k]; !ok && !strings.HasPrefix(k, systemLabelPrefix) {
			ua.DeleteLabel(k)
			changed = true
		}
	}
	return changed
}
