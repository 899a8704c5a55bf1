package watch

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/cuengine/engine/templates"
)

// Defaults of Options.
const (
	DefaultDebounce = 300 * time.Millisecond
	DefaultRescan   = time.Minute
)

// maxBurst caps a burst of events at maxBurst × Debounce, so a steady stream
// of events cannot postpone a reload forever.
const maxBurst = 10

// Options configures a Watcher. The zero value uses the defaults.
type Options struct {
	// Debounce is how long the directory must be quiet after an event before
	// it is reloaded, so a burst of events becomes one reload. A burst is
	// reloaded after at most ten times Debounce even if events keep coming.
	// Zero or negative means DefaultDebounce.
	Debounce time.Duration
	// Rescan is the interval of a periodic re-read of the directory, a safety
	// net behind fsnotify for missed events (network filesystems, symlinks to
	// files outside the directory, directories that could not be watched).
	// A change found by the rescan is loaded like one signalled by events:
	// once the content has not changed for Debounce. Zero means
	// DefaultRescan; negative disables the rescan.
	Rescan time.Duration
	// OnReload, when set, is called after every reload attempt that changes
	// what the Watcher serves or reports; see Watcher. It is called from the
	// goroutine running Run, one call at a time and in order; a slow OnReload
	// delays the next reload.
	OnReload func(ReloadEvent)
	// Schemas are where each reload finds the schemas of child kinds, as
	// LoadWith's options.
	Schemas templates.LoadOptions
}

// ReloadEvent describes one reload attempt, for OnReload.
type ReloadEvent struct {
	// Set is the set now served on success, nil on failure.
	Set *templates.Set
	// Err is the load error on failure (a *LoadError keeps the file:line:col
	// positions), nil on success.
	Err error
	// Changed lists, sorted, the template paths whose content changed, were
	// added or were removed compared with the set served before the attempt,
	// for logs. "cue.mod" stands for a change under cue.mod/. It may be empty
	// when only the error state changed.
	Changed []string
	// Duration runs from the first file event of the burst (or from the
	// rescan that noticed the change) to the end of the load: the time from a
	// file change to the swap.
	Duration time.Duration
}

// Watcher watches a templates directory and publishes a new *Set each time
// the directory's content changes and loads cleanly.
//
// It watches the directory and, recursively, every subdirectory that is not
// hidden (including cue.mod/ and directories created later), following
// symlinks. Watching the root itself is enough to notice the atomic "..data"
// symlink swap of a Kubernetes ConfigMap volume. Any create, write, remove or
// rename starts or extends a debounce timer; when it fires the directory is
// loaded once. Every Rescan interval the directory is re-read as well.
//
// A reload attempt compares the .cue files Load reads (by content) and the
// templates' paths and revisions with those of the set being served. Only a
// change is published: on success the new set replaces the served one; on
// failure the last good set keeps being served and LastError reports the
// error. OnReload is called when the served set changes, when an error
// appears, when the error text changes, and when the error clears (then with
// the served set and, if the content is back to the served one, no Changed).
// A touch, a rewrite with the same bytes, a repeat of the same error or a
// rescan that finds nothing new calls nothing.
//
// Current and LastError are safe for concurrent use.
type Watcher struct {
	dir      string
	debounce time.Duration
	rescan   time.Duration
	onReload func(ReloadEvent)
	schemas  templates.LoadOptions
	after    func(time.Duration) <-chan time.Time // time.After; tests fire the debounce themselves

	started atomic.Bool
	ready   chan struct{} // closed once Run watches the tree and has checked it

	mu      sync.Mutex
	current *templates.Set
	lastErr error

	// Owned by the goroutine running Run.
	goodFiles digest // the .cue files behind current; nil while unknown
	lastFiles digest // the .cue files seen by the last attempt; nil while unknown
	failing   bool   // the last reported attempt failed
	reported  string // the error text last reported
}

