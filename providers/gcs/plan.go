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
			return refusal(err)
		}
		return createPlan(spec, req.Owner.UID), nil
	}
	spec, err := checkApply(req)
	if err != nil {
		return refusal(err)
	}
	attrs, err := p.attrs(ctx, req.ExternalName)
	if err != nil {
		return providers.Plan{}, err
	}
	if attrs == nil {
		return createPlan(spec, req.Owner.UID), nil
	}
	if !ownedBy(attrs, req.Owner.UID) {
		return refusal(notOwnedError(req.ExternalName, attrs, req.Owner.UID))
	}
	if attrs.Location != "" && !strings.EqualFold(attrs.Location, spec.Location) {
		return refusal(immutableField(fieldLocation, attrs.Location, spec.Location))
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

// refusal is the plan of an Apply that would fail with err without
// writing; an error that is not such a refusal stops the plan.
func refusal(err error) (providers.Plan, error) {
	if _, retryable := providers.Classify(err); retryable {
		return providers.Plan{}, err
	}
	return providers.Plan{Action: providers.ActionRefuse, Reason: err.Error()}, nil
}
