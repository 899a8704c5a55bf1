package render

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/evaluator"
	"github.com/cuengine/engine/templates"
)

// DefaultMaxOverrunning is how many evaluations past the timeout may run
// at once before an object whose evaluation overran before is refused: one
// per core of a small engine's two, which is what each of them holds.
// Twice it, no evaluation starts at all (Budget).
const DefaultMaxOverrunning = 2

// BudgetLimits are what the evaluations that overran may hold, engine-wide.
type BudgetLimits struct {
	// MaxOverrunning bounds the evaluations past the timeout still running
	// (CUE cannot be interrupted) beyond which an object whose evaluation
	// overran before is refused rather than evaluated; at twice it, every
	// object is. Zero is DefaultMaxOverrunning.
	MaxOverrunning int
	// MaxHeapBytes is the live heap beyond which an object whose
	// evaluation overran before is refused; a sixth above it, every object
	// is. Zero is three quarters of the Go memory limit (GOMEMLIMIT) when
	// one is set (so seven eighths of it for every object), and no bound
	// otherwise.
	MaxHeapBytes uint64
	// HardHeapBytes is the memory the engine holds (heldMemory: its
	// resident set) past which, while
	// evaluations past the timeout run, the engine exits
	// (Budget.WatchHeap, heapbar.go): CUE cannot stop them, a restart can,
	// and the restarted engine refuses them
	// (contract.AnnotationEvaluationOverran). Zero is seven eighths of the
	// Go memory limit (GOMEMLIMIT) when one is set, and no bar otherwise:
	// runaways grow by tens of MiB a second while the engine records them
	// and stops, and the container's limit must still be above that.
	HardHeapBytes uint64
}

// freshOverrunning is the evaluations past the timeout at which no
// evaluation starts, even of an object never seen to overrun.
func (l BudgetLimits) freshOverrunning() int { return 2 * l.MaxOverrunning }

// knownOverrunning is the evaluations past the timeout at which no
// evaluation starts, even of an object whose last evaluation ended within
// the limits.
func (l BudgetLimits) knownOverrunning() int { return 3 * l.MaxOverrunning }

// freshHeap is the live heap past which no evaluation starts; zero is no
// bound.
func (l BudgetLimits) freshHeap() uint64 { return l.MaxHeapBytes + l.MaxHeapBytes/6 }

// Budget is the engine's one memory of the objects whose inputs went over
// a limit, and its cap on what the evaluations that overran may hold.
// Every path that renders passes the same Budget (Options.Budget): the
// reconcile, the rollout's hold check, `engine diff`, `render` and `test`.
// So an object whose inputs (its UID and generation, or its content when
// it has no UID, with the template's hash) went over a limit on one path
// is not evaluated again on any path until they change.
//
// CUE cannot be interrupted: an evaluation past the timeout runs to its
// end in the background, allocating as it goes. An object that overran
// once is a suspect until it evaluates within the limits again: while the
// evaluations past the timeout engine-wide reach
// BudgetLimits.MaxOverrunning, or the live heap BudgetLimits.MaxHeapBytes,
// it is refused (contract.ReasonEvaluationBudgetExceeded)
// rather than evaluated, whatever template it runs. What the runaways hold
// is so bounded by the cap, not by how often the template changes.
//
// An object never seen to overrun may be a runaway too (fifty created at
// once are fifty evaluations past the timeout), so it has a bar of its
// own, higher: twice MaxOverrunning evaluations past the timeout, and a
// live heap a sixth over MaxHeapBytes. Past them no evaluation starts, and
// the objects refused are reconciled again later. The gap between the bars
// is what keeps healthy objects from starving behind known runaways: the
// suspects alone can never fill the second half of the cap (each is
// admitted only under the first), nor raise the heap past the second bar
// on their own while the first refuses them. A slot reserved for fresh
// inputs would serve them one at a time; a second bar serves every worker.
// Fresh runaways can fill the second bar too (fifty created at once); an
// object whose last evaluation ended within the limits (in this process)
// has a third, three times MaxOverrunning, so a healthy object's changes
// are still evaluated while new runaways are first seen. Evaluations
// admitted at once under a bar may all overrun: the count past the timeout
// is at most three times MaxOverrunning plus the evaluations that can run
// at once (the workers), less one.
//
// An object whose annotation contract.AnnotationEvaluationOverran names
// the template's hash and its generation is refused without evaluating, on
// every path: the engine writes it when an evaluation overruns (package
// reconciler), so a restarted engine, whose budget is new, does not
// evaluate the known runaways again. An annotation for another template or
// generation makes the object a suspect.
//
// A nil *Budget remembers nothing and refuses nothing.
type Budget struct {
	limits BudgetLimits
	pool   *evaluator.Pool // where the evaluations that may run away go (isolated.go); nil: none
	heap   func() uint64   // the live heap, in bytes; tests replace it
	held   func() uint64   // the memory the runtime holds, in bytes; tests replace it

	mu          sync.Mutex
	objects     map[budgetKey]*budgetEntry
	overrunning int
	// runs are the evaluations past the timeout still running, by object
	// (their count is overrunning); inflight the evaluations admitted and
	// not ended nor past the timeout yet (heapbar.go).
	runs     map[*Overrun]struct{}
	inflight int
	// halting: the hard heap bar was crossed with evaluations past the
	// timeout running; none starts any more (heapbar.go).
	halting bool
	// poke wakes WatchHeap when an admission finds the heap past the hard
	// bar.
	poke chan struct{}

	evaluated, remembered, refused atomic.Int64
}

