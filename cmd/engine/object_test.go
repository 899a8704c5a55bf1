package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/templates"
)

// TestObjectCommands: engine pause, resume and reconcile write their
// annotations with the user's kubeconfig; --wait waits for the engine's
// answer in the status (the test plays the engine, as for `engine
// rollout`; engine/pause_test.go runs the real one), and fails when the
// engine does not answer or the object is stalled.
func TestObjectCommands(t *testing.T) {
	set, err := templates.Load(examples)
	require.NoError(t, err)
	tpl, ok := set.Lookup(myKindGVK)
	require.True(t, ok)
	rc := startRolloutCluster(t, tpl.CRD())
	ctx := context.Background()
	mk := &unstructured.Unstructured{}
	mk.SetGroupVersionKind(myKindGVK)
	mk.SetNamespace("apps")
	mk.SetName("web")
	require.NoError(t, unstructured.SetNestedField(mk.Object, "web", "spec", "deploymentName"))
	require.NoError(t, rc.c.Create(ctx, mk))
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	b, err := os.ReadFile(rc.kubeconfig)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(kubeconfig, b, 0o600))
	annotations := func() map[string]string {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(myKindGVK)
		require.NoError(t, rc.c.Get(ctx, client.ObjectKeyFromObject(mk), got))
		return got.GetAnnotations()
	}

	out, errOut, code := run(t, "pause", "mykind/web", "-n", "apps", "--kubeconfig", kubeconfig)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "MyKind apps/web paused: the engine writes nothing for it until `engine resume`\n", out)
	assert.Equal(t, "true", annotations()[contract.AnnotationPaused])

	out, errOut, code = run(t, "resume", "MyKind.webapp.my.domain/web", "-n", "apps", "--kubeconfig", kubeconfig)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "MyKind apps/web resumed: the engine reconciles it\n", out)
	assert.NotContains(t, annotations(), contract.AnnotationPaused)

	_, errOut, code = run(t, "reconcile", "mykind/web", "-n", "apps", "--kubeconfig", kubeconfig, "--wait", "1s")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "MyKind apps/web: the engine did not act within 1s (is it running?)")
	first := annotations()[contract.AnnotationReconcileRequestedAt]
	require.NotEmpty(t, first)

	// The engine's part: handle every new token, the object Stalled.
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(myKindGVK)
			if rc.c.Get(ctx, client.ObjectKeyFromObject(mk), got) != nil {
				continue
			}
			token := got.GetAnnotations()[contract.AnnotationReconcileRequestedAt]
			if handled, _, _ := unstructured.NestedString(got.Object, "status", contract.StatusLastHandledReconcileAt); token == "" || handled == token {
				continue
			}
			_ = unstructured.SetNestedField(got.Object, token, "status", contract.StatusLastHandledReconcileAt)
			_ = unstructured.SetNestedSlice(got.Object, []any{
				map[string]any{"type": "Stalled", "status": "True", "reason": "ChildConflict", "message": "Deployment apps/web exists and is not controlled by this MyKind", "lastTransitionTime": "2026-12-02T00:00:00Z"},
			}, "status", "conditions")
			_ = rc.c.Status().Update(ctx, got)
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
	out, errOut, code = run(t, "reconcile", "mykind/web", "-n", "apps", "--kubeconfig", kubeconfig, "--wait", "30s")
	assert.Equal(t, 1, code)
	assert.Contains(t, out, "  Stalled=True ChildConflict: Deployment apps/web exists and is not controlled by this MyKind\n")
	assert.Contains(t, errOut, "MyKind apps/web is stalled (ChildConflict): Deployment apps/web exists and is not controlled by this MyKind")
	assert.NotEqual(t, first, annotations()[contract.AnnotationReconcileRequestedAt], "a new token each time")

	_, errOut, code = run(t, "pause", "web", "--kubeconfig", kubeconfig)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, fmt.Sprintf("%q is not KIND/NAME (for example mykind/web), nor KIND with --all", "web"))
	_, errOut, code = run(t, "pause", "mykind/web", "--all", "--kubeconfig", kubeconfig)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `--all takes KIND alone, not "mykind/web"`)
}

// TestObjectCommandsAll: KIND --all acts on every object of the kind in the
// namespace, -A in every namespace, and says so when there is none.
func TestObjectCommandsAll(t *testing.T) {
	set, err := templates.Load(examples)
	require.NoError(t, err)
	tpl, ok := set.Lookup(myKindGVK)
	require.True(t, ok)
	rc := startRolloutCluster(t, tpl.CRD())
	ctx := context.Background()
	require.NoError(t, rc.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}}))
	objects := []client.ObjectKey{{Namespace: "apps", Name: "web"}, {Namespace: "apps", Name: "api"}, {Namespace: "other", Name: "web"}}
	for _, key := range objects {
		mk := &unstructured.Unstructured{}
		mk.SetGroupVersionKind(myKindGVK)
		mk.SetNamespace(key.Namespace)
		mk.SetName(key.Name)
		require.NoError(t, unstructured.SetNestedField(mk.Object, key.Name, "spec", "deploymentName"))
		require.NoError(t, rc.c.Create(ctx, mk))
	}
	paused := func() []string {
		var out []string
		for _, key := range objects {
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(myKindGVK)
			require.NoError(t, rc.c.Get(ctx, key, got))
			if contract.Paused(got) {
				out = append(out, key.String())
			}
		}
		return out
	}

	out, errOut, code := run(t, "pause", "mykind", "--all", "-n", "apps", "--kubeconfig", rc.kubeconfig)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "MyKind apps/api paused: the engine writes nothing for it until `engine resume`\n"+
		"MyKind apps/web paused: the engine writes nothing for it until `engine resume`\n", out)
	assert.Equal(t, []string{"apps/web", "apps/api"}, paused())

	out, errOut, code = run(t, "pause", "mykind", "--all", "-A", "--kubeconfig", rc.kubeconfig)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "MyKind other/web paused")
	assert.Equal(t, []string{"apps/web", "apps/api", "other/web"}, paused())

	_, errOut, code = run(t, "resume", "mykind", "--all", "-A", "--kubeconfig", rc.kubeconfig)
	require.Equal(t, 0, code, errOut)
	assert.Empty(t, paused())

	out, errOut, code = run(t, "pause", "mykind", "--all", "-n", "empty", "--kubeconfig", rc.kubeconfig)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "no MyKind in namespace empty\n", out)

	_, errOut, code = run(t, "pause", "mykind/web", "-A", "--kubeconfig", rc.kubeconfig)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "--all-namespaces goes with --all")
}
