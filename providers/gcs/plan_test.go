package gcs

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cuengine/engine/providers"
)

// onlyReads asserts that the proxy saw nothing but reads since entry from.
func onlyReads(t *testing.T, proxy *faultProxy, from int) {
	t.Helper()
	for _, l := range proxy.log()[from:] {
		assert.Regexp(t, `^GET `, l, "a plan only reads")
	}
}

// TestPlanAgainstTheEmulator: a plan tells what Apply would do at each
// step of a bucket's life, reading and never writing: create before the
// bucket exists, none once it matches, the changed fields after an edit,
// a refusal for an immutable field or a foreign bucket, and an error when
// the service does not answer.
func TestPlanAgainstTheEmulator(t *testing.T) {
	srv, proxy, p := emulatorSetup(t, 5*time.Second)
	ctx := context.Background()

	fresh := providers.Request{Name: "bucket", Owner: providers.Owner{UID: testUID, Namespace: "ns", Name: "app", Kind: "App"},
		Spec: emulatorSpec(map[string]any{"labels": map[string]any{"team": "a"}})}
	plan, err := p.Plan(ctx, fresh)
	require.NoError(t, err)
	assert.Equal(t, providers.Plan{Action: providers.ActionCreate, Changes: []providers.Change{
		{Field: "labels.engine-owner-uid", To: `"` + testUID + `"`},
		{Field: "labels.team", To: `"a"`},
		{Field: "location", To: `"EU"`},
		{Field: "projectID", To: `"proj-a"`},
		{Field: "storageClass", To: `"STANDARD"`},
		{Field: "uniformBucketLevelAccess", To: "false"},
		{Field: "versioning", To: "false"},
	}}, plan)
	assert.Empty(t, proxy.log(), "no name recorded: nothing to read")

	req := namedRequest(t, p, testUID, fresh.Spec, 0)
	plan, err = p.Plan(ctx, req)
	require.NoError(t, err)
	assert.Equal(t, providers.ActionCreate, plan.Action, "a recorded name whose bucket is absent")
	assert.Empty(t, emulatorBuckets(t, srv), "the plan created nothing")
	onlyReads(t, proxy, 0)

	_, err = p.Apply(ctx, req)
	require.NoError(t, err)
	from := len(proxy.log())
	plan, err = p.Plan(ctx, req)
	require.NoError(t, err)
	assert.Equal(t, providers.Plan{Action: providers.ActionNone}, plan)

	req.Spec = emulatorSpec(map[string]any{"labels": map[string]any{"team": "b", "tier": "gold"}, "versioning": true})
	plan, err = p.Plan(ctx, req)
	require.NoError(t, err)
	assert.Equal(t, providers.Plan{Action: providers.ActionUpdate, Changes: []providers.Change{
		{Field: "labels.team", From: `"a"`, To: `"b"`},
		{Field: "labels.tier", To: `"gold"`},
		{Field: "versioning", From: "false", To: "true"},
	}}, plan)
	onlyReads(t, proxy, from)
	_, err = p.Apply(ctx, req)
	require.NoError(t, err)
	plan, err = p.Plan(ctx, req)
	require.NoError(t, err)
	assert.Equal(t, providers.ActionNone, plan.Action, "the plan was what Apply did: %v", plan)

	req.Spec = emulatorSpec(map[string]any{"location": "US"})
	plan, err = p.Plan(ctx, req)
	require.NoError(t, err)
	assert.Equal(t, providers.ActionRefuse, plan.Action)
	assert.Contains(t, plan.Reason, `ImmutableField: spec.location changed from "EU" to "US"`)

	foreign := namedRequest(t, p, "11111111-2222-3333-4444-555555555555", emulatorSpec(nil), 0)
	foreign.ExternalName = req.ExternalName
	foreign.Settings = req.Settings
	plan, err = p.Plan(ctx, foreign)
	require.NoError(t, err)
	assert.Equal(t, providers.ActionRefuse, plan.Action)
	assert.Contains(t, plan.Reason, "NameConflict: bucket "+`"`+req.ExternalName+`"`+" exists but is not owned by this object")

	from = len(proxy.log())
	proxy.inject(&fault{method: http.MethodGet, path: anyBucket, status: http.StatusServiceUnavailable})
	plan, err = p.Plan(ctx, namedRequest(t, p, testUID, emulatorSpec(nil), 0))
	_, retryable := providers.Classify(err)
	require.Error(t, err, "plan %v", plan)
	assert.True(t, retryable, "a service that does not answer stops the plan: %v", err)
	onlyReads(t, proxy, from)
	assert.Len(t, emulatorBuckets(t, srv), 1)
}
