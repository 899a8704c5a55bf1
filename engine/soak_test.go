package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/engine"
	"github.com/cuengine/engine/revisions"
)

// The gates of issue 41 between a rollout's waves: soak, analysis on a
// real Prometheus (analysis_test.go) and freeze windows.

// soakTemplate is a kind of the group "<kind>.cuengine.dev" whose objects
// are Ready unless their spec says broken, rolled out in two waves (the
// object labelled a canary first) with the rollout fields given.
func soakTemplate(kind, note, rollout string) string {
	group := strings.ToLower(kind) + ".cuengine.dev"
	return `parent: {apiVersion: "` + group + `/v1", kind: "` + kind + `", spec: broken: *false | bool}
rollout: {strategy: "Progressive", maxFailures: 0, canary: objectLabel: true, ` + rollout + `}
children: cm: {
	apiVersion: "v1"
	kind:       "ConfigMap"
	metadata: name: parent.metadata.name
	data: note: "` + note + `"
}
ready: !parent.spec.broken
`
}

func soakGVK(kind string) schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: strings.ToLower(kind) + ".cuengine.dev", Version: "v1", Kind: kind}
}

// soakFleet installs the kind of a template, starts an engine on it with
// opts, and creates the objects s-0 (a canary: the first wave) and s-1,
// waiting for both to be Ready on revision 1.
func soakFleet(t *testing.T, kind, first string, opts engine.Options) (*engine.Engine, context.Context, string, string) {
	t.Helper()
	dir := t.TempDir()
	ev := templateFile(t, dir, "t.cue", first)
	tpl, ok := ev.Set.Lookup(soakGVK(kind))
	require.True(t, ok)
	installCRD(t, tpl.CRD())
	ns := namespace(t)
	opts.RevisionNamespace = ns
	eng, ctx := runEngine(t, ev.Set, opts)
	for _, name := range []string{"s-0", "s-1"} {
		p := parent(soakGVK(kind), ns, name, map[string]any{})
		if name == "s-0" {
			p.SetLabels(map[string]string{contract.LabelCanary: "true"})
		}
		require.NoError(t, k8s.Create(ctx, p))
	}
	eventually(t, "both objects Ready on revision 1", func(ctx context.Context) (bool, error) {
		return readyOn(ctx, soakGVK(kind), ns, 1, "s-0", "s-1")
	})
	return eng, ctx, ns, dir
}

// readyOn reports whether the named objects run revision number and are
// healthy on it.
func readyOn(ctx context.Context, gvk schema.GroupVersionKind, ns string, number int64, names ...string) (bool, error) {
	for _, name := range names {
		p := parent(gvk, ns, name, nil)
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return false, err
		}
		n, hash := contract.ParentRevision(p)
		if n != number || !revisions.ReadyOn(p, hash) {
			return false, nil
		}
	}
	return true, nil
}

// revision reads the kind's revision number.
func revision(ctx context.Context, ns string, gvk schema.GroupVersionKind, number int64) (revisions.Revision, error) {
	revs, err := revisions.ListRevisions(ctx, k8s, ns, gvk)
	if err != nil {
		return revisions.Revision{}, err
	}
	for _, r := range revs {
		if r.Number == number {
			return r, nil
		}
	}
	return revisions.Revision{}, fmt.Errorf("no revision %d", number)
}

// soakStarted waits for the first wave of revision number to soak, and
// returns the revision as it recorded it.
func soakStarted(t *testing.T, ns string, gvk schema.GroupVersionKind, number int64) revisions.Revision {
	t.Helper()
	var rev revisions.Revision
	eventually(t, fmt.Sprintf("revision %d's first wave soaking", number), func(ctx context.Context) (bool, error) {
		var err error
		rev, err = revision(ctx, ns, gvk, number)
		return err == nil && !rev.SoakSince.IsZero(), err
	})
	require.Equal(t, revisions.PhaseProgressing, rev.Phase, rev.Message)
	require.Equal(t, 0, rev.Wave)
	return rev
}

// holdsUntil polls until the instant end, failing the test as soon as the
// first wave of revision number is not holding any longer: the revision
// left wave 1 (or Progressing), or s-1 was moved to it.
func holdsUntil(t *testing.T, ns string, gvk schema.GroupVersionKind, number int64, end time.Time) {
	t.Helper()
	for time.Now().Before(end) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		rev, err := revision(ctx, ns, gvk, number)
		require.NoError(t, err)
		require.Equal(t, revisions.PhaseProgressing, rev.Phase, "before %s: %s", end.Format(time.RFC3339Nano), rev.Message)
		require.Equal(t, 0, rev.Wave, "before %s: %s", end.Format(time.RFC3339Nano), rev.Message)
		moved, err := onRevision(ctx, gvk, ns, number, "s-1")
		cancel()
		require.NoError(t, err)
		require.False(t, moved, "s-1 moved to revision %d before %s", number, end.Format(time.RFC3339Nano))
		time.Sleep(200 * time.Millisecond) // the poll's period
	}
}