// NewBudget returns an empty budget with the given limits.
func NewBudget(l BudgetLimits) *Budget {
	if l.MaxOverrunning <= 0 {
		l.MaxOverrunning = DefaultMaxOverrunning
	}
	if l.MaxHeapBytes == 0 {
		if limit := debug.SetMemoryLimit(-1); limit > 0 && limit < math.MaxInt64 {
			l.MaxHeapBytes = uint64(limit) / 4 * 3
		}
	}
	if l.HardHeapBytes == 0 {
		if limit := debug.SetMemoryLimit(-1); limit > 0 && limit < math.MaxInt64 {
			l.HardHeapBytes = uint64(limit) / 8 * 7
		}
	}
	return &Budget{limits: l, heap: liveHeap, held: heldMemory, objects: map[budgetKey]*budgetEntry{}, runs: map[*Overrun]struct{}{}, poke: make(chan struct{}, 1)}
}

// Limits returns the budget's limits, defaults filled in.
func (b *Budget) Limits() BudgetLimits { return b.limits }

// BudgetStats are a budget's counts, for tests and metrics.
type BudgetStats struct {
	// Evaluated counts the evaluations started.
	Evaluated int64
	// Remembered counts the renderings refused at once because the same
	// inputs went over a limit before.
	Remembered int64
	// Refused counts the renderings refused over the budget.
	Refused int64
	// Overrunning is the evaluations past the timeout still running.
	Overrunning int
	// Suspects is the objects whose evaluation overran and that have not
	// evaluated within the limits since.
	Suspects int
}

// Stats returns the budget's counts.
func (b *Budget) Stats() BudgetStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := BudgetStats{Evaluated: b.evaluated.Load(), Remembered: b.remembered.Load(), Refused: b.refused.Load(), Overrunning: b.overrunning}
	for _, e := range b.objects {
		if e.overran {
			s.Suspects++
		}
	}
	return s
}

// Forget drops what the budget knows of an object (on its deletion). An
// evaluation of it still running is still counted, engine-wide, until it
// ends.
func (b *Budget) Forget(gvkKind string, key types.NamespacedName) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.objects, budgetKey{kind: gvkKind, NamespacedName: key})
}

type budgetKey struct {
	kind string // contract.KindString of the object's kind
	types.NamespacedName
}

type budgetEntry struct {
	uid      types.UID
	inputs   string // the object's inputs: its generation, or its content's hash
	template string // the hash of the template err was met with
	err      error  // the limit those inputs went over; nil if none
	overran  bool   // an evaluation of the object ran past the timeout
	good     bool   // its last evaluation ended within the limits
	running  int    // its evaluations past the timeout still running
}

