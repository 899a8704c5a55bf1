package gcs

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cuengine/engine/providers"
)

func TestParseSpecDefaults(t *testing.T) {
	s, err := parseSpec(map[string]any{"projectID": "p", "bucketName": "b"})
	require.NoError(t, err)
	assert.Equal(t, bucketSpec{
		ProjectID:                "p",
		BucketName:               "b",
		Location:                 "US",
		StorageClass:             "STANDARD",
		Labels:                   map[string]string{},
		Versioning:               false,
		UniformBucketLevelAccess: true,
		ForceDestroy:             false,
	}, s)
}

func TestParseSpecNormalizesAndReadsAll(t *testing.T) {
	s, err := parseSpec(map[string]any{
		"projectID": "p", "bucketName": "b", "location": "europe-west1", "storageClass": "nearline",
		"labels": map[string]any{"team": "data"}, "versioning": true,
		"uniformBucketLevelAccess": false, "forceDestroy": true,
	})
	require.NoError(t, err)
	assert.Equal(t, "EUROPE-WEST1", s.Location)
	assert.Equal(t, "NEARLINE", s.StorageClass)
	assert.Equal(t, map[string]string{"team": "data"}, s.Labels)
	assert.True(t, s.Versioning)
	assert.False(t, s.UniformBucketLevelAccess)
	assert.True(t, s.ForceDestroy)
}

func TestParseSpecErrors(t *testing.T) {
	tests := []struct {
		name     string
		override map[string]any
		want     string
	}{
		{"missing project", map[string]any{"projectID": nil}, "spec.projectID is required"},
		{"project not a string", map[string]any{"projectID": true}, "spec.projectID must be a string, got bool"},
		{"project with slash", map[string]any{"projectID": "a/b"}, "spec.projectID"},
		{"missing bucket name", map[string]any{"bucketName": nil}, "spec.bucketName is required"},
		{"location not a string", map[string]any{"location": 3.0}, "spec.location must be a string, got float64"},
		{"empty location", map[string]any{"location": ""}, `spec.location must not be empty (omit it for the default "US")`},
		{"unknown storage class", map[string]any{"storageClass": "hot"}, `spec.storageClass "HOT" is not a storage class`},
		{"versioning not a bool", map[string]any{"versioning": "yes"}, "spec.versioning must be a boolean, got string"},
		{"ubla not a bool", map[string]any{"uniformBucketLevelAccess": 1.0}, "spec.uniformBucketLevelAccess must be a boolean"},
		{"forceDestroy not a bool", map[string]any{"forceDestroy": "true"}, "spec.forceDestroy must be a boolean"},
		{"labels not an object", map[string]any{"labels": []any{"a"}}, "spec.labels must be an object of strings"},
		{"label value not a string", map[string]any{"labels": map[string]any{"n": 1.0}}, "spec.labels.n must be a string"},
		{"label key uppercase", map[string]any{"labels": map[string]any{"Team": "x"}}, "spec.labels.Team key must start"},
		{"label value uppercase", map[string]any{"labels": map[string]any{"team": "X"}}, `spec.labels.team value "X"`},
		{"owner label reserved", map[string]any{"labels": map[string]any{OwnerLabel: "x"}}, "is reserved"},
		{"goog label reserved", map[string]any{"labels": map[string]any{"goog-x": "y"}}, "is reserved"},
		{"unknown field", map[string]any{"forceDestory": true}, "spec.forceDestory is not a known field"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseSpec(spec(tc.override))
			pe := requireReason(t, err, providers.ReasonInvalidSpec, false)
			assert.Contains(t, pe.Error(), tc.want)
		})
	}
}

func TestDeleteOptionsFromEmptySpec(t *testing.T) {
	force, err := deleteOptions(nil)
	require.NoError(t, err)
	assert.False(t, force)
	force, err = deleteOptions(map[string]any{"forceDestroy": true})
	require.NoError(t, err)
	assert.True(t, force)
}

func TestParseSpecAcceptsTypedLabels(t *testing.T) {
	s, err := parseSpec(spec(map[string]any{"labels": map[string]string{"team": "data"}}))
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"team": "data"}, s.Labels)
}
