package rollout

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/revisions"
	"github.com/cuengine/engine/templates"
)

// How often the leader looks at a kind's rollout: often while parents are
// moving, rarely once it is over (to notice a user's undo).
const (
	rolloutTickActive = time.Second
	rolloutTickIdle   = 5 * time.Second
)

// loadedRevision is a stored revision with its compiled template.
type loadedRevision struct {
	revisions.Revision
	tpl *templates.Template
}

// Rollout is a kind's revisions and the progress of the newest one, kept by
// the leader. The ControllerRevisions are the record (package revisions); this
// is the leader's working copy, rebuilt from them and from the parents'
// status.templateRevision when a leader starts.
//
// The working copy belongs to the coordinator: init, then run, on one
// goroutine at a time (kindController.run starts and stops them in turn),
// with no lock, since every step lists, evaluates and writes. What the
// rest of the engine reads (templateFor in every reconcile, status on every
// /readyz) is a view the coordinator publishes after each change and
// before anything it does makes a parent reconcile: reading it never waits
// behind a step, and a step never waits for a reader.
type Rollout struct {
	kind  Kind
	gvk   schema.GroupVersionKind
	store *revisions.Store
	// historyLimit is how many revisions prune keeps besides those in use.
	historyLimit int
	// hold is what the hold check evaluates with (hold.go).
	hold Hold

	// revs are the stored revisions, by hash.
	revs map[string]*loadedRevision
	// target is the revision of the files; stable the newest complete one,
	// where parents that have not moved stay.
	target, stable *loadedRevision
	// moving holds the parents this leader sent to the target: when, and
	// whether they were failing before (gate.go).
	moving map[types.UID]move
	// followed is the target's phase when this replica last followed it.
	followed revisions.Phase

	// view is the published copy: never changed once stored.
	view atomic.Pointer[rolloutView]
	wake chan struct{}

	// requeue is the running fleet-wide requeue (requeueAll), if any.
	requeue *requeue

	// analyzer runs the analysis checks (soak.go); nil: no Prometheus.
	analyzer Analyzer
	// soaking is the target's wave's analysis, as last run.
	soaking soakState
}

// requeue is one fleet-wide requeue: stop cancels it, done is closed when
// it has returned.
type requeue struct {
	stop context.CancelFunc
	done chan struct{}
}

// Kind is what a rollout needs of its kind's controller.
type Kind interface {
	// Template is the files' template of the kind.
	Template() *templates.Template
	// Fleet lists every parent of the kind (under sharding, every shard's).
	Fleet(ctx context.Context) ([]unstructured.Unstructured, error)
	// Children lists a parent's live children wherever they are cached.
	Children(ctx context.Context, parent *unstructured.Unstructured) ([]client.Object, error)
	// Enqueue queues a parent for a reconcile without waiting.
	Enqueue(parent *unstructured.Unstructured)
	// RequeueAll queues every parent of the kind, rate-limited.
	RequeueAll(ctx context.Context)
	// Event records an event on an object.
	Event(obj runtime.Object, eventtype, reason, note string, args ...any)
	// Sharded: parents are reconciled by several replicas.
	Sharded() bool
	// Coordinates: this replica coordinates the kind's rollouts.
	Coordinates() bool
}

// rolloutView is what reconciles and readiness read of a rollout.
type rolloutView struct {
	// byHash holds copies of the stored revisions; target and stable are
	// among them.
	byHash         map[string]*loadedRevision
	target, stable *loadedRevision
	moving         map[types.UID]bool
	// held describes a held target for readiness; empty otherwise.
	held string
}

func New(kind Kind, gvk schema.GroupVersionKind, store *revisions.Store, historyLimit int, hold Hold) *Rollout {
	return &Rollout{kind: kind, gvk: gvk, store: store, historyLimit: historyLimit, hold: hold,
		revs: map[string]*loadedRevision{}, moving: map[types.UID]move{}, wake: make(chan struct{}, 1)}
}

