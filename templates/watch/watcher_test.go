package watch

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cuengine/engine/templates"
)

// waitTimeout bounds every wait for a reload; reloads normally take well
// under a second, even under -race.
const waitTimeout = 20 * time.Second

// testDebounce is short to keep the tests fast.
const testDebounce = 100 * time.Millisecond

// mykindSource returns the example template with its image set to image.
func mykindSource(t *testing.T, image string) []byte {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("../../examples/templates", "mykind.cue"))
	require.NoError(t, err)
	const orig = `image: "nginx:latest"`
	require.Contains(t, string(src), orig)
	return []byte(strings.Replace(string(src), orig, fmt.Sprintf("image: %q", image), 1))
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, b, 0o644))
}

// mykindDir returns a temporary templates directory holding mykind.cue.
func mykindDir(t *testing.T) string {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "mykind.cue"), mykindSource(t, "nginx:v1"))
	return dir
}

// imageOf returns the image of mykind.cue's Deployment in set.
func imageOf(t *testing.T, set *templates.Set) string {
	t.Helper()
	require.NotNil(t, set)
	for _, tm := range set.Templates() {
		if tm.Path == "mykind.cue" {
			parent := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "webapp.my.domain/v1", "kind": "MyKind",
				"metadata": map[string]any{"name": "m", "namespace": "default"},
				"spec":     map[string]any{"deploymentName": "m"},
			}}
			res, err := tm.Evaluate(templates.Input{Parent: parent})
			require.NoError(t, err)
			require.Len(t, res.Children, 1)
			containers, _, err := unstructured.NestedSlice(res.Children[0].Object.Object, "spec", "template", "spec", "containers")
			require.NoError(t, err)
			require.NotEmpty(t, containers)
			s, _, err := unstructured.NestedString(containers[0].(map[string]any), "image")
			require.NoError(t, err)
			return s
		}
	}
	require.FailNow(t, "set has no mykind.cue", "templates: %v", paths(set))
	return ""
}

func paths(set *templates.Set) []string {
	var out []string
	for _, tm := range set.Templates() {
		out = append(out, tm.Path)
	}
	return out
}

// harness runs a Watcher and collects its OnReload calls.
type harness struct {
	t      *testing.T
	w      *Watcher
	events chan ReloadEvent
}

// newHarness loads dir and builds a Watcher on it, not running yet.
func newHarness(t *testing.T, dir string, opts Options) *harness {
	t.Helper()
	initial, err := templates.Load(dir)
	require.NoError(t, err)
	h := &harness{t: t, events: make(chan ReloadEvent, 100)}
	opts.OnReload = func(ev ReloadEvent) { h.events <- ev }
	h.w, err = New(dir, initial, opts)
	require.NoError(t, err)
	require.Same(t, initial, h.w.Current())
	return h
}

// start runs the Watcher until the test ends and waits until it watches the
// directory.
func (h *harness) start() *harness {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.w.Run(ctx) }()
	h.t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(h.t, err)
		case <-time.After(waitTimeout):
			h.t.Error("Run did not return after its context ended")
		}
	})
	select {
	case <-h.w.ready:
	case err := <-done:
		require.FailNow(h.t, "Run returned early", "%v", err)
	case <-time.After(waitTimeout):
		require.FailNow(h.t, "Run did not start watching")
	}
	return h
}

// startWatcher loads dir and runs a Watcher on it.
func startWatcher(t *testing.T, dir string, opts Options) *harness {
	t.Helper()
	return newHarness(t, dir, opts).start()
}

// next waits for the next OnReload call.
func (h *harness) next() ReloadEvent {
	h.t.Helper()
	select {
	case ev := <-h.events:
		return ev
	case <-time.After(waitTimeout):
		require.FailNow(h.t, "no reload within the timeout")
		return ReloadEvent{}
	}
}

// nextSet waits for the next OnReload call and requires it to be a success.
func (h *harness) nextSet() *templates.Set {
	h.t.Helper()
	ev := h.next()
	require.NoError(h.t, ev.Err)
	require.NotNil(h.t, ev.Set)
	assert.Positive(h.t, ev.Duration)
	assert.Same(h.t, ev.Set, h.w.Current())
	assert.NoError(h.t, h.w.LastError())
	return ev.Set
}

