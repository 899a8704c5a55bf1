package gcs

import (
	"context"
	"fmt"
	"net/http"

	"cloud.google.com/go/storage"
	"google.golang.org/api/iterator"

	"github.com/cuengine/engine/providers"
)

// ReasonBucketNotEmpty: the bucket holds objects and spec.forceDestroy is
// false, so deleting it would lose data. Terminal until the objects are
// removed or forceDestroy is set.
const ReasonBucketNotEmpty = "BucketNotEmpty"

// objectPageSize is how many object generations one listing call returns.
// Tests lower it to exercise paging.
var objectPageSize = 1000

// Delete removes the bucket named by req.ExternalName. It needs no spec: an
// empty spec means forceDestroy is false. An absent bucket is success; a
// bucket without this owner's label is never deleted (NameConflict); a
// non-empty bucket is a terminal BucketNotEmpty unless spec.forceDestroy is
// true, in which case every object generation is deleted first.
func (p *Provider) Delete(ctx context.Context, req providers.Request) error {
	name := req.ExternalName
	if err := validateRecordedName(name); err != nil {
		return err
	}
	force, err := deleteOptions(req.Spec)
	if err != nil {
		return err
	}
	attrs, err := p.attrs(ctx, name)
	if err != nil || attrs == nil {
		return err
	}
	if !ownedBy(attrs, req.Owner.UID) {
		return notOwnedError(name, attrs, req.Owner.UID)
	}
	if err := p.emptyBucket(ctx, name, force); err != nil {
		return err
	}
	return p.deleteBucket(ctx, name, attrs.MetaGeneration, force)
}

// emptyBucket deletes every object generation when force is set, and
// otherwise fails with BucketNotEmpty if there is any.
func (p *Provider) emptyBucket(ctx context.Context, name string, force bool) error {
	if force {
		return p.deleteAllGenerations(ctx, name)
	}
	objs, err := p.listGenerations(ctx, name, 1)
	if err != nil {
		return err
	}
	if len(objs) > 0 {
		return notEmptyError(name)
	}
	return nil
}

// notEmptyError is the terminal error for a bucket that still holds objects.
func notEmptyError(name string) error {
	return providers.Terminal(ReasonBucketNotEmpty,
		"bucket %q is not empty: set spec.forceDestroy: true to delete all its objects (every generation) with it, "+
			"or set deletionPolicy: \"Orphan\" to keep the bucket", name)
}

// deleteAllGenerations deletes every object generation of the bucket, page
// by page, each call with its own deadline. It lists from the start after
// each page, so it does not depend on page tokens surviving deletions.
func (p *Provider) deleteAllGenerations(ctx context.Context, name string) error {
	for {
		objs, err := p.listGenerations(ctx, name, objectPageSize)
		if err != nil {
			return err
		}
		if len(objs) == 0 {
			return nil
		}
		deleted := 0
		for _, o := range objs {
			gone, err := p.deleteGeneration(ctx, name, o.Name, o.Generation)
			if err != nil {
				return err
			}
			if gone {
				deleted++
			}
		}
		if deleted == 0 {
			return providers.Retryable(providers.ReasonProviderError,
				fmt.Errorf("bucket %q still lists %d object generations that are already deleted; retrying later", name, len(objs)))
		}
	}
}

// listGenerations lists the first page of object generations, live and
// noncurrent.
func (p *Provider) listGenerations(ctx context.Context, name string, pageSize int) ([]*storage.ObjectAttrs, error) {
	var objs []*storage.ObjectAttrs
	err := p.withTimeout(ctx, func(ctx context.Context) error {
		q := &storage.Query{Versions: true}
		if err := q.SetAttrSelection([]string{"Name", "Generation"}); err != nil {
			return fmt.Errorf("selecting object attributes: %w", err)
		}
		it := p.client.Bucket(name).Objects(ctx, q)
		_, err := iterator.NewPager(it, pageSize, "").NextPage(&objs)
		return err
	})
	if isBucketNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, classify(fmt.Sprintf("listing objects of bucket %q", name), err)
	}
	return objs, nil
}

// deleteGeneration deletes one object generation. An absent one is fine;
// deleted tells whether this call removed it.
func (p *Provider) deleteGeneration(ctx context.Context, bucket, object string, generation int64) (deleted bool, err error) {
	err = p.withTimeout(ctx, func(ctx context.Context) error {
		return p.client.Bucket(bucket).Object(object).Generation(generation).Delete(ctx)
	})
	switch {
	case err == nil:
		return true, nil
	case isObjectNotFound(err):
		return false, nil
	case httpCode(err) == http.StatusForbidden:
		return false, providers.Terminal(providers.ReasonProviderError,
			"deleting object %q generation %d of bucket %q for forceDestroy: %w (a retention policy, an object hold "+
				"or a missing storage.objects.delete permission prevents it)", object, generation, bucket, err)
	default:
		return false, classify(fmt.Sprintf("deleting object %q generation %d of bucket %q", object, generation, bucket), err)
	}
}

// deleteBucket deletes the (now empty) bucket, guarded by the metageneration
// whose ownership label was checked.
func (p *Provider) deleteBucket(ctx context.Context, name string, metageneration int64, force bool) error {
	err := p.withTimeout(ctx, func(ctx context.Context) error {
		bkt := p.client.Bucket(name)
		if metageneration > 0 {
			bkt = bkt.If(storage.BucketConditions{MetagenerationMatch: metageneration})
		}
		return bkt.Delete(ctx)
	})
	switch {
	case err == nil, isBucketNotFound(err):
		return nil
	case httpCode(err) == http.StatusConflict && !force:
		return notEmptyError(name)
	case httpCode(err) == http.StatusConflict, httpCode(err) == http.StatusPreconditionFailed:
		return providers.Retryable(providers.ReasonProviderError,
			fmt.Errorf("bucket %q changed while being deleted (new objects or metadata); the next attempt re-reads it: %w", name, err))
	default:
		return classify(fmt.Sprintf("deleting bucket %q", name), err)
	}
}