// publish stores a copy of the working state as the view.
func (ro *Rollout) publish() {
	v := &rolloutView{byHash: make(map[string]*loadedRevision, len(ro.revs)), moving: make(map[types.UID]bool, len(ro.moving))}
	for hash, r := range ro.revs {
		c := *r
		v.byHash[hash] = &c
		if r == ro.target {
			v.target = &c
		}
		if r == ro.stable {
			v.stable = &c
		}
	}
	for uid := range ro.moving {
		v.moving[uid] = true
	}
	if t := ro.target; t != nil && t.Phase == revisions.PhaseHeld && ro.kind.Coordinates() {
		v.held = fmt.Sprintf("revision %d held: %s", t.Number, t.Message)
	}
	ro.view.Store(v)
}

// Poke makes the coordinator look at the kind at once.
func (ro *Rollout) Poke() {
	select {
	case ro.wake <- struct{}{}:
	default:
	}
}

// TemplateFor returns the template a parent is reconciled with and the
// revision it is (see templateFor); the revision is the view's copy, never
// changed once returned.
func (ro *Rollout) TemplateFor(parent *unstructured.Unstructured) (*templates.Template, *revisions.Revision, error) {
	rev, err := ro.templateFor(parent)
	if err != nil {
		return nil, nil, err
	}
	return rev.tpl, &rev.Revision, nil
}

// templateFor returns the revision a parent is reconciled with: the one it
// is pinned to; else, while a revision rolls out, the target if the parent
// was moved to it (or is new and the rollout is past its first wave), and
// the revision it runs otherwise; once it is complete, the target.
func (ro *Rollout) templateFor(parent *unstructured.Unstructured) (*loadedRevision, error) {
	pin, err := contract.PinnedRevision(parent)
	if err != nil {
		return nil, &revisions.PinError{Err: err}
	}
	v := ro.view.Load()
	if v == nil || v.target == nil {
		return nil, fmt.Errorf("the revisions of %s are not loaded yet", contract.KindString(ro.gvk))
	}
	if pin > 0 {
		return ro.pinned(v, pin)
	}
	_, hash := contract.ParentRevision(parent)
	cur := v.byHash[hash]
	switch v.target.Phase {
	case revisions.PhaseComplete:
		return v.target, nil
	case revisions.PhaseProgressing:
		if v.moving[parent.GetUID()] || cur == v.target || movedTo(parent) == v.target.Hash {
			return v.target, nil
		}
		if cur == nil && v.target.Wave > 0 {
			return v.target, nil // a new parent, once the canaries passed
		}
	}
	if cur == nil || cur.Phase == revisions.PhaseRolledBack {
		return v.stable, nil
	}
	return cur, nil // where it is, until the rollout reaches it
}

// pinned returns the revision a parent is pinned to, if the newest
// template's rollout policy lets the pin be followed
// (revisions.PinRefused); a RevisionNotFound error saying why otherwise.
func (ro *Rollout) pinned(v *rolloutView, pin int64) (*loadedRevision, error) {
	for _, r := range v.byHash {
		if r.Number != pin {
			continue
		}
		if err := revisions.PinRefused(v.target.tpl.Rollout.Pins, v.target.Number, r.Revision); err != nil {
			return nil, &revisions.PinError{Err: fmt.Errorf(
				"the object is pinned (%s) to revision %d, which the engine does not run: %w", contract.AnnotationTemplateRevision, pin, err)}
		}
		return r, nil
	}
	return nil, &revisions.PinError{Err: fmt.Errorf(
		"the object is pinned (%s) to revision %d, which is not stored; `engine rollout history %s` lists the revisions", contract.AnnotationTemplateRevision, pin, ro.gvk.Kind)}
}