// New returns a Watcher serving initial until the content of dir
// changes. initial should be the set just loaded from dir; when it is nil,
// New loads dir itself and returns the load error if it does not load.
func New(dir string, initial *templates.Set, opts Options) (*Watcher, error) {
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if initial == nil {
		if initial, err = templates.LoadWith(root, opts.Schemas); err != nil {
			return nil, err
		}
	}
	if initial.Root != root {
		return nil, fmt.Errorf("templates: initial set was loaded from %s, not from %s", initial.Root, root)
	}
	info, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("reading templates directory: %w", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("templates directory %s is not a directory", root)
	}
	w := &Watcher{
		dir:      root,
		debounce: opts.Debounce,
		rescan:   opts.Rescan,
		onReload: opts.OnReload,
		schemas:  opts.Schemas,
		after:    time.After,
		ready:    make(chan struct{}),
		current:  initial,
	}
	if w.debounce <= 0 {
		w.debounce = DefaultDebounce
	}
	if w.rescan == 0 {
		w.rescan = DefaultRescan
	}
	return w, nil
}

// Current returns the last good set: the initial set until a reload succeeds.
// It is never nil.
func (w *Watcher) Current() *templates.Set {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.current
}

// LastError returns the error of the last reload attempt: nil once a reload
// succeeds (fixing the file clears it), and nil before the first attempt.
func (w *Watcher) LastError() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastErr
}

// Run watches the directory until ctx ends, then closes its fsnotify watcher
// and returns nil. On start it checks the directory once, so a change made
// between loading the initial set and Run is published too. It returns an
// error if the directory cannot be watched. Run may be called only once.
func (w *Watcher) Run(ctx context.Context) error {
	if !w.started.CompareAndSwap(false, true) {
		return errors.New("templates: Watcher.Run called more than once")
	}
	fsw, err := w.watch()
	if err != nil {
		return err
	}
	defer fsw.Close()
	w.check(time.Now(), w.refresh(fsw))
	close(w.ready)

	var rescan <-chan time.Time
	if w.rescan > 0 {
		ticker := time.NewTicker(w.rescan)
		defer ticker.Stop()
		rescan = ticker.C
	}
	b := &burst{debounce: w.debounce, after: w.after}
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-fsw.Events:
			if !ok {
				return errWatcherClosed
			}
			if !relevant(ev) || w.besideRoot(ev) {
				continue
			}
			if ev.Has(fsnotify.Create) {
				watchNew(fsw, ev.Name)
			}
			b.arm(nil)
		case _, ok := <-fsw.Errors:
			if !ok {
				return errWatcherClosed
			}
			// Events may have been lost (typically a queue overflow): a full
			// reload after the debounce recovers them.
			b.arm(nil)
		case <-b.fire:
			w.settled(fsw, b)
		case <-rescan:
			w.rescanned(fsw, b)
		}
	}
}

var errWatcherClosed = errors.New("templates: fsnotify watcher closed unexpectedly")

// watch starts an fsnotify watcher on the directory.
func (w *Watcher) watch() (*fsnotify.Watcher, error) {
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watching templates directory: %w", err)
	}
	if err := fsw.Add(w.dir); err != nil {
		_ = fsw.Close()
		return nil, fmt.Errorf("watching templates directory: %w", err)
	}
	_ = fsw.Add(w.parent()) // a root that cannot be watched from above is left to the rescan
	return fsw, nil
}

// parent is the directory holding the root. It is watched too, so that the
// root itself being replaced (a symlink swapped to a new release directory,
// a directory renamed over it) is seen at once: the watch on the root
// follows the old directory.
func (w *Watcher) parent() string { return filepath.Dir(w.dir) }

// besideRoot reports an event of the parent directory about anything but
// the root.
func (w *Watcher) besideRoot(ev fsnotify.Event) bool {
	return filepath.Dir(ev.Name) == w.parent() && ev.Name != w.dir
}

// burst is Run's debounce: a reload is pending from the first trigger of a
// burst until the directory has been quiet for the debounce, or for at most
// maxBurst debounces.
type burst struct {
	debounce time.Duration
	after    func(time.Duration) <-chan time.Time

	fire   <-chan time.Time // fires the pending reload; nil when none is pending
	start  time.Time        // of the pending burst
	settle digest           // the scan that started a rescan burst; nil for an event burst
}

func (b *burst) pending() bool { return b.fire != nil }

// arm starts a burst or extends the pending one. settle is the scan that
// noticed a change when the rescan starts the burst, nil for events.
func (b *burst) arm(settle digest) {
	now := time.Now()
	if !b.pending() {
		b.start = now
	}
	b.settle = settle
	d := b.debounce
	if limit := b.start.Add(maxBurst * b.debounce).Sub(now); limit < d {
		d = limit
	}
	b.fire = b.after(d)
}

