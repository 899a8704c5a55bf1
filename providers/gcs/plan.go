package gcs

import (
	"context"
	"sort"
	"strconv"
	"strings"

	"github.com/cuengine/engine/providers"
)

// Plan says what Apply would do to the bucket, reading it and writing
// nothing: the same checks in the same order, stopped before each write.
func (p *Provider) Plan(ctx context.Context, req providers.Request) (providers.Plan, error) {
	if req.ExternalName == "" {
		// No name recorded yet: the first Apply creates the bucket.
		spec, err := parseSpec(req.Spec)
		if err != nil {
			return providers.Refusal(err)
		}
		return createPlan(spec, req.Owner.UID), nil
	}
	spec, err := checkApply(req)
	if err != nil {
		return providers.Refusal(err)
	}
	attrs, err := p.attrs(ctx, req.ExternalName)
	if err != nil {
		return providers.Plan{}, err
	}
	if attrs == nil {
		return createPlan(spec, req.Owner.UID), nil
	}
	if !ownedBy(attrs, req.Owner.UID) {
		return providers.Refusal(notOwnedError(req.ExternalName, attrs, req.Owner.UID))
	}
	if attrs.Location != "" && !strings.EqualFold(attrs.Location, spec.Location) {
		return providers.Refusal(immutableField(fieldLocation, attrs.Location, spec.Location))
	}
	_, changes := bucketUpdate(spec, attrs, req.Owner.UID)
	if len(changes) == 0 {
		return providers.Plan{Action: providers.ActionNone}, nil
	}
	return providers.Plan{Action: providers.ActionUpdate, Changes: changes}, nil
}

// createPlan lists what a create sets.
func createPlan(spec bucketSpec, uid string) providers.Plan {
	changes := []providers.Change{
		{Field: fieldProjectID, To: strconv.Quote(spec.ProjectID)},
		{Field: fieldLocation, To: strconv.Quote(spec.Location)},
		{Field: fieldStorageClass, To: strconv.Quote(spec.StorageClass)},
		{Field: fieldVersioning, To: strconv.FormatBool(spec.Versioning)},
		{Field: fieldUBLA, To: strconv.FormatBool(spec.UniformBucketLevelAccess)},
	}
	labels := desiredLabels(spec.Labels, uid)
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		changes = append(changes, providers.Change{Field: fieldLabels + "." + k, To: strconv.Quote(labels[k])})
	}
	sort.SliceStable(changes, func(i, j int) bool { return changes[i].Field < changes[j].Field })
	return providers.Plan{Action: providers.ActionCreate, Changes: changes}
}