// Init loads the kind's stored revisions and records the files' template
// as the target. It runs before the kind's controller starts, so that no
// parent is reconciled with a revision it is not on.
func (ro *Rollout) Init(ctx context.Context) error {
	if !ro.kind.Coordinates() {
		// Under sharding, on a replica that is not the sharder: the
		// revisions are those the sharder stored; wait for the first.
		return wait.PollUntilContextCancel(ctx, rolloutTickActive, true, func(ctx context.Context) (bool, error) {
			if ro.kind.Coordinates() {
				return true, ro.Init(ctx)
			}
			_, err := ro.follow(ctx)
			if errors.Is(err, errNoRevision) {
				return false, nil
			}
			return err == nil, err
		})
	}
	crs, err := ro.store.List(ctx)
	if err != nil {
		return err
	}
	defer ro.publish()
	for i := range crs {
		rev := revisions.RevisionOf(&crs[i])
		if _, ok := ro.revs[rev.Hash]; ok {
			continue
		}
		t, err := ro.store.Load(&crs[i])
		if err != nil {
			// An old revision this engine cannot compile (written by a
			// newer engine, say): parents on it move to the stable one.
			log.FromContext(ctx).Error(err, "cannot load a stored revision; its parents move to the stable revision", "kind", contract.KindString(ro.gvk))
			continue
		}
		ro.revs[rev.Hash] = &loadedRevision{Revision: rev, tpl: t}
	}
	return ro.retargetAmong(ctx, ro.kind.Template(), crs)
}

// retarget makes the files' template the target, recording it as a new
// revision if it is new. The previous target, if it was still rolling out,
// is superseded.
func (ro *Rollout) retarget(ctx context.Context, t *templates.Template) error {
	if ro.target != nil && ro.target.Hash == t.Hash {
		return nil
	}
	crs, err := ro.store.List(ctx)
	if err != nil {
		return err
	}
	return ro.retargetAmong(ctx, t, crs)
}

// retargetAmong is retarget with the kind's stored revisions as just
// listed: Init has them already.
func (ro *Rollout) retargetAmong(ctx context.Context, t *templates.Template, crs []appsv1.ControllerRevision) error {
	if ro.target != nil && ro.target.Hash == t.Hash {
		return nil
	}
	// The kind's first revision is stored complete (nothing ran before it).
	rev, stored, err := ro.store.EnsureAmong(ctx, t, crs)
	if err != nil {
		return err
	}
	lr := ro.revs[rev.Hash]
	if lr == nil {
		lr = &loadedRevision{Revision: rev, tpl: t}
		ro.revs[rev.Hash] = lr
	}
	lr.Revision = rev
	// Any other revision still on its way (the previous target, or one a
	// previous leader was rolling out when the files changed) is over.
	for _, old := range ro.revs {
		if old == lr || (old.Phase != revisions.PhasePending && old.Phase != revisions.PhaseHeld && old.Phase != revisions.PhaseProgressing) {
			continue
		}
		old.Phase, old.Message = revisions.PhaseSuperseded, fmt.Sprintf("superseded by revision %d", lr.Number)
		old.SoakSince = time.Time{} // were it rolled out again, its soak starts over
		if err := ro.store.Record(ctx, old.Revision); err != nil {
			return err
		}
	}
	ro.target = lr
	ro.soaking = soakState{}
	clear(ro.moving)
	ro.restable()
	log.FromContext(ctx).Info("template revision", "kind", contract.KindString(ro.gvk), "revision", lr.Number, "hash", lr.Hash, "phase", lr.Phase)
	if stored > ro.historyLimit { // within the limit, pruning would list and delete nothing
		ro.prune(ctx)
	}
	return nil
}

