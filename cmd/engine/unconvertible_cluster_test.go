package main

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/contract"
)

// TestUnconvertibleObjectStallsOnlyItself (issue 53, item 1): Apps stored
// in v1 that the hub v2 no longer admits (a template change bounds v2's
// replicas to 5 while the engine is down, so six and seven stop
// converting) fail every list of the kind in v2 at the apiserver. The
// engine reads the kind in v1 and converts itself: the two are Stalled on
// their own (ConversionFailed, the conversion's line), their Deployments
// left as they are, while another App's change is applied and a new App is
// served; a write that would not convert is refused at admission; the fix
// of one, written in v1, is admitted and served; the other is deleted,
// with its Deployment, through v1.
func TestUnconvertibleObjectStallsOnlyItself(t *testing.T) {
	wc, appCUE := newConversionCluster(t)
	c := wc.c
	ctx := context.Background()
	stop := wc.startEngine(t)
	wc.firstApply(t, "web", v1App("web", 3))
	for _, app := range []struct {
		name     string
		replicas int
	}{{"six", 6}, {"seven", 7}} {
		out, err := wc.applyManifest(t, app.name, v1App(app.name, app.replicas))
		require.NoError(t, err, out)
	}
	replicas := func(name string) func(ctx context.Context) (int32, error) {
		return func(ctx context.Context) (int32, error) {
			d := &appsv1.Deployment{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: "apps", Name: name}, d); err != nil {
				return 0, err
			}
			return *d.Spec.Replicas, nil
		}
	}
	for name, want := range map[string]int32{"web": 3, "six": 6, "seven": 7} {
		eventuallyCluster(t, name+"'s Deployment", func(ctx context.Context) (bool, error) {
			n, err := replicas(name)(ctx)
			return n == want, err
		})
	}
	stop()

	edit(t, appCUE, "replicas: *1 | int & >=0 & <=10", "replicas: *1 | int & >=0 & <=5")
	wc.startEngine(t)

	condition := func(name, typ string) map[string]any {
		st, _ := wc.getApp(t, "v1", name)["status"].(map[string]any)
		conds, _ := st["conditions"].([]any)
		for _, c := range conds {
			if m, _ := c.(map[string]any); m["type"] == typ {
				return m
			}
		}
		return nil
	}
	for _, app := range []struct {
		name     string
		replicas string
	}{{"six", "6"}, {"seven", "7"}} {
		eventuallyCluster(t, app.name+" Stalled on its own", func(context.Context) (bool, error) {
			s := condition(app.name, "Stalled")
			return s != nil && s["status"] == "True" && s["reason"] == "ConversionFailed", nil
		})
		msg, _ := condition(app.name, "Stalled")["message"].(string)
		assert.Contains(t, msg, "stored as apps.example.com/v1, this App does not convert to apps.example.com/v2")
		assert.Contains(t, msg, "converting v1 to v2: app.cue:18:30: spec.container.replicas: invalid value "+app.replicas+" (out of bound <=5)")
	}
	n, err := replicas("seven")(ctx)
	require.NoError(t, err)
	assert.Equal(t, int32(7), n, "seven's Deployment left as it was")

	out, err := wc.applyManifest(t, "web", v1App("web", 4))
	require.NoError(t, err, out)
	eventuallyCluster(t, "another App's change applied", func(ctx context.Context) (bool, error) {
		n, err := replicas("web")(ctx)
		return n == 4, err
	})
	out, err = wc.applyManifest(t, "fresh", v1App("fresh", 2))
	require.NoError(t, err, out)
	eventuallyCluster(t, "a new App served", func(ctx context.Context) (bool, error) {
		n, err := replicas("fresh")(ctx)
		return n == 2, err
	})

	out, err = wc.applyManifest(t, "big", v1App("big", 8))
	require.Error(t, err, "a v1 App the hub refuses is refused at its write")
	assert.Contains(t, out, `denied the request: App apps/big (apps.example.com/v1): converting v1 to v2: app.cue:18:30: spec.container.replicas: invalid value 8 (out of bound <=5)`)

	out, err = wc.applyManifest(t, "seven", v1App("seven", 4))
	require.NoError(t, err, "the fix, written in v1, is admitted: %s", out)
	eventuallyCluster(t, "seven served again", func(ctx context.Context) (bool, error) {
		n, err := replicas("seven")(ctx)
		return n == 4, err
	})
	eventuallyCluster(t, "seven no longer Stalled", func(context.Context) (bool, error) {
		s := condition("seven", "Stalled")
		return s == nil || s["status"] == "False", nil
	})

	// The engine's finalizer (a template with resources puts it), for the
	// engine to remove through v1 at the deletion.
	out, err = wc.kubectl("patch", "apps.v1.apps.example.com", "-n", "apps", "six", "--type=merge", "-p", `{"metadata":{"finalizers":["`+contract.Finalizer+`"]}}`)
	require.NoError(t, err, out)
	out, err = wc.kubectl("delete", "apps.v1.apps.example.com", "-n", "apps", "six", "--wait=false")
	require.NoError(t, err, out)
	// Its Deployment goes with it by its owner reference (the garbage
	// collector: not run by this control plane).
	eventuallyCluster(t, "six deleted, its finalizer removed through v1", func(ctx context.Context) (bool, error) {
		out, err := wc.kubectl("get", "apps.v1.apps.example.com", "-n", "apps", "six")
		return err != nil && strings.Contains(out, "NotFound"), nil
	})
}
