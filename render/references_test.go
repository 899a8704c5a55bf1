package render

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/templates"
)

// referenceTemplate compiles a Reader template with the given policy and
// references.
func referenceTemplate(t *testing.T, policy, refs string) *templates.Template {
	t.Helper()
	dir := t.TempDir()
	src := "package reader\n\nparent: {apiVersion: \"unit.cuengine.dev/v1\", kind: \"Reader\"}\n" + policy + "\n" + refs + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "reader.cue"), []byte(src), 0o644))
	set, err := templates.Load(dir)
	require.NoError(t, err)
	return set.Templates()[0]
}

func reader(ns string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "unit.cuengine.dev/v1", "kind": "Reader",
		"metadata": map[string]any{"name": "r", "namespace": ns}}}
	return u
}

// TestResolveReferences: a namespaced reference defaults to the parent's
// namespace; another namespace needs policy.crossNamespace to list it, a
// cluster-scoped kind policy.clusterScoped; a refusal names every refused
// reference, with reason ReferenceRefused.
func TestResolveReferences(t *testing.T) {
	tests := []struct {
		name, policy, refs string
		parentNamespace    string
		want               []templates.Reference // namespaces as placed
		wantErr            string
	}{{
		name:            "the parent's namespace by default",
		refs:            `references: s: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "s"}`,
		parentNamespace: "team",
		want:            []templates.Reference{{Name: "s", Namespace: "team", ObjectName: "s"}},
	}, {
		name:            "its own namespace, named",
		refs:            `references: s: {apiVersion: "v1", kind: "ConfigMap", metadata: {name: "s", namespace: "team"}}`,
		parentNamespace: "team",
		want:            []templates.Reference{{Name: "s", Namespace: "team", ObjectName: "s"}},
	}, {
		name:            "another namespace without a policy",
		refs:            `references: s: {apiVersion: "v1", kind: "ConfigMap", metadata: {name: "s", namespace: "shared"}}`,
		parentNamespace: "team",
		wantErr:         `reference s: ConfigMap shared/s is in namespace "shared", not the parent's "team"; set policy: crossNamespace in the template to allow it`,
	}, {
		name:   "another namespace the policy does not list",
		policy: `policy: crossNamespace: ["platform"]`,
		refs: `references: s: {apiVersion: "v1", kind: "ConfigMap", metadata: {name: "s", namespace: "shared"}}
references: p: {apiVersion: "v1", kind: "Service", selector: matchLabels: team: "a"}
references: n: {apiVersion: "v1", kind: "Namespace", metadata: name: "shared"}`,
		parentNamespace: "team",
		wantErr: `reference n: Namespace shared is cluster-scoped; set policy: clusterScoped: true in the template to allow reading it; ` +
			`reference s: ConfigMap shared/s is in namespace "shared", which the template's policy.crossNamespace does not list (platform)`,
	}, {
		name:            "another namespace the policy lists, and a cluster-scoped kind allowed",
		policy:          `policy: {crossNamespace: ["shared"], clusterScoped: true}`,
		refs:            `references: s: {apiVersion: "v1", kind: "ConfigMap", metadata: {name: "s", namespace: "shared"}}, references: n: {apiVersion: "v1", kind: "Namespace", metadata: {name: "shared", namespace: "ignored"}}`,
		parentNamespace: "team",
		want:            []templates.Reference{{Name: "n", ObjectName: "shared"}, {Name: "s", Namespace: "shared", ObjectName: "s"}},
	}, {
		name:    "a cluster-scoped parent names the namespace",
		refs:    `references: s: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "s"}`,
		wantErr: `reference s: ConfigMap s needs metadata.namespace: its parent is cluster-scoped`,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tpl := referenceTemplate(t, tc.policy, tc.refs)
			got, err := ResolveReferences(tpl, reader(tc.parentNamespace), OfflineScoper{}, Limits{})
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Equal(t, tc.wantErr, err.Error())
				var re *Error
				require.ErrorAs(t, err, &re)
				assert.Equal(t, contract.ReasonReferenceRefused, re.Reason)
				return
			}
			require.NoError(t, err)
			for i := range got {
				got[i].GVK = schema.GroupVersionKind{} // not what this test is about
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestObserved: a reference by name is its object, missing without one; a
// selector is a list sorted by namespace and name, of the matching objects
// only, and exists even empty.
func TestObserved(t *testing.T) {
	obj := func(kind, ns, name string, labels map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": kind,
			"metadata": map[string]any{"name": name, "namespace": ns, "labels": labels}}}
	}
	team := map[string]any{"team": "a"}
	live := []*unstructured.Unstructured{
		obj("Service", "b", "x", team), obj("Service", "a", "y", team), obj("Service", "a", "x", team),
		obj("Service", "a", "other", map[string]any{"team": "b"}), obj("ConfigMap", "a", "s", team),
	}
	tpl := referenceTemplate(t, "", `references: {
	s: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "s"}
	gone: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "gone"}
	peers: {apiVersion: "v1", kind: "Service", selector: matchLabels: team: "a"}
	none: {apiVersion: "v1", kind: "Service", selector: matchLabels: team: "c"}
}`)
	refs, err := ResolveReferences(tpl, reader("a"), OfflineScoper{}, Limits{})
	require.NoError(t, err)
	views := map[string]any{}
	for _, ref := range refs {
		if v, ok := Observed(ref, live); ok {
			views[ref.Name] = v
		}
	}
	assert.NotContains(t, views, "gone")
	assert.Equal(t, live[4].Object, views["s"])
	assert.Equal(t, map[string]any{"items": []any{live[2].Object, live[1].Object}}, views["peers"], "namespace a only, sorted by name")
	assert.Equal(t, map[string]any{"items": []any{}}, views["none"])
}