// restable makes the newest complete revision the stable one: where
// parents that have not moved stay, and new ones start. Once the target is
// rolled back, it is where the target's parents go, the revision an undo
// returns to (revisions.UndoTarget): the same unless none is complete, and
// the same whether this leader rolled it back, a restarted one reads it,
// or a shard follows it.
func (ro *Rollout) restable() {
	if ro.target.Phase == revisions.PhaseRolledBack {
		ro.stable = ro.target // no other revision: its parents stay
		if to, ok := revisions.UndoTarget(ro.stored(), ro.target.Revision); ok {
			ro.stable = ro.revs[to.Hash]
		}
		return
	}
	ro.stable = nil
	for _, r := range ro.revs {
		if r.Phase == revisions.PhaseComplete && (ro.stable == nil || r.Number > ro.stable.Number) {
			ro.stable = r
		}
	}
	if ro.stable == nil {
		ro.stable = ro.target // none complete (revisions from before rollouts): the files
	}
}

// stored is the stored revisions, by number.
func (ro *Rollout) stored() []revisions.Revision {
	out := make([]revisions.Revision, 0, len(ro.revs))
	for _, r := range ro.revs {
		out = append(out, r.Revision)
	}
	slices.SortFunc(out, func(a, b revisions.Revision) int { return cmp.Compare(a.Number, b.Number) })
	return out
}

// prune deletes revisions beyond the history limit that no parent runs or
// is pinned to. A pin keeps its revision only while the engine follows it
// (revisions.PinRefused): the history pins keep alive is bounded by the
// rollout policy's pins.
func (ro *Rollout) prune(ctx context.Context) {
	parents, err := ro.kind.Fleet(ctx)
	if err != nil {
		log.FromContext(ctx).Error(err, "not pruning old revisions")
		return
	}
	used := map[string]bool{ro.target.Hash: true, ro.stable.Hash: true}
	pinned := map[int64]bool{}
	for i := range parents {
		if n, _ := contract.PinnedRevision(&parents[i]); n > 0 {
			pinned[n] = true // not the revision it ran: that one only if the pin is followed
			continue
		}
		_, hash := contract.ParentRevision(&parents[i])
		used[hash] = true
	}
	keep := func(r revisions.Revision) bool {
		return used[r.Hash] || (pinned[r.Number] && revisions.PinRefused(ro.target.tpl.Rollout.Pins, ro.target.Number, r) == nil)
	}
	err = ro.store.Prune(ctx, ro.historyLimit, keep)
	if err != nil {
		log.FromContext(ctx).Error(err, "pruning old revisions")
	}
}

// Run is the kind's rollout coordinator: it moves parents to the target
// revision as its policy says, until the kind's controller stops. Under
// sharding only the sharder coordinates; the other replicas follow.
func (ro *Rollout) Run(ctx context.Context) {
	defer ro.stopRequeue()
	for {
		step := ro.step
		if !ro.kind.Coordinates() {
			step = ro.follow
		}
		next, err := step(ctx)
		if err != nil && ctx.Err() == nil {
			log.FromContext(ctx).Error(err, "rollout step failed; retrying", "kind", contract.KindString(ro.gvk))
			next = rolloutTickIdle
		}
		select {
		case <-ctx.Done():
			return
		case <-ro.wake:
		case <-time.After(next):
		}
	}
}

// requeueAll queues every parent of the kind in the background, one
// fleet-wide requeue at a time: a new one cancels the running one (its
// list covers the same parents, newer) and starts once it has returned.
// Only the goroutine of Run calls it; Run waits for the last.
func (ro *Rollout) requeueAll(ctx context.Context) {
	ro.stopRequeue()
	ctx, stop := context.WithCancel(ctx)
	r := &requeue{stop: stop, done: make(chan struct{})}
	ro.requeue = r
	go func() {
		defer close(r.done)
		defer stop()
		ro.kind.RequeueAll(ctx)
	}()
}

// stopRequeue cancels the running fleet-wide requeue and waits for it.
func (ro *Rollout) stopRequeue() {
	if r := ro.requeue; r != nil {
		r.stop()
		<-r.done
		ro.requeue = nil
	}
}