// budgetCall is one rendering's place in the budget.
type budgetCall struct {
	b        *Budget
	key      budgetKey
	uid      types.UID
	inputs   string
	template string
	// annotated: the object carries AnnotationEvaluationOverran; current:
	// for this template and generation.
	annotated, current bool
	// gvk and generation name the object in an Overrun.
	gvk        schema.GroupVersionKind
	generation int64
	// inflight: admitted, and neither ended nor past the timeout yet
	// (Budget.inflight counts it); b.mu guards it.
	inflight bool
}

// ended takes the call out of Budget.inflight, once; b.mu is held.
func (c *budgetCall) ended() {
	if c.inflight {
		c.inflight = false
		c.b.inflight--
	}
}

func (b *Budget) call(t *templates.Template, parent *unstructured.Unstructured) *budgetCall {
	if b == nil {
		return nil
	}
	c := &budgetCall{
		b:          b,
		key:        budgetKey{kind: contract.KindString(parent.GroupVersionKind()), NamespacedName: types.NamespacedName{Namespace: parent.GetNamespace(), Name: parent.GetName()}},
		uid:        parent.GetUID(),
		inputs:     inputsOf(parent),
		template:   t.Hash,
		gvk:        parent.GroupVersionKind(),
		generation: parent.GetGeneration(),
	}
	if v, ok := parent.GetAnnotations()[contract.AnnotationEvaluationOverran]; ok {
		c.annotated, c.current = true, v == contract.EvaluationOverranValue(t.Hash, parent.GetGeneration())
	}
	return c
}

