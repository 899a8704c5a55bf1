// Package gcs is the engine's provider for Google Cloud Storage buckets,
// registered under the name "gcs".
//
// A template declares a bucket as
//
//	resources: data: {
//		provider: "gcs"
//		spec: {
//			projectID:  "my-project"
//			bucketName: "data" // logical name
//			location:   "EU"
//		}
//	}
//
// The physical bucket is named bucketName + "-" + an eight-character suffix
// derived from the owner's UID and the naming attempt (see
// Provider.ExternalName), so one template applied in many namespaces or
// projects gets globally unique bucket names.
//
// Ownership. Every bucket the provider creates carries the label
// engine-owner-uid=<owner UID>. The provider never updates, adopts or deletes
// a bucket without that label for the requesting owner: a bucket name that
// is taken by anyone else is reported as a terminal NameConflict so the
// engine moves to the next name, and the foreign bucket is left untouched.
// A create whose response was lost (the client retries and gets 409) finds
// its own label and adopts the bucket instead of leaking it.
//
// Fields. location and projectID are immutable: changing them is a terminal
// ImmutableField error, never a second bucket. bucketName is immutable too,
// as it is part of the recorded physical name. labels, versioning,
// storageClass and uniformBucketLevelAccess are corrected in place with a
// single metageneration-guarded update; an Apply that finds nothing to
// correct makes no write.
//
// Deletion needs only the recorded external name: a bucket that is already
// gone is success, a non-empty bucket is a terminal BucketNotEmpty unless the
// spec opted in to forceDestroy, in which case every object generation is
// deleted before the bucket.
//
// Credentials come from Application Default Credentials; setting
// STORAGE_EMULATOR_HOST points the client at an emulator without
// credentials (the Go storage client honours the variable itself). Every API
// call gets its own deadline (Options.CallTimeout) and errors are classified
// into the reasons of package providers.
package gcs