// TestSoakPromotesOnlyAfterIt: a first wave with its own 30 s soak (the
// last none) promotes the revision once its object stayed Ready for the
// whole soak, and not before: until SoakSince + 30 s, as the revision
// recorded it, s-1 stays on revision 1.
func TestSoakPromotesOnlyAfterIt(t *testing.T) {
	controlPlane(t)
	t.Parallel()
	const kind = "Soaked"
	const rollout = `waves: [{share: 1, soak: "30s"}, {share: "100%", soak: "0s"}]`
	eng, ctx, ns, dir := soakFleet(t, kind, soakTemplate(kind, "v1", rollout), engine.Options{})
	gvk := soakGVK(kind)

	eng.Reload(ctx, templateFile(t, dir, "t.cue", soakTemplate(kind, "v2", rollout)))
	require.NoError(t, eng.ReloadError())
	rev := soakStarted(t, ns, gvk, 2)
	ok, err := readyOn(ctx, gvk, ns, 2, "s-0")
	require.NoError(t, err)
	assert.True(t, ok, "the soak starts once the wave is Ready")
	// The soak's start is recorded before the message that shows its
	// clock: the next step of the rollout writes that.
	clock := "wave 1 of 2: soaking 30s since " + rev.SoakSince.UTC().Format(time.RFC3339)
	eventually(t, "the revision's message shows the soak clock", func(ctx context.Context) (bool, error) {
		r, err := revision(ctx, ns, gvk, 2)
		if err != nil {
			return false, err
		}
		if !strings.Contains(r.Message, clock) {
			return false, errors.New(r.Message)
		}
		return true, nil
	})

	// Until the soak ends the wave holds; then it promotes.
	holdsUntil(t, ns, gvk, 2, rev.SoakSince.Add(30*time.Second).Add(-500*time.Millisecond))
	rev = newestRevision(t, ns, gvk, 2, revisions.PhaseComplete)
	assert.Equal(t, "rolled out in 2 waves", rev.Message)
	assert.True(t, rev.SoakSince.IsZero(), "the soak is over")
	eventually(t, "both objects on revision 2", func(ctx context.Context) (bool, error) { return readyOn(ctx, gvk, ns, 2, "s-0", "s-1") })
}

// TestSoakRegressionRollsBack: with a 30 s soak, the first wave's object
// turns not Ready 20 s into it: a regression, rolled back at once (long
// before its progressDeadline of 5 minutes), saying why.
func TestSoakRegressionRollsBack(t *testing.T) {
	controlPlane(t)
	t.Parallel()
	const kind = "Soured"
	const rollout = `waves: [1, "100%"], soak: "30s"`
	eng, ctx, ns, dir := soakFleet(t, kind, soakTemplate(kind, "v1", rollout), engine.Options{})
	gvk := soakGVK(kind)

	eng.Reload(ctx, templateFile(t, dir, "t.cue", soakTemplate(kind, "v2", rollout)))
	require.NoError(t, eng.ReloadError())
	rev := soakStarted(t, ns, gvk, 2)
	holdsUntil(t, ns, gvk, 2, rev.SoakSince.Add(20*time.Second))

	s0 := parent(gvk, ns, "s-0", nil)
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(s0), s0))
	require.NoError(t, unstructured.SetNestedField(s0.Object, true, "spec", "broken"))
	require.NoError(t, k8s.Update(ctx, s0))
	rev = newestRevision(t, ns, gvk, 2, revisions.PhaseRolledBack)
	assert.True(t, strings.HasPrefix(rev.Message, "1 objects failed (more than maxFailures 0): "+ns+"/s-0: turned unhealthy during the soak: Ready=False"), rev.Message)
	assert.True(t, rev.SoakSince.IsZero(), "the soak is over")
	eventually(t, "s-0 back on revision 1", func(ctx context.Context) (bool, error) { return onRevision(ctx, gvk, ns, 1, "s-0", "s-1") })
	cm := &corev1.ConfigMap{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "s-0"}, cm))
	assert.Equal(t, "v1", cm.Data["note"])
}