// inputsOf identifies what the object gives the template: its generation,
// which the apiserver moves on every change of its spec; without a UID
// (an object read from a file), a hash of its content.
func inputsOf(parent *unstructured.Unstructured) string {
	if parent.GetUID() != "" {
		return strconv.FormatInt(parent.GetGeneration(), 10)
	}
	b, err := json.Marshal(parent.Object)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Remembered returns the limit the object's inputs went over with t, as
// Render would refuse them, or nil; it evaluates nothing.
func (b *Budget) Remembered(t *templates.Template, parent *unstructured.Unstructured) error {
	c := b.call(t, parent)
	if c == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if e := b.objects[c.key]; e != nil && e.uid == c.uid && e.err != nil && e.inputs == c.inputs && e.template == c.template {
		return e.err
	}
	return nil
}

// admit returns the error to refuse the rendering with, or nil to evaluate.
func (c *budgetCall) admit() error {
	if c == nil {
		return nil
	}
	b := c.b
	heap := b.heap() // read outside the lock: it is the runtime's
	held := b.held()
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.objects[c.key]
	if e != nil && e.uid != c.uid {
		delete(b.objects, c.key) // another object of the same name
		e = nil
	}
	if e != nil && e.err != nil && e.inputs == c.inputs && e.template == c.template {
		b.remembered.Add(1)
		metricEvaluationsRefused.WithLabelValues("remembered").Inc()
		return &rememberedError{e.err}
	}
	if c.current {
		b.remembered.Add(1)
		metricEvaluationsRefused.WithLabelValues("remembered").Inc()
		return &rememberedError{&Error{Reason: contract.ReasonEvaluationBudgetExceeded, Err: errOverranBefore}}
	}
	if c.annotated && e == nil {
		e = c.entry() // it overran with another template or generation
		e.overran = true
	}
	b.pokeOver(held)
	var err error
	switch {
	case b.halting:
		err = b.halted(held)
	case e != nil && e.overran:
		if err = b.overBudget(heap); err == nil {
			err = b.overFresh(heap)
		}
	case e != nil && e.good:
		err = b.overKnown(heap)
	default:
		err = b.overFresh(heap)
	}
	if err != nil && b.pool != nil && !b.halting {
		// The bars are on what evaluations past the timeout hold in the
		// engine's process; in an evaluator process one is stopped, so
		// with a pool no kind waits for others' runaways here.
		return errOverflow
	}
	if err != nil {
		b.refused.Add(1)
		metricEvaluationsRefused.WithLabelValues("budget").Inc()
		return err
	}
	b.evaluated.Add(1)
	b.inflight++
	c.inflight = true
	return nil
}

// errOverflow is admit's answer when the budget has no room in the
// engine's process for an evaluation but there is a pool: the evaluation
// goes to an evaluator process instead (Render), under the pool's shares
// of kinds and namespaces.
var errOverflow = errors.New("no room in the engine's process: evaluated in an evaluator process")

// errOverranBefore refuses an object whose AnnotationEvaluationOverran is
// current.
var errOverranBefore = errors.New("this object's evaluation ran past --evaluation-timeout before, with this template and this generation of its spec (annotation " +
	contract.AnnotationEvaluationOverran + "); it is not evaluated again until its spec or the template changes: change its spec, or remove the annotation to retry")

// OverranBefore reports whether Render refused because the object's
// contract.AnnotationEvaluationOverran says it overran with the same
// template and generation: only a change of either, or of the annotation,
// makes it evaluated again.
func OverranBefore(err error) bool { return errors.Is(err, errOverranBefore) }

// overFresh says why no object may be evaluated now, or nil; b.mu is held.
func (b *Budget) overFresh(heap uint64) error {
	switch {
	case b.overrunning >= b.limits.freshOverrunning():
		return &Error{Reason: contract.ReasonEvaluationBudgetExceeded, Err: &freshRefusal{fmt.Errorf(
			"%d evaluations that ran past --evaluation-timeout are still running, the most there may be (twice --max-overrunning-evaluations, %d); no evaluation starts until fewer run", b.overrunning, b.limits.MaxOverrunning)}}
	}
	return b.overHeap(heap)
}

// overHeap says why no object may be evaluated now, for the heap, or nil.
func (b *Budget) overHeap(heap uint64) error {
	if b.limits.MaxHeapBytes > 0 && heap > b.limits.freshHeap() {
		return &Error{Reason: contract.ReasonEvaluationBudgetExceeded, Err: &freshRefusal{fmt.Errorf(
			"the engine's live heap is %d MiB, over the %d MiB past which no evaluation starts (--max-evaluation-heap and a sixth); this object is evaluated once the heap is under it", heap>>20, b.limits.freshHeap()>>20)}}
	}
	return nil
}

// overKnown says why an object whose last evaluation ended within the
// limits may not be evaluated now, or nil; b.mu is held.
func (b *Budget) overKnown(heap uint64) error {
	if b.overrunning >= b.limits.knownOverrunning() {
		return &Error{Reason: contract.ReasonEvaluationBudgetExceeded, Err: &freshRefusal{fmt.Errorf(
			"%d evaluations that ran past --evaluation-timeout are still running, the most there may be even for an object that evaluated within the limits before (three times --max-overrunning-evaluations, %d); no evaluation starts until fewer run", b.overrunning, b.limits.MaxOverrunning)}}
	}
	return b.overHeap(heap)
}

// freshRefusal is a refusal of an object never seen to overrun.
type freshRefusal struct{ error }

func (e *freshRefusal) Unwrap() error { return e.error }

// RefusedFresh reports whether Render refused an object never seen to
// overrun, over the budget: most such objects are healthy, and are worth
// retrying sooner than the suspects.
func RefusedFresh(err error) bool {
	f := (*freshRefusal)(nil)
	return errors.As(err, &f)
}

// overBudget says why a suspect may not be evaluated now, or nil; b.mu is
// held.
func (b *Budget) overBudget(heap uint64) error {
	switch {
	case b.overrunning >= b.limits.MaxOverrunning:
		return &Error{Reason: contract.ReasonEvaluationBudgetExceeded, Err: fmt.Errorf(
			"%d evaluations that ran past --evaluation-timeout are still running (--max-overrunning-evaluations allows %d), and this object's evaluation ran past it before; it is evaluated again once fewer run", b.overrunning, b.limits.MaxOverrunning)}
	case b.limits.MaxHeapBytes > 0 && heap > b.limits.MaxHeapBytes:
		return &Error{Reason: contract.ReasonEvaluationBudgetExceeded, Err: fmt.Errorf(
			"the engine's live heap is %d MiB, over the %d MiB evaluations may reach (--max-evaluation-heap), and this object's evaluation ran past --evaluation-timeout before; it is evaluated again once the heap is under it", heap>>20, b.limits.MaxHeapBytes>>20)}
	}
	return nil
}

// overran records that the call's evaluation ran past the timeout and
// goes on; the returned func is called when it ends.
func (c *budgetCall) overran() (done func()) {
	if c == nil {
		return func() {}
	}
	b := c.b
	run := c.overrun()
	b.mu.Lock()
	e := c.entry()
	e.overran = true
	e.running++
	b.overrunning++
	c.ended()
	b.runs[run] = struct{}{}
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.overrunning--
		delete(b.runs, run)
		e.running--
		if b.objects[c.key] == e && e.running == 0 && !e.overran && !e.good {
			delete(b.objects, c.key) // it evaluated within the limits meanwhile
		}
	}
}