// quiet requires no OnReload call for d.
func (h *harness) quiet(d time.Duration) {
	h.t.Helper()
	select {
	case ev := <-h.events:
		require.FailNow(h.t, "unexpected reload", "set %v, err %v, changed %v", ev.Set != nil, ev.Err, ev.Changed)
	case <-time.After(d):
	}
}

func TestWatcherPlainWrite(t *testing.T) {
	dir := mykindDir(t)
	h := startWatcher(t, dir, Options{Debounce: testDebounce, Rescan: -1})
	initial := h.w.Current()

	writeFile(t, filepath.Join(dir, "mykind.cue"), mykindSource(t, "nginx:v2"))
	ev := h.next()
	require.NoError(t, ev.Err)
	assert.Equal(t, "nginx:v2", imageOf(t, ev.Set))
	assert.Equal(t, []string{"mykind.cue"}, ev.Changed)
	assert.NotEqual(t, initial.Templates()[0].Hash, ev.Set.Templates()[0].Hash)
	assert.Positive(t, ev.Duration)
	assert.Same(t, ev.Set, h.w.Current())
	assert.NoError(t, h.w.LastError())
}

func TestWatcherEditorRenameWrite(t *testing.T) {
	for _, tmp := range []string{".mykind.cue.swp", "mykind.cue~"} {
		t.Run(tmp, func(t *testing.T) {
			dir := mykindDir(t)
			h := startWatcher(t, dir, Options{Debounce: testDebounce, Rescan: -1})

			writeFile(t, filepath.Join(dir, tmp), mykindSource(t, "nginx:v2"))
			require.NoError(t, os.Rename(filepath.Join(dir, tmp), filepath.Join(dir, "mykind.cue")))
			set := h.nextSet()
			assert.Equal(t, "nginx:v2", imageOf(t, set))
			assert.Equal(t, []string{"mykind.cue"}, paths(set))
		})
	}
}

// TestWatcherConfigMapSwap updates the directory the way the kubelet updates a
// ConfigMap volume: the files are links through "..data", which is replaced
// atomically by a rename.
func TestWatcherConfigMapSwap(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "..2026_a", "mykind.cue"), mykindSource(t, "nginx:v1"))
	require.NoError(t, os.Symlink("..2026_a", filepath.Join(dir, "..data")))
	require.NoError(t, os.Symlink(filepath.Join("..data", "mykind.cue"), filepath.Join(dir, "mykind.cue")))
	h := startWatcher(t, dir, Options{Debounce: testDebounce, Rescan: -1})
	assert.Equal(t, "nginx:v1", imageOf(t, h.w.Current()))

	swap := func(from, to, image string) {
		writeFile(t, filepath.Join(dir, to, "mykind.cue"), mykindSource(t, image))
		require.NoError(t, os.Symlink(to, filepath.Join(dir, "..data_tmp")))
		require.NoError(t, os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")))
		require.NoError(t, os.RemoveAll(filepath.Join(dir, from)))
	}
	swap("..2026_a", "..2026_b", "nginx:v2")
	set := h.nextSet()
	assert.Equal(t, "nginx:v2", imageOf(t, set))

	// The watch survives the swap.
	swap("..2026_b", "..2026_c", "nginx:v3")
	set = h.nextSet()
	assert.Equal(t, "nginx:v3", imageOf(t, set))
	assert.Equal(t, []string{"mykind.cue"}, paths(set))
}

// TestWatcherRootSymlinkSwap: the templates root is a symlink swapped to a
// new release directory (as deploy tools do): seen at once, without the
// rescan.
func TestWatcherRootSymlinkSwap(t *testing.T) {
	base := t.TempDir()
	writeFile(t, filepath.Join(base, "release-1", "mykind.cue"), mykindSource(t, "nginx:v1"))
	root := filepath.Join(base, "templates")
	require.NoError(t, os.Symlink("release-1", root))
	h := startWatcher(t, root, Options{Debounce: testDebounce, Rescan: -1})
	assert.Equal(t, "nginx:v1", imageOf(t, h.w.Current()))

	for i, image := range []string{"nginx:v2", "nginx:v3"} {
		release := fmt.Sprintf("release-%d", i+2)
		writeFile(t, filepath.Join(base, release, "mykind.cue"), mykindSource(t, image))
		require.NoError(t, os.Symlink(release, filepath.Join(base, "templates.new")))
		require.NoError(t, os.Rename(filepath.Join(base, "templates.new"), root))
		assert.Equal(t, image, imageOf(t, h.nextSet()))
	}
	// Other entries beside the root change nothing.
	writeFile(t, filepath.Join(base, "unrelated.cue"), []byte("x: 1"))
	h.quiet(5 * testDebounce)
}