// changing reports whether a burst the rescan started has not settled yet:
// files, scanned now, differ from the previous scan without any event, and
// the burst has time left.
func (b *burst) changing(files digest) bool {
	return b.settle != nil && files != nil && !maps.Equal(files, b.settle) &&
		time.Since(b.start) < maxBurst*b.debounce
}

// settled runs when the debounce fires: it reloads the directory, unless the
// burst is still changing.
func (w *Watcher) settled(fsw *fsnotify.Watcher, b *burst) {
	b.fire = nil
	files := w.refresh(fsw)
	if b.changing(files) {
		b.settle, b.fire = files, b.after(b.debounce)
		return
	}
	b.settle = nil
	w.check(b.start, files)
}

// rescanned runs on the periodic rescan: a change it finds starts a burst,
// loaded once the content has settled, as for events (the rescan may have
// caught a file halfway through being written).
func (w *Watcher) rescanned(fsw *fsnotify.Watcher, b *burst) {
	if b.pending() {
		return // the debounced reload is about to run
	}
	files := w.refresh(fsw)
	if w.unchanged(files) {
		return
	}
	b.arm(files)
}

// refresh scans the directory, brings the watches up to date and returns the
// digest of its .cue files, nil if the directory cannot be read.
func (w *Watcher) refresh(fsw *fsnotify.Watcher) digest {
	dirs, files, err := scan(w.dir)
	if err != nil {
		_ = fsw.Add(w.dir) // the directory may be back; Load reports the error otherwise
		return nil
	}
	syncWatches(fsw, append(dirs, w.parent()))
	return files
}

// unchanged reports whether files, the current digest, shows nothing new
// since the last reload attempt, which succeeded.
func (w *Watcher) unchanged(files digest) bool {
	return files != nil && !w.failing && w.lastFiles != nil && maps.Equal(files, w.lastFiles)
}

// check runs one reload attempt on the content described by files (nil when
// unknown): it loads the directory unless nothing has changed since the last
// successful attempt, and publishes what changed.
func (w *Watcher) check(start time.Time, files digest) {
	if w.unchanged(files) {
		return
	}
	w.lastFiles = files

	set, err := templates.LoadWith(w.dir, w.schemas)
	ev := ReloadEvent{Duration: time.Since(start)}
	if err != nil {
		w.mu.Lock()
		w.lastErr = err
		w.mu.Unlock()
		if w.failing && err.Error() == w.reported {
			return
		}
		w.failing, w.reported = true, err.Error()
		ev.Err = err
		ev.Changed = changedFiles(w.goodFiles, files)
		slices.Sort(ev.Changed)
		ev.Changed = slices.Compact(ev.Changed)
		w.notify(ev)
		return
	}

	cleared := w.failing
	w.failing, w.reported = false, ""
	w.mu.Lock()
	cur := w.current
	changed := slices.Concat(changedTemplates(cur, set), changedFiles(w.goodFiles, files))
	slices.Sort(changed)
	changed = slices.Compact(changed)
	if len(changed) > 0 {
		w.current = set
	}
	w.lastErr = nil
	w.mu.Unlock()
	w.goodFiles = files
	if len(changed) == 0 {
		if cleared {
			ev.Set = cur
			w.notify(ev)
		}
		return
	}
	ev.Set, ev.Changed = set, changed
	w.notify(ev)
}

func (w *Watcher) notify(ev ReloadEvent) {
	if w.onReload != nil {
		w.onReload(ev)
	}
}

// relevant reports whether an event can change what Load reads. Chmod alone
// cannot, nor can hidden files (editor swap files, lock files), except the
// ".."-prefixed entries of a ConfigMap volume, whose swap renames "..data".
func relevant(ev fsnotify.Event) bool {
	if ev.Op&(fsnotify.Create|fsnotify.Write|fsnotify.Remove|fsnotify.Rename) == 0 {
		return false
	}
	base := filepath.Base(ev.Name)
	return !strings.HasPrefix(base, ".") || strings.HasPrefix(base, "..")
}

