package templates

import (
	"crypto/sha256"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestMemoForgetsTheOldestBeyondItsBudget(t *testing.T) {
	var m memo
	key := func(i int) [sha256.Size]byte { return sha256.Sum256([]byte{byte(i >> 8), byte(i)}) }
	size := memoBudget/4 - memoEntryCost // four fit
	for i := range 5 {
		m.put(key(i), &rendered{size: size})
	}
	assert.Nil(t, m.get(key(0)), "the oldest is forgotten for the fifth")
	for i := 1; i < 5; i++ {
		assert.NotNil(t, m.get(key(i)), "result %d", i)
	}
	assert.Equal(t, memoBudget, m.bytes)

	// Small results are bounded too: each costs memoEntryCost.
	var small memo
	n := memoBudget / memoEntryCost
	for i := range n + 10 {
		small.put(key(i), &rendered{})
	}
	assert.Len(t, small.m, n)
	assert.Nil(t, small.get(key(9)))
	assert.NotNil(t, small.get(key(10)))

	// A result larger than the whole budget is not remembered, and costs
	// the others nothing.
	m.put(key(99), &rendered{size: memoBudget})
	assert.Nil(t, m.get(key(99)))
	assert.NotNil(t, m.get(key(1)))
}

// TestMemoAnswersWhatTheEvaluationReturned: a Result decoded from the
// memory equals the one the evaluation returned, in every part: children
// with their dependencies, resources with a defaulted deletion policy,
// status, ready, whole and fractional numbers, pruned fields.
func TestMemoAnswersWhatTheEvaluationReturned(t *testing.T) {
	dir := t.TempDir()
	writeTemplate(t, dir, "t.cue", `package t

parent: {apiVersion: "example.com/v1", kind: "Shop", spec: size: *1 | int}
resources: {
	bucket: {provider: "gcs", spec: {bucketName: parent.metadata.name, size: parent.spec.size}}
	kept: {provider: "gcs", deletionPolicy: "Orphan", spec: ratio: 1.0, connectionSecret: name: "kept"}
}
children: {
	cm: {apiVersion: "v1", kind: "ConfigMap", metadata: name: parent.metadata.name, data: b: "x"}
	app: {
		apiVersion: "apps/v1", kind: "Deployment", metadata: name: parent.metadata.name
		spec: replicas: parent.spec.size
		dependsOn: ["cm", "bucket"]
	}
}
status: {size: parent.spec.size, half: 0.5, whole: 2.0, seen: *observed.cm.metadata.name | ""}
ready: observed.app != _|_
`)
	tm := loadOne(t, dir)
	shop := func(rv string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "example.com/v1", "kind": "Shop",
			"metadata": map[string]any{"name": "s", "namespace": "default", "resourceVersion": rv},
			"spec":     map[string]any{"size": int64(3), "unknown": "dropped"},
		}}
	}
	first, answered := evaluateRemembered(t, tm, Input{Parent: shop("1")})
	require.False(t, answered)
	require.Len(t, first.Children, 2)
	require.Len(t, first.Resources, 2)
	assert.Equal(t, []string{"spec.unknown"}, first.Pruned)
	assert.Equal(t, DeletionPolicyDelete, first.Resources[0].DeletionPolicy)
	assert.Equal(t, "kept", first.Resources[1].ConnectionSecret)
	assert.Equal(t, []string{"bucket", "cm"}, first.Children[0].DependsOn)
	again, answered := evaluateRemembered(t, tm, Input{Parent: shop("2")})
	require.True(t, answered)
	assert.Equal(t, first, again)
}