func TestWatcherDeleteRecreate(t *testing.T) {
	t.Run("separate", func(t *testing.T) {
		dir := mykindDir(t)
		h := startWatcher(t, dir, Options{Debounce: testDebounce, Rescan: -1})
		file := filepath.Join(dir, "mykind.cue")

		require.NoError(t, os.Remove(file))
		ev := h.next()
		require.NoError(t, ev.Err)
		assert.Empty(t, ev.Set.Templates())
		assert.Equal(t, []string{"mykind.cue"}, ev.Changed)

		writeFile(t, file, mykindSource(t, "nginx:v2"))
		set := h.nextSet()
		assert.Equal(t, "nginx:v2", imageOf(t, set))
	})
	t.Run("merged", func(t *testing.T) {
		dir := mykindDir(t)
		h := startWatcher(t, dir, Options{Debounce: testDebounce, Rescan: -1})
		file := filepath.Join(dir, "mykind.cue")

		require.NoError(t, os.Remove(file))
		writeFile(t, file, mykindSource(t, "nginx:v2"))
		// Normally one reload; an empty set first only if the debounce
		// fired between the two steps.
		for {
			ev := h.next()
			require.NoError(t, ev.Err)
			if len(ev.Set.Templates()) == 0 {
				continue
			}
			assert.Equal(t, "nginx:v2", imageOf(t, ev.Set))
			break
		}
		assert.Equal(t, "nginx:v2", imageOf(t, h.w.Current()))
	})
}

// TestWatcherBurst: a burst of writes is reloaded once, with its final
// content, not once per write. The test fires the debounce itself after the
// last write, so the burst does not depend on how fast the writes land.
func TestWatcherBurst(t *testing.T) {
	dir := mykindDir(t)
	h := newHarness(t, dir, Options{Rescan: -1})
	fire := make(chan time.Time, 1)
	var armed atomic.Bool
	h.w.after = func(time.Duration) <-chan time.Time {
		armed.Store(true)
		return fire
	}
	h.start()

	// Readers on other goroutines, for -race.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if h.w.Current() == nil {
					t.Error("Current returned nil")
					return
				}
				_ = h.w.LastError()
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()

	file := filepath.Join(dir, "mykind.cue")
	for i := 1; i <= 20; i++ {
		require.NoError(t, os.WriteFile(file, mykindSource(t, fmt.Sprintf("nginx:burst%d", i)), 0o644))
	}
	require.Eventually(t, armed.Load, waitTimeout, 10*time.Millisecond, "the writes start a debounce")
	select {
	case ev := <-h.events:
		require.FailNow(t, "reloaded before the debounce fired", "set %v, err %v", ev.Set != nil, ev.Err)
	default:
	}
	fire <- time.Now()
	set := h.nextSet()
	assert.Equal(t, "nginx:burst20", imageOf(t, set))
}

func TestWatcherNewSubdirectory(t *testing.T) {
	dir := mykindDir(t)
	h := startWatcher(t, dir, Options{Debounce: testDebounce, Rescan: -1})
	widget, err := os.ReadFile(filepath.Join("..", "testdata", "eval", "widget.cue"))
	require.NoError(t, err)

	writeFile(t, filepath.Join(dir, "widgets", "widget.cue"), widget)
	ev := h.next()
	require.NoError(t, ev.Err)
	assert.Equal(t, []string{"mykind.cue", "widgets"}, paths(ev.Set))
	assert.Equal(t, []string{"widgets"}, ev.Changed)

	// The new directory is watched: a later edit inside it is seen.
	writeFile(t, filepath.Join(dir, "widgets", "extra.cue"), []byte("package widget\n\nparent: spec: label: *\"x\" | string\n"))
	ev = h.next()
	require.NoError(t, ev.Err)
	assert.Equal(t, []string{"widgets"}, ev.Changed)
	assert.Same(t, ev.Set, h.w.Current())
}