// watchNew watches a directory created under a watched one, and its
// subdirectories, right away: files written into it before the debounced
// reload are read by that reload, files written later raise events.
func watchNew(fsw *fsnotify.Watcher, path string) {
	if strings.HasPrefix(filepath.Base(path), ".") {
		return
	}
	if info, err := os.Stat(path); err != nil || !info.IsDir() {
		return
	}
	_ = walk(path, map[string]bool{}, func(dir string) { _ = fsw.Add(dir) }, nil)
}

// syncWatches watches every directory of dirs and stops watching the others.
// Adding an already watched path is cheap, and re-targets the watch when the
// path now resolves to another directory (a swapped symlink).
func syncWatches(fsw *fsnotify.Watcher, dirs []string) {
	want := make(map[string]bool, len(dirs))
	for _, d := range dirs {
		want[d] = true
		_ = fsw.Add(d) // a directory that cannot be watched is left to the rescan
	}
	for _, p := range fsw.WatchList() {
		if !want[p] {
			_ = fsw.Remove(p)
		}
	}
}

// digest maps the path of every .cue file, relative to the templates
// directory, to the hash of its content.
type digest map[string][sha256.Size]byte

// scan walks the templates directory and returns the directories to watch and
// a digest of its .cue files. It fails only if root cannot be read.
func scan(root string) ([]string, digest, error) {
	var dirs []string
	files := digest{}
	// What Load skips (the test cases, "_"-prefixed entries) is neither
	// watched nor part of the digest: an edit there reloads nothing.
	ignored := func(path string) bool {
		r := rel(root, path)
		return r != "." && templates.Skipped(strings.SplitN(filepath.ToSlash(r), "/", 2)[0])
	}
	err := walk(root, map[string]bool{},
		func(dir string) {
			if !ignored(dir) {
				dirs = append(dirs, dir)
			}
		},
		func(file string) {
			if strings.HasSuffix(file, ".cue") && !ignored(file) {
				// A file removed mid-walk raises its own event.
				if b, err := os.ReadFile(file); err == nil {
					files[rel(root, file)] = sha256.Sum256(b)
				}
			}
		})
	if err != nil {
		return nil, nil, err
	}
	return dirs, files, nil
}

// walk calls onDir for dir and every non-hidden directory below it, and
// onFile (when not nil) for every non-hidden regular file, following symlinks
// and visiting each real directory once. It fails only if dir cannot be read.
func walk(dir string, seen map[string]bool, onDir, onFile func(string)) error {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return err
	}
	if seen[real] {
		return nil
	}
	seen[real] = true
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	onDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		mode := e.Type()
		if mode&fs.ModeSymlink != 0 {
			info, err := os.Stat(p)
			if err != nil {
				continue // dangling, for example mid-swap
			}
			mode = info.Mode()
		}
		switch {
		case mode.IsDir():
			_ = walk(p, seen, onDir, onFile) // an unreadable subdirectory fails the load instead
		case mode.IsRegular() && onFile != nil:
			onFile(p)
		}
	}
	return nil
}

// changedTemplates lists the template paths whose revision differs between
// two sets, or that only one of them has.
func changedTemplates(old, new *templates.Set) []string {
	hashes := map[string]string{}
	for _, t := range old.Templates() {
		hashes[t.Path] = t.Hash
	}
	var out []string
	for _, t := range new.Templates() {
		if h, ok := hashes[t.Path]; !ok || h != t.Hash {
			out = append(out, t.Path)
		}
		delete(hashes, t.Path)
	}
	for p := range hashes {
		out = append(out, p)
	}
	return out
}

// changedFiles lists the top-level entries (template paths, or "cue.mod")
// holding a .cue file that differs between two digests, nil when either is
// unknown.
func changedFiles(old, new digest) []string {
	if old == nil || new == nil {
		return nil
	}
	var out []string
	top := func(p string) string { return strings.SplitN(filepath.ToSlash(p), "/", 2)[0] }
	for p, h := range new {
		if oh, ok := old[p]; !ok || oh != h {
			out = append(out, top(p))
		}
	}
	for p := range old {
		if _, ok := new[p]; !ok {
			out = append(out, top(p))
		}
	}
	return out
}

// rel is path relative to root, or path when it is not below root.
func rel(root, path string) string {
	if r, err := filepath.Rel(root, path); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return path
}
