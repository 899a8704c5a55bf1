package gcs

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"cloud.google.com/go/storage"

	"github.com/cuengine/engine/providers"
)

// Apply creates the bucket if it is absent, adopts it if a lost create
// response left it behind, and otherwise corrects its mutable fields. It
// never modifies a bucket without this owner's label (NameConflict) and never
// creates a second bucket when an immutable field changed (ImmutableField).
func (p *Provider) Apply(ctx context.Context, req providers.Request) (providers.Observation, error) {
	spec, err := checkApply(req)
	if err != nil {
		return providers.Observation{}, err
	}
	attrs, err := p.attrs(ctx, req.ExternalName)
	if err != nil && httpCode(err) != http.StatusForbidden {
		return providers.Observation{}, err
	}
	if attrs == nil {
		// Absent, or not readable (403): a create is safe either way, as it
		// never touches an existing bucket; its 409 or 403 tells which.
		var created bool
		attrs, created, err = p.createOrAdopt(ctx, req, spec)
		if err != nil {
			return providers.Observation{}, err
		}
		if created {
			return observation(attrs, spec.ProjectID), nil
		}
	}
	return p.reconcile(ctx, req, spec, attrs)
}

// checkApply validates everything Apply can check without a call.
func checkApply(req providers.Request) (bucketSpec, error) {
	spec, err := parseSpec(req.Spec)
	if err != nil {
		return bucketSpec{}, err
	}
	if err := validateOwnerUID(req.Owner.UID); err != nil {
		return bucketSpec{}, err
	}
	if err := validateRecordedName(req.ExternalName); err != nil {
		return bucketSpec{}, err
	}
	if err := checkImmutableInputs(req, spec); err != nil {
		return bucketSpec{}, err
	}
	return spec, nil
}

// checkImmutableInputs compares the spec with what was recorded with the
// external name: the logical name and the project.
func checkImmutableInputs(req providers.Request, spec bucketSpec) error {
	if recorded := logicalNameOf(req.ExternalName); recorded != spec.BucketName {
		return immutableField(fieldBucketName, recorded, spec.BucketName)
	}
	if recorded := req.Settings[settingProjectID]; recorded != "" && recorded != spec.ProjectID {
		return immutableField(fieldProjectID, recorded, spec.ProjectID)
	}
	return nil
}

// immutableField is the terminal error for a change the bucket cannot take.
func immutableField(field, current, wanted string) error {
	return providers.Terminal(providers.ReasonImmutableField,
		"spec.%s changed from %q to %q, but a bucket's %s cannot change: set it back to %q, "+
			"or remove the resource and declare a new one (with deletionPolicy: \"Orphan\" to keep the old bucket)",
		field, current, wanted, field, current)
}

// createOrAdopt creates the bucket. On 409 it reads the bucket back: ours
// (a create whose response was lost) is returned for adoption, anything else
// is a terminal NameConflict. created is true when this call made it.
func (p *Provider) createOrAdopt(ctx context.Context, req providers.Request, spec bucketSpec) (attrs *storage.BucketAttrs, created bool, err error) {
	attrs, err = p.create(ctx, req.ExternalName, spec, req.Owner.UID)
	if err == nil {
		return attrs, true, nil
	}
	if httpCode(err) != http.StatusConflict {
		return nil, false, classify(fmt.Sprintf("creating bucket %q", req.ExternalName), err)
	}
	attrs, err = p.readAfterConflict(ctx, req.ExternalName)
	if err != nil {
		return nil, false, err
	}
	if !ownedBy(attrs, req.Owner.UID) {
		return nil, false, notOwnedError(req.ExternalName, attrs, req.Owner.UID)
	}
	return attrs, false, nil
}