func TestWatcherBrokenEdit(t *testing.T) {
	dir := mykindDir(t)
	h := startWatcher(t, dir, Options{Debounce: testDebounce, Rescan: -1})
	initial := h.w.Current()
	file := filepath.Join(dir, "mykind.cue")
	good := mykindSource(t, "nginx:v1")

	// An unterminated string on the image line.
	broken := []byte(strings.Replace(string(good), `"nginx:v1"`, `"nginx:v1`, 1))
	line := 1 + strings.Count(string(good[:strings.Index(string(good), `"nginx:v1"`)]), "\n")
	writeFile(t, file, broken)
	ev := h.next()
	require.Error(t, ev.Err)
	assert.Nil(t, ev.Set)
	assert.Regexp(t, regexp.MustCompile(fmt.Sprintf(`(^|\n)mykind\.cue:%d:\d+: `, line)), ev.Err.Error())
	var le *templates.LoadError
	assert.ErrorAs(t, ev.Err, &le)
	assert.Equal(t, []string{"mykind.cue"}, ev.Changed)
	assert.Same(t, initial, h.w.Current())
	assert.Equal(t, ev.Err, h.w.LastError())

	// The same error again is not reported again.
	writeFile(t, file, append([]byte{}, broken...))
	h.quiet(3 * testDebounce)
	assert.Error(t, h.w.LastError())

	// A different error is.
	broken2 := []byte(strings.Replace(string(good), `kind:       "MyKind"`, `kind:       "MyKind`, 1))
	writeFile(t, file, broken2)
	ev = h.next()
	require.Error(t, ev.Err)
	assert.Regexp(t, `(^|\n)mykind\.cue:\d+:\d+: `, ev.Err.Error())
	assert.Same(t, initial, h.w.Current())

	// Fixing it publishes the new set and clears the error.
	writeFile(t, file, mykindSource(t, "nginx:v2"))
	set := h.nextSet()
	assert.Equal(t, "nginx:v2", imageOf(t, set))
	assert.NoError(t, h.w.LastError())

	// Breaking it and restoring the served content clears the error without
	// a new set.
	writeFile(t, file, broken)
	require.Error(t, h.next().Err)
	writeFile(t, file, mykindSource(t, "nginx:v2"))
	ev = h.next()
	require.NoError(t, ev.Err)
	assert.Same(t, set, ev.Set)
	assert.Empty(t, ev.Changed)
	assert.Same(t, set, h.w.Current())
	assert.NoError(t, h.w.LastError())
}

func TestWatcherUnchangedContent(t *testing.T) {
	dir := mykindDir(t)
	h := startWatcher(t, dir, Options{Debounce: testDebounce, Rescan: testDebounce})
	initial := h.w.Current()
	file := filepath.Join(dir, "mykind.cue")

	// A rewrite with the same bytes, a touch, a new non-.cue file and an
	// editor's swap file change nothing Load reads; neither do the rescans.
	writeFile(t, file, mykindSource(t, "nginx:v1"))
	now := time.Now()
	require.NoError(t, os.Chtimes(file, now, now))
	writeFile(t, filepath.Join(dir, "README.md"), []byte("templates\n"))
	writeFile(t, filepath.Join(dir, ".mykind.cue.swp"), []byte("swap"))
	h.quiet(5 * testDebounce)
	assert.Same(t, initial, h.w.Current())

	writeFile(t, file, mykindSource(t, "nginx:v2"))
	assert.Equal(t, "nginx:v2", imageOf(t, h.nextSet()))
}