// TestFreezeHoldsTheNextWave: a freeze window that opens while the first
// wave soaks lets that wave finish its soak but starts no other until the
// window ends; the revision says until when, then rolls out.
func TestFreezeHoldsTheNextWave(t *testing.T) {
	controlPlane(t)
	t.Parallel()
	const kind = "Frosty"
	eng, ctx, ns, dir := soakFleet(t, kind, soakTemplate(kind, "v1", `waves: [1, "100%"]`), engine.Options{})
	gvk := soakGVK(kind)

	// The first wave starts at once (within the 8 s before the window)
	// and soaks 10 s: its soak ends inside the window.
	start := time.Now().UTC().Truncate(time.Second).Add(8 * time.Second)
	end := start.Add(10 * time.Second)
	frozen := fmt.Sprintf(`waves: [{share: 1, soak: "10s"}, "100%%"], freeze: [{start: %q, end: %q}]`, start.Format(time.RFC3339), end.Format(time.RFC3339))
	eng.Reload(ctx, templateFile(t, dir, "t.cue", soakTemplate(kind, "v2", frozen)))
	require.NoError(t, eng.ReloadError())
	rev := soakStarted(t, ns, gvk, 2)
	require.True(t, rev.SoakSince.Before(start), "the first wave soaks from %s, before the window", rev.SoakSince)
	want := "wave 1 of 2 passed; frozen until " + end.Format(time.RFC3339) + ", when wave 2 starts"
	eventuallyWithin(t, "revision 2 frozen after its first wave", time.Minute, func(ctx context.Context) (bool, error) {
		rev, err := revision(ctx, ns, gvk, 2)
		return err == nil && rev.Message == want, err
	})
	holdsUntil(t, ns, gvk, 2, end.Add(-500*time.Millisecond))
	newestRevision(t, ns, gvk, 2, revisions.PhaseComplete)
	eventually(t, "both objects on revision 2", func(ctx context.Context) (bool, error) { return readyOn(ctx, gvk, ns, 2, "s-0", "s-1") })
}

// TestSoakResumesAfterRestart: an engine stopped while a wave soaks, and
// another started in its place, resume the clock the first recorded: the
// wave passes at SoakSince + soak, not a soak after the restart.
func TestSoakResumesAfterRestart(t *testing.T) {
	controlPlane(t)
	t.Parallel()
	const kind = "Resumed"
	const rollout = `waves: [{share: 1, soak: "12s"}, {share: "100%", soak: "0s"}]`
	dir := t.TempDir()
	ev := templateFile(t, dir, "t.cue", soakTemplate(kind, "v1", rollout))
	gvk := soakGVK(kind)
	tpl, ok := ev.Set.Lookup(gvk)
	require.True(t, ok)
	installCRD(t, tpl.CRD())
	ns := namespace(t)
	opts := engine.Options{RevisionNamespace: ns}

	// The first engine, stopped by the test.
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0", MapperProvider: engine.NewRESTMapper})
	require.NoError(t, err)
	first, err := engine.New(mgr, opts)
	require.NoError(t, err)
	first.SetTemplates(ev.Set)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() { stop(); <-done })
	for _, name := range []string{"s-0", "s-1"} {
		p := parent(gvk, ns, name, map[string]any{})
		if name == "s-0" {
			p.SetLabels(map[string]string{contract.LabelCanary: "true"})
		}
		require.NoError(t, k8s.Create(ctx, p))
	}
	eventually(t, "both objects Ready on revision 1", func(ctx context.Context) (bool, error) { return readyOn(ctx, gvk, ns, 1, "s-0", "s-1") })
	v2 := templateFile(t, dir, "t.cue", soakTemplate(kind, "v2", rollout))
	first.Reload(ctx, v2)
	require.NoError(t, first.ReloadError())
	rev := soakStarted(t, ns, gvk, 2)
	since := rev.SoakSince
	holdsUntil(t, ns, gvk, 2, since.Add(5*time.Second))
	stop()
	require.NoError(t, <-done)
	done <- nil // for the cleanup

	// The second engine, on the same files, 5 s into the soak: it keeps
	// the recorded clock (a new one would be recorded in its place) and
	// passes the wave at its end.
	runEngine(t, v2.Set, opts)
	end := since.Add(12 * time.Second)
	for time.Now().Before(end.Add(-500 * time.Millisecond)) {
		rev, err := revision(context.Background(), ns, gvk, 2)
		require.NoError(t, err)
		require.Equal(t, revisions.PhaseProgressing, rev.Phase, rev.Message)
		require.Equal(t, 0, rev.Wave, rev.Message)
		require.True(t, since.Equal(rev.SoakSince), "the soak's clock: %s, recorded first %s", rev.SoakSince, since)
		time.Sleep(200 * time.Millisecond) // the poll's period
	}
	rev = newestRevision(t, ns, gvk, 2, revisions.PhaseComplete)
	assert.Equal(t, "rolled out in 2 waves", rev.Message)
	eventually(t, "both objects on revision 2", func(ctx context.Context) (bool, error) { return readyOn(ctx, gvk, ns, 2, "s-0", "s-1") })
}