// create issues the bucket insert.
func (p *Provider) create(ctx context.Context, name string, spec bucketSpec, uid string) (*storage.BucketAttrs, error) {
	want := &storage.BucketAttrs{
		Location:                 spec.Location,
		StorageClass:             spec.StorageClass,
		Labels:                   desiredLabels(spec.Labels, uid),
		VersioningEnabled:        spec.Versioning,
		UniformBucketLevelAccess: storage.UniformBucketLevelAccess{Enabled: spec.UniformBucketLevelAccess},
	}
	err := p.withTimeout(ctx, func(ctx context.Context) error {
		return p.client.Bucket(name).Create(ctx, spec.ProjectID, want)
	})
	if err != nil {
		return nil, err
	}
	// Create does not return the attributes: read them back, with a
	// deadline of their own, so the observation shows what GCS stored.
	var attrs *storage.BucketAttrs
	err = p.withTimeout(ctx, func(ctx context.Context) error {
		var err error
		attrs, err = p.client.Bucket(name).Attrs(ctx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading back created bucket: %w", err)
	}
	return attrs, nil
}

// readAfterConflict reads a bucket that a create reported as existing. A
// bucket we may not read belongs to someone else.
func (p *Provider) readAfterConflict(ctx context.Context, name string) (*storage.BucketAttrs, error) {
	var attrs *storage.BucketAttrs
	err := p.withTimeout(ctx, func(ctx context.Context) error {
		var err error
		attrs, err = p.client.Bucket(name).Attrs(ctx)
		return err
	})
	switch {
	case err == nil:
		return attrs, nil
	case httpCode(err) == http.StatusForbidden:
		return nil, providers.Terminal(providers.ReasonNameConflict,
			"bucket %q already exists in a project these credentials cannot read; it is not ours and a new name is needed", name)
	case isBucketNotFound(err):
		return nil, providers.Retryable(providers.ReasonProviderError,
			fmt.Errorf("bucket %q was reported as existing but is gone now; retrying the create", name))
	default:
		return nil, classify(fmt.Sprintf("reading bucket %q after a conflicting create", name), err)
	}
}

// reconcile checks ownership and immutable fields of an existing bucket and
// corrects its mutable fields with at most one update.
func (p *Provider) reconcile(ctx context.Context, req providers.Request, spec bucketSpec, attrs *storage.BucketAttrs) (providers.Observation, error) {
	if !ownedBy(attrs, req.Owner.UID) {
		return providers.Observation{}, notOwnedError(req.ExternalName, attrs, req.Owner.UID)
	}
	if attrs.Location != "" && !strings.EqualFold(attrs.Location, spec.Location) {
		return providers.Observation{}, immutableField(fieldLocation, attrs.Location, spec.Location)
	}
	update, changes := bucketUpdate(spec, attrs, req.Owner.UID)
	if len(changes) == 0 {
		return observation(attrs, spec.ProjectID), nil
	}
	updated, err := p.update(ctx, req.ExternalName, attrs.MetaGeneration, update)
	if err != nil {
		return providers.Observation{}, err
	}
	return observation(updated, spec.ProjectID), nil
}

// update writes the corrections, guarded by the metageneration that was
// read, so a concurrent change is never overwritten blindly.
func (p *Provider) update(ctx context.Context, name string, metageneration int64, ua storage.BucketAttrsToUpdate) (*storage.BucketAttrs, error) {
	var attrs *storage.BucketAttrs
	err := p.withTimeout(ctx, func(ctx context.Context) error {
		bkt := p.client.Bucket(name)
		if metageneration > 0 {
			bkt = bkt.If(storage.BucketConditions{MetagenerationMatch: metageneration})
		}
		var err error
		attrs, err = bkt.Update(ctx, ua)
		return err
	})
	switch {
	case err == nil:
		return attrs, nil
	case httpCode(err) == http.StatusPreconditionFailed:
		return nil, providers.Retryable(providers.ReasonProviderError,
			fmt.Errorf("bucket %q changed while being updated (metageneration %d is no longer current); the next attempt re-reads it: %w",
				name, metageneration, err))
	case isBucketNotFound(err):
		return nil, providers.Retryable(providers.ReasonProviderError,
			fmt.Errorf("bucket %q disappeared while being updated: %w", name, err))
	default:
		return nil, classify(fmt.Sprintf("updating bucket %q", name), err)
	}
}