// TestWatcherCueMod changes only a package the template imports from cue.mod:
// the template's own revision is unchanged, but the new set is published.
func TestWatcherCueMod(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "cue.mod", "module.cue"), []byte("module: \"example.com/t@v0\"\nlanguage: version: \"v0.9.0\"\n"))
	lib := filepath.Join(dir, "cue.mod", "pkg", "example.com", "lib", "lib.cue")
	writeFile(t, lib, []byte("package lib\n\nimage: \"nginx:lib1\"\n"))
	src := strings.Replace(string(mykindSource(t, "unused")), `import "strings"`, "import (\n\t\"strings\"\n\t\"example.com/lib\"\n)", 1)
	src = strings.Replace(src, `image: "unused"`, "image: lib.image", 1)
	writeFile(t, filepath.Join(dir, "mykind.cue"), []byte(src))
	h := startWatcher(t, dir, Options{Debounce: testDebounce, Rescan: -1})
	initial := h.w.Current()
	assert.Equal(t, "nginx:lib1", imageOf(t, initial))

	writeFile(t, lib, []byte("package lib\n\nimage: \"nginx:lib2\"\n"))
	ev := h.next()
	require.NoError(t, ev.Err)
	assert.Equal(t, "nginx:lib2", imageOf(t, ev.Set))
	assert.Equal(t, []string{"cue.mod", "mykind.cue"}, ev.Changed)
	// The imported package is part of the template's revision.
	assert.NotEqual(t, initial.Templates()[0].Hash, ev.Set.Templates()[0].Hash)
}

func TestWatcherRescan(t *testing.T) {
	t.Run("changed before Run", func(t *testing.T) {
		dir := mykindDir(t)
		h := newHarness(t, dir, Options{Debounce: testDebounce, Rescan: 200 * time.Millisecond})
		writeFile(t, filepath.Join(dir, "mykind.cue"), mykindSource(t, "nginx:v2"))
		h.start()
		assert.Equal(t, "nginx:v2", imageOf(t, h.nextSet()))
	})

	// mykind.cue links to a file outside the directory: fsnotify sees no
	// event when the target changes, only the rescan does.
	missedEvent := func(t *testing.T, rescan time.Duration) (*harness, string) {
		outside := filepath.Join(t.TempDir(), "mykind.cue")
		writeFile(t, outside, mykindSource(t, "nginx:v1"))
		dir := t.TempDir()
		require.NoError(t, os.Symlink(outside, filepath.Join(dir, "mykind.cue")))
		return startWatcher(t, dir, Options{Debounce: testDebounce, Rescan: rescan}), outside
	}
	t.Run("missed event", func(t *testing.T) {
		h, outside := missedEvent(t, 200*time.Millisecond)
		writeFile(t, outside, mykindSource(t, "nginx:v2"))
		ev := h.next()
		require.NoError(t, ev.Err)
		assert.Equal(t, "nginx:v2", imageOf(t, ev.Set))
		assert.Equal(t, []string{"mykind.cue"}, ev.Changed)
	})
	t.Run("disabled", func(t *testing.T) {
		h, outside := missedEvent(t, -1)
		writeFile(t, outside, mykindSource(t, "nginx:v2"))
		h.quiet(time.Second)
		assert.Equal(t, "nginx:v1", imageOf(t, h.w.Current()))
	})
}

func TestNewWatcher(t *testing.T) {
	dir := mykindDir(t)
	w, err := New(dir, nil, Options{})
	require.NoError(t, err)
	assert.Equal(t, "nginx:v1", imageOf(t, w.Current()))
	assert.NoError(t, w.LastError())
	assert.Equal(t, DefaultDebounce, w.debounce)
	assert.Equal(t, DefaultRescan, w.rescan)

	other, err := templates.Load(mykindDir(t))
	require.NoError(t, err)
	_, err = New(dir, other, Options{})
	assert.ErrorContains(t, err, "initial set was loaded from")

	_, err = New(filepath.Join("..", "testdata", "broken", "syntax"), nil, Options{})
	var le *templates.LoadError
	assert.ErrorAs(t, err, &le)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.NoError(t, w.Run(ctx))
	assert.ErrorContains(t, w.Run(ctx), "more than once")
}

// TestScanSkipsTests: what Load skips (the test cases) is neither watched
// nor part of the digest.
func TestScanSkipsTests(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "mykind.cue"), mykindSource(t, "nginx:v1"))
	writeFile(t, filepath.Join(dir, templates.TestsDir, "shared.cue"), []byte("x: 1\n"))
	writeFile(t, filepath.Join(dir, templates.TestsDir, "mykind", "defaults", "expect.cue"), []byte("status: {}\n"))

	dirs, files, err := scan(dir)
	require.NoError(t, err)
	assert.Equal(t, []string{dir}, dirs, "the watcher does not watch the test cases")
	assert.Len(t, files, 1)
}
