package render

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/templates"
)

func TestIsDeclaredConnectionSecret(t *testing.T) {
	secret := func(kind, name string, annotations map[string]string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": kind}}
		u.SetName(name)
		u.SetAnnotations(annotations)
		return u
	}
	of := func(res string) map[string]string {
		return map[string]string{contract.AnnotationConnectionSecretOf: res}
	}
	resources := []templates.Resource{{Name: "db", Provider: "postgresql", ConnectionSecret: "app-db"}}
	cases := []struct {
		name string
		obj  *unstructured.Unstructured
		want bool
	}{
		{"its resource declares it", secret("Secret", "app-db", of("db")), true},
		{"renamed", secret("Secret", "old-db", of("db")), false},
		{"its resource is gone", secret("Secret", "app-db", of("cache")), false},
		{"a Secret of the template's", secret("Secret", "app-db", nil), false},
		{"not a Secret", secret("ConfigMap", "app-db", of("db")), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, IsDeclaredConnectionSecret(resources, c.obj))
		})
	}
}

func TestObservedLeavesConnectionSecretsOut(t *testing.T) {
	s := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret", "data": map[string]any{"password": "eA=="}}}
	s.SetLabels(map[string]string{contract.LabelChild: "db.connection"})
	s.SetAnnotations(map[string]string{contract.AnnotationConnectionSecretOf: "db"})
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}
	cm.SetLabels(map[string]string{contract.LabelChild: "cm"})
	observed := NewLiveChildren([]*unstructured.Unstructured{s, cm}).Observed(&unstructured.Unstructured{Object: map[string]any{}})
	assert.Contains(t, observed, "cm")
	assert.NotContains(t, observed, "db.connection")
}