// done records how the rendering ended: over a limit (remembered with its
// inputs), or within them (the object is no suspect any more).
func (c *budgetCall) done(err error) {
	if c == nil {
		return
	}
	b := c.b
	b.mu.Lock()
	defer b.mu.Unlock()
	c.ended()
	var re *Error
	if errors.As(err, &re) && re.Reason != contract.ReasonEvaluationBudgetExceeded && re.Reason != contract.ReasonChildRefused {
		e := c.entry()
		e.inputs, e.template, e.err = c.inputs, c.template, err
		return
	}
	if err == nil {
		// Within the limits: no suspect, and one known to evaluate.
		e := c.entry()
		e.overran, e.err, e.good = false, nil, true
		return
	}
	e := b.objects[c.key]
	if e == nil || e.uid != c.uid {
		return
	}
	if e.running > 0 {
		// An earlier evaluation still runs: keep counting it.
		e.overran, e.err = false, nil
		return
	}
	delete(b.objects, c.key)
}

// entry returns the call's object's entry, made anew for another object of
// the same name; b.mu is held.
func (c *budgetCall) entry() *budgetEntry {
	e := c.b.objects[c.key]
	if e == nil || e.uid != c.uid {
		e = &budgetEntry{uid: c.uid}
		c.b.objects[c.key] = e
	}
	return e
}

// rememberedError is a limit the same inputs went over before.
type rememberedError struct{ err error }

func (e *rememberedError) Error() string { return e.err.Error() }
func (e *rememberedError) Unwrap() error { return e.err }

// Unevaluated reports whether Render refused without evaluating: the same
// inputs went over a limit before, or the object is over the budget.
func Unevaluated(err error) bool {
	if re := (*rememberedError)(nil); errors.As(err, &re) {
		return true
	}
	re := (*Error)(nil)
	return errors.As(err, &re) && re.Reason == contract.ReasonEvaluationBudgetExceeded
}

// heldMemory reads the memory the engine holds: its resident set, as the
// kernel counts it for the OOM killer (/proc/self/statm), else (not on
// Linux) what the Go runtime mapped less what it returned. Not the live
// heap, known only at the end of a collection: with fifty runaways
// allocating on a busy machine, the live heap read 227 MiB while the
// process's resident set was 1.4 GiB, and what the runtime said it held
// stayed at GOMEMLIMIT, 460 MiB (e2e TestRunawayParentsRestartedAtTheHardBar).
//
// It allocates nothing on Linux: a goroutine that allocates while the
// collector is behind is made to help it, and may wait for seconds, which
// the one that watches the hard bar cannot afford.
func heldMemory() uint64 {
	if held, ok := statm().Bytes(); ok {
		return held
	}
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 || s[1].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64() - s[1].Value.Uint64()
}

// statm reads the engine's own resident set, opened once.
var statm = sync.OnceValue(func() *evaluator.Resident { return evaluator.OpenResident("self") })

// liveHeap reads the heap the last garbage collection found live.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
