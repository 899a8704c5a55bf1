package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/cuengine/engine/revisions"
	"github.com/cuengine/engine/templates"
	"github.com/cuengine/engine/templates/policy"
)

// TestRolloutStatusGates: status reads the target's soak and freeze from
// the template the revision stores, and shows the soak clock, the
// analysis results and when the next wave may start.
func TestRolloutStatusGates(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	src := `parent: {apiVersion: "webapp.my.domain/v1", kind: "MyKind"}
rollout: {strategy: "Progressive", waves: [{share: 1, soak: "30s"}, "100%"], soak: "1m",
	analysis: [{name: "errors", query: "up", condition: "== 1"}],
	freeze: [{start: "2026-12-02T10:00:00Z", end: "2026-12-02T11:00:00Z"}]}
`
	dir := t.TempDir()
	tpl := loadOne(t, dir, src)
	first := revisions.ObjectOf("engine-system", myKindGVK, revisions.Revision{Number: 1, Hash: "aaaaaaaaaaaa", Path: "mykind.cue", Phase: revisions.PhaseComplete, HeldDeletes: -1}, tpl.Files())
	second := revisions.ObjectOf("engine-system", myKindGVK, revisions.Revision{
		Number: 2, Hash: tpl.Hash, Path: "mykind.cue", Phase: revisions.PhaseProgressing, HeldDeletes: -1,
		Message: "wave 1 of 2: soaking 30s since 2026-12-02T10:00:00Z, until 2026-12-02T10:00:30Z", SoakSince: t0,
		Analysis: []string{"analysis errors passed: up is 1, the condition is == 1"},
	}, tpl.Files())
	kr, err := revisions.Select([]appsv1.ControllerRevision{*first, *second}, myKindGVK.GroupKind(), "")
	require.NoError(t, err)
	s := &rolloutSession{gvk: myKindGVK, revs: kr, policies: map[string]*policy.Rollout{}}

	st := s.fleet(nil, t0.Add(12*time.Second))
	require.NotNil(t, st.Target.NextWaveAt)
	assert.Equal(t, "30s", st.Target.Soak, "the first wave's own soak")
	var out bytes.Buffer
	printStatus(&out, st, "mykind")
	assert.Contains(t, out.String(), `revision 2 (*) is Progressing: wave 1 of 2: soaking 30s since 2026-12-02T10:00:00Z, until 2026-12-02T10:00:30Z
soaking since 2026-12-02T10:00:00Z: 18s of 30s remaining
analysis errors passed: up is 1, the condition is == 1
frozen: the next wave may start at 2026-12-02T11:00:00Z
`)

	out.Reset()
	printStatus(&out, s.fleet(nil, t0.Add(2*time.Hour)), "mykind")
	assert.Contains(t, out.String(), "soaked: 30s since 2026-12-02T10:00:00Z\n")
	assert.NotContains(t, out.String(), "frozen")
}

// loadOne compiles a one-file template.
func loadOne(t *testing.T, dir, src string) *templates.Template {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "mykind.cue"), []byte(src), 0o644))
	set, err := templates.Load(dir)
	require.NoError(t, err)
	return set.Templates()[0]
}
