package gcs

import (
	"strconv"
	"time"

	"cloud.google.com/go/storage"

	"github.com/cuengine/engine/providers"
)

// observation is what the template sees as observed.<name> for an existing
// bucket. Values are plain JSON types.
func observation(attrs *storage.BucketAttrs, projectID string) providers.Observation {
	labels := make(map[string]any, len(attrs.Labels))
	for k, v := range attrs.Labels {
		labels[k] = v
	}
	state := map[string]any{
		"name":                     attrs.Name,
		"url":                      "gs://" + attrs.Name,
		"location":                 attrs.Location,
		"storageClass":             attrs.StorageClass,
		"labels":                   labels,
		"versioning":               attrs.VersioningEnabled,
		"uniformBucketLevelAccess": attrs.UniformBucketLevelAccess.Enabled,
	}
	if projectID != "" {
		state["projectID"] = projectID
	}
	if attrs.ProjectNumber != 0 {
		state["projectNumber"] = strconv.FormatUint(attrs.ProjectNumber, 10)
	}
	if !attrs.Created.IsZero() {
		state["created"] = attrs.Created.UTC().Format(time.RFC3339)
	}
	return providers.Observation{Exists: true, Ready: true, State: state}
}

// absent is the observation of a bucket that does not exist (yet): its name
// and URL are already known.
func absent(name string) providers.Observation {
	return providers.Observation{State: map[string]any{
		"name": name,
		"url":  "gs://" + name,
	}}
}
