package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/engine"
	"github.com/cuengine/engine/providers"
)

// annotate merge-patches one annotation of a parent (null removes it).
func annotate(t *testing.T, obj *unstructured.Unstructured, key string, value any) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%s}}}`, key, jsonValue(value))
	require.NoError(t, k8s.Patch(context.Background(), obj, client.RawPatch(types.MergePatchType, []byte(patch))))
}

func jsonValue(v any) string {
	if v == nil {
		return "null"
	}
	return fmt.Sprintf("%q", v)
}

// TestPausedParentIsLeftAlone, on a real apiserver: a paused parent gets
// the Paused condition (and Stalled, reason Paused) and an event; its
// Deployment deleted stays deleted and its spec change is not applied for
// a minute; removing the annotation reconciles it once: the Deployment
// comes back with the new spec and Paused goes.
func TestPausedParentIsLeftAlone(t *testing.T) {
	controlPlane(t)
	ctx := context.Background()
	ns := namespace(t)
	w := parent(waiterGVK, ns, "paused", map[string]any{"expose": false})
	require.NoError(t, k8s.Create(ctx, w))
	key := client.ObjectKey{Namespace: ns, Name: "paused"}
	eventually(t, "the Deployment", func(ctx context.Context) (bool, error) {
		_, err := getDeployment(ctx, ns, "paused")
		return err == nil, client.IgnoreNotFound(err)
	})

	annotate(t, w, contract.AnnotationPaused, "true")
	eventually(t, "Paused", func(ctx context.Context) (bool, error) {
		c, err := condition(ctx, w, contract.ConditionPaused)
		return err == nil && c != nil && c.Status == metav1.ConditionTrue, err
	})
	stalled, err := condition(ctx, w, contract.ConditionStalled)
	require.NoError(t, err)
	assert.Equal(t, contract.ReasonPaused, stalled.Reason)
	eventually(t, "the Paused event", func(ctx context.Context) (bool, error) {
		return hasEvent(ctx, ns, "paused", contract.ReasonPaused)
	})

	d, err := getDeployment(ctx, ns, "paused")
	require.NoError(t, err)
	require.NoError(t, k8s.Delete(ctx, d))
	require.NoError(t, k8s.Patch(ctx, w, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"expose":true}}`))))
	consistently(t, "nothing written while paused", time.Minute, func(ctx context.Context) (bool, error) {
		_, err := getDeployment(ctx, ns, "paused")
		if !apierrors.IsNotFound(err) {
			return false, err
		}
		err = k8s.Get(ctx, key, &corev1.Service{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})

	annotate(t, w, contract.AnnotationPaused, nil)
	eventually(t, "the Deployment back", func(ctx context.Context) (bool, error) {
		_, err := getDeployment(ctx, ns, "paused")
		return err == nil, client.IgnoreNotFound(err)
	})
	markReady(t, ns, "paused", 1)
	eventually(t, "the spec change applied: the Service", func(ctx context.Context) (bool, error) {
		err := k8s.Get(ctx, key, &corev1.Service{})
		return err == nil, client.IgnoreNotFound(err)
	})
	eventually(t, "Paused gone", func(ctx context.Context) (bool, error) {
		c, err := condition(ctx, w, contract.ConditionPaused)
		return err == nil && c == nil, err
	})
	ok, err := hasEvent(ctx, ns, "paused", contract.ReasonResumed)
	require.NoError(t, err)
	assert.True(t, ok, "a Resumed event")
}

// TestPauseValueOtherThanTrue (issue 51): the pause annotation pauses on
// "true" only; "True", "yes", "1" and "true " do not, and say so: Paused
// False with reason PauseValueIgnored naming the accepted value, and a
// Warning event, while the parent is reconciled as usual.
func TestPauseValueOtherThanTrue(t *testing.T) {
	controlPlane(t)
	ctx := context.Background()
	ns := namespace(t)
	w := parent(waiterGVK, ns, "almost", map[string]any{"expose": false})
	w.SetAnnotations(map[string]string{contract.AnnotationPaused: "True"})
	require.NoError(t, k8s.Create(ctx, w))
	eventually(t, "the Deployment, not paused", func(ctx context.Context) (bool, error) {
		_, err := getDeployment(ctx, ns, "almost")
		return err == nil, client.IgnoreNotFound(err)
	})
	for _, value := range []string{"True", "yes", "1", "true "} {
		annotate(t, w, contract.AnnotationPaused, value)
		want := fmt.Sprintf(`%s is %q, which does not pause: the one value that pauses is "true" (lower case, no spaces); the engine reconciles this object as usual`, contract.AnnotationPaused, value)
		eventually(t, "Paused False for "+value, func(ctx context.Context) (bool, error) {
			c, err := condition(ctx, w, contract.ConditionPaused)
			return err == nil && c != nil && c.Status == metav1.ConditionFalse && c.Reason == contract.ReasonPauseValueIgnored && c.Message == want, err
		})
		stalled, err := condition(ctx, w, contract.ConditionStalled)
		require.NoError(t, err)
		assert.Nil(t, stalled, "not stalled by a pause that does not pause")
	}
	eventually(t, "the Warning event", func(ctx context.Context) (bool, error) {
		return hasEvent(ctx, ns, "almost", contract.ReasonPauseValueIgnored)
	})
	require.NoError(t, k8s.Patch(ctx, w, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"expose":true}}`))))
	markReady(t, ns, "almost", 1)
	eventually(t, "a spec change applied: the Service", func(ctx context.Context) (bool, error) {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "almost"}, &corev1.Service{})
		return err == nil, client.IgnoreNotFound(err)
	})
	annotate(t, w, contract.AnnotationPaused, "true")
	eventually(t, "Paused True", func(ctx context.Context) (bool, error) {
		c, err := condition(ctx, w, contract.ConditionPaused)
		return err == nil && c != nil && c.Status == metav1.ConditionTrue && c.Reason == contract.ReasonPaused, err
	})
	annotate(t, w, contract.AnnotationPaused, nil)
	eventually(t, "Paused gone", func(ctx context.Context) (bool, error) {
		c, err := condition(ctx, w, contract.ConditionPaused)
		return err == nil && c == nil, err
	})
}

// hasEvent reports whether an object has an event with the reason.
func hasEvent(ctx context.Context, ns, name, reason string) (bool, error) {
	list := &corev1.EventList{}
	if err := k8s.List(ctx, list, client.InNamespace(ns)); err != nil {
		return false, err
	}
	for _, ev := range list.Items {
		if ev.InvolvedObject.Name == name && ev.Reason == reason {
			return true, nil
		}
	}
	return false, nil
}

// consistently fails the test if cond is ever false during d. Each check
// has a context of its own, so a request near the end of d is not refused
// for want of time (client-go's rate limiter refuses a wait that would
// pass the deadline).
func consistently(t *testing.T, what string, d time.Duration, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	end := time.Now().Add(d)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		ok, err := cond(ctx)
		cancel()
		require.NoError(t, err, what)
		require.True(t, ok, what)
		if time.Now().After(end) {
			return
		}
		<-tick.C
	}
}

// observer is a provider that counts the calls that observe its resource:
// what the engine does, not what the provider does, is under test.
type observer struct{ applies atomic.Int64 }

func (o *observer) ExternalName(_ context.Context, req providers.Request, _ int) (string, map[string]string, error) {
	return "thing-" + string(req.Owner.UID)[:8], nil, nil
}

func (o *observer) Apply(context.Context, providers.Request) (providers.Observation, error) {
	o.applies.Add(1)
	return providers.Observation{Ready: true}, nil
}

func (o *observer) Delete(context.Context, providers.Request) error { return nil }

// Plan is not called by a reconcile.
func (o *observer) Plan(context.Context, providers.Request) (providers.Plan, error) {
	return providers.Plan{}, errors.New("observer: Plan is not called by a reconcile")
}

const watched = `package watched

parent: {apiVersion: "test.cuengine.dev/v1", kind: "Watched", spec: size: int}
resources: thing: {
	provider: "observer"
	spec: size: parent.spec.size
}
`

// TestReconcileRequestedAtObservesNow: with the resource resync at ten
// minutes, a new engine.cuengine.dev/reconcile-requested-at value makes the
// engine observe the parent's external resource again within seconds, and
// status.lastHandledReconcileAt says which value it handled.
func TestReconcileRequestedAtObservesNow(t *testing.T) {
	controlPlane(t)
	ctx := context.Background()
	obs := &observer{}
	reg := providers.NewRegistry()
	reg.Register("observer", obs)
	serveTemplates(t, map[string]string{"watched.cue": watched}, engine.Options{Providers: reg, MaxConcurrentReconciles: 2, ResourceResync: 10 * time.Minute})
	gvk := schema.GroupVersionKind{Group: "test.cuengine.dev", Version: "v1", Kind: "Watched"}

	ns := namespace(t)
	p := parent(gvk, ns, "w", map[string]any{"size": int64(1)})
	require.NoError(t, k8s.Create(ctx, p))
	eventually(t, "Ready", func(ctx context.Context) (bool, error) {
		c, err := condition(ctx, p, contract.ConditionReady)
		return err == nil && c != nil && c.Status == metav1.ConditionTrue, err
	})
	before := obs.applies.Load()
	require.Positive(t, before)

	annotate(t, p, contract.AnnotationReconcileRequestedAt, "2026-12-02T01:00:00Z")
	eventuallyWithin(t, "observed again and the token handled", 30*time.Second, func(ctx context.Context) (bool, error) {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(gvk)
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(p), live); err != nil {
			return false, err
		}
		token, _, _ := unstructured.NestedString(live.Object, "status", contract.StatusLastHandledReconcileAt)
		return token == "2026-12-02T01:00:00Z" && obs.applies.Load() > before, nil
	})
}
