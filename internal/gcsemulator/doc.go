// Package gcsemulator runs a Google Cloud Storage emulator in-process, for
// `engine dev` and for end-to-end tests.
//
// The emulator is fake-gcs-server (github.com/fsouza/fake-gcs-server,
// v1.56.1) served through a front on one loopback port. Point the Go storage
// client at it with STORAGE_EMULATOR_HOST=Emulator.Host(): the client then
// needs no credentials and no client options.
//
// fake-gcs-server keeps only a bucket's name, versioning and event-based hold
// flag: it drops labels and reports the same location, STANDARD storage
// class, no uniform bucket-level access and metageneration 1 for every
// bucket. Package providers/gcs proves that it owns a bucket by the label
// engine-owner-uid, and compares location, storage class and uniform
// bucket-level access with the spec, so against the bare emulator it could
// never adopt, update or delete its own buckets, and every Apply would try to
// correct fields that never change. The front therefore keeps, per bucket,
// what fake-gcs-server drops and answers bucket resources as GCS does:
//
//   - labels, location (upper-cased, "US" when absent, as GCS does), storage
//     class ("STANDARD" when absent) and iamConfiguration
//     .uniformBucketLevelAccess are recorded on insert and patch (labels are
//     merged, a null value deletes a label) and added to every bucket
//     resource it returns (get, insert, patch, list);
//   - the metageneration starts at 1 and grows with every successful patch;
//     ifMetagenerationMatch and ifMetagenerationNotMatch are honoured on
//     bucket get, patch and delete;
//   - a patch leaves the versioning and event-based-hold flags alone unless
//     it names them (fake-gcs-server resets both on every patch);
//   - labels and storage classes GCS would refuse are refused with 400;
//   - deleting a bucket that still holds objects answers 409, as GCS does
//     (fake-gcs-server answers 412);
//   - path-style XML object reads (GET or HEAD /BUCKET/OBJECT, which the Go
//     client uses for Reader) are served whatever host name the client used.
//
// Every other request (objects, uploads, downloads) goes to fake-gcs-server
// unchanged, except its /_internal/ endpoints, which would bypass the front:
// only URL()+"/_internal/healthcheck" is served.
//
// A client can also be pointed at the emulator with client options instead
// of the environment: option.WithEndpoint(URL()+"/storage/v1/") and
// option.WithoutAuthentication().
//
// Storage. With Options.Dir empty everything lives in memory and is gone
// after Stop. With Options.Dir set, fake-gcs-server's filesystem backend keeps
// buckets and objects under that directory and the front keeps its bucket
// records in the file .gcsemulator-buckets.json there, so buckets, objects
// and their labels survive a restart of the emulator. The filesystem backend
// cannot version objects: a bucket insert or patch enabling versioning is
// refused with 400.
//
// What the emulator does not do: it accepts any location string and never
// places data anywhere; it ignores the project (every project sees every
// bucket and the project number is 0); it checks no credentials and no IAM;
// bucket operations sent through the batch endpoint bypass the front.
package gcsemulator
