package gcs

import (
	"fmt"
	"maps"
	"strings"

	"cloud.google.com/go/storage"

	"github.com/cuengine/engine/providers"
)

// OwnerLabel is the label every bucket created by the provider carries; its
// value is the owner's UID. It is the only proof of ownership the provider
// accepts before adopting, updating or deleting a bucket.
const OwnerLabel = "engine-owner-uid"

const (
	// maxLabels is the GCS limit on labels per bucket.
	maxLabels = 64
	// systemLabelPrefix marks labels set by Google services; the provider
	// neither sets nor removes them.
	systemLabelPrefix = "goog-"
)

// validateOwnerUID checks that the owner's UID can be stored as a label
// value. Kubernetes UIDs (lowercase hex and dashes) always can.
func validateOwnerUID(uid string) error {
	if uid == "" {
		return providers.Terminal(providers.ReasonProviderError, "owner UID is empty: the engine must pass the parent's metadata.uid")
	}
	if !ValidLabelValue(uid) {
		return providers.Terminal(providers.ReasonProviderError,
			"owner UID %q cannot be a label value (lowercase letters, digits, '-' and '_', at most 63 characters)", uid)
	}
	return nil
}

// validateLabels checks the user's labels against the GCS label rules and
// the reserved ownership key.
func validateLabels(labels map[string]string) error {
	if len(labels)+1 > maxLabels {
		return invalidSpec("labels", "has %d entries; at most %d are allowed (one is reserved for %s)", len(labels), maxLabels-1, OwnerLabel)
	}
	for k, v := range labels {
		field := "labels." + k
		switch {
		case k == OwnerLabel:
			return invalidSpec(field, "is reserved: the provider sets it to the owner's UID to prove ownership")
		case strings.HasPrefix(k, systemLabelPrefix):
			return invalidSpec(field, "is reserved: keys starting with %q belong to Google services", systemLabelPrefix)
		case !ValidLabelKey(k):
			return invalidSpec(field, "key must start with a lowercase letter and contain only lowercase letters, digits, '-' and '_', at most 63 characters")
		case !ValidLabelValue(v):
			return invalidSpec(field, "value %q must contain only lowercase letters, digits, '-' and '_', at most 63 characters", v)
		}
	}
	return nil
}

// desiredLabels is the user's labels plus the ownership label.
func desiredLabels(user map[string]string, uid string) map[string]string {
	out := make(map[string]string, len(user)+1)
	maps.Copy(out, user)
	out[OwnerLabel] = uid
	return out
}

// ownedBy reports whether the bucket carries the ownership label for uid.
func ownedBy(attrs *storage.BucketAttrs, uid string) bool {
	return attrs != nil && uid != "" && attrs.Labels[OwnerLabel] == uid
}

// notOwnedError is the terminal NameConflict for an existing bucket that does
// not carry this owner's label. It describes what was found without ever
// modifying the bucket.
func notOwnedError(name string, attrs *storage.BucketAttrs, uid string) error {
	found := "no " + OwnerLabel + " label"
	if attrs != nil {
		if v, ok := attrs.Labels[OwnerLabel]; ok {
			found = fmt.Sprintf("%s=%s", OwnerLabel, v)
		}
	}
	return providers.Terminal(providers.ReasonNameConflict,
		"bucket %q exists but is not owned by this object (%s, want %s=%s); it is left untouched and a new name is needed",
		name, found, OwnerLabel, uid)
}
