package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/reconciler"
	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/rollout"
	"github.com/cuengine/engine/templates"
	"github.com/cuengine/engine/templates/watch"
)

// maxInvalidParents bounds how many failing parents a refused reload names.
const maxInvalidParents = 5

// Reload applies one event of the templates watcher. A good set replaces the
// running one (after its CRDs are installed, with --install-crds, and after
// checking that every live parent of a changed kind still satisfies the
// new schema); anything else keeps the last good version serving and makes
// the failure visible: an error log with positions, metrics, the readiness
// check, and a Warning event on the parents of the affected kinds.
func (e *Engine) Reload(ctx context.Context, ev watch.ReloadEvent) {
	if e.reload(ctx, ev) {
		e.wakeServed()
	}
}

// wakeServed tells the served-set notifier (servedNotifier) that the
// served set changed.
func (e *Engine) wakeServed() {
	select {
	case e.servedWake <- struct{}{}:
	default:
	}
}

// Served is the set the engine serves: the last one Reload (or a retry)
// accepted, or the first one.
func (e *Engine) Served() *templates.Set {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.set
}

// servedNotifier calls Options.OnServed with the served set each time it
// changes, on every replica, from one goroutine: the calls come in order
// and each hands the newest set, so a slow call never leaves an older set
// in place. The manager starts it and waits for it.
type servedNotifier struct{ e *Engine }

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (servedNotifier) NeedLeaderElection() bool { return false }

// Start implements manager.Runnable.
func (n servedNotifier) Start(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-n.e.servedWake:
		}
		if set := n.e.Served(); set != nil {
			n.e.opts.OnServed(ctx, set)
		}
	}
}

// reload is Reload under acceptMu; it reports whether ev's set is now
// the served one.
func (e *Engine) reload(ctx context.Context, ev watch.ReloadEvent) bool {
	logger := log.FromContext(ctx)
	e.acceptMu.Lock()
	defer e.acceptMu.Unlock()
	e.mu.Lock()
	e.reloadGen++
	gen := e.reloadGen
	e.mu.Unlock()
	err := ev.Err
	if err == nil {
		if err = e.accept(ctx, ev.Set); err != nil {
			// The files are fine but the cluster refused them (live
			// objects the new schema rejects, a CRD change): the watcher
			// will not send them again, so the retry worker retries until
			// they pass or a newer edit replaces them.
			e.queueRetry(gen, ev)
		}
	}
	if err != nil {
		metricReloads.WithLabelValues("failure").Inc()
		metricReloadHealthy.Set(0)
		logger.Error(err, "template reload refused; the last good templates keep serving", "changed", ev.Changed)
		e.reportReloadFailure(ctx, err)
		return false
	}
	metricReloads.WithLabelValues("success").Inc()
	metricReloadHealthy.Set(1)
	metricReloadSeconds.Observe(ev.Duration.Seconds())
	e.setReloadErr(nil)
	logger.Info("templates reloaded", "changed", ev.Changed, "seconds", ev.Duration.Seconds())
	for _, u := range ev.Set.Unchecked() {
		logger.Info("child kind has no schema; its children are not checked", "template", u.Template, "child", u.Child, "kind", u.Kind.String())
	}
	return true
}

// refusedSet is a template set the cluster refused, to retry.
type refusedSet struct {
	gen uint64
	ev  watch.ReloadEvent
}

// queueRetry hands a refused set to the retry worker (retryRefused); a
// newer one replaces it.
func (e *Engine) queueRetry(gen uint64, ev watch.ReloadEvent) {
	e.mu.Lock()
	e.refused = &refusedSet{gen: gen, ev: ev}
	e.mu.Unlock()
	select {
	case e.retryWake <- struct{}{}:
	default:
	}
}

// retryRefused is the worker that retries the newest refused set with
// backoff while it is the latest reload; a newer refused set starts the
// backoff again. It runs while the engine does, and Start waits for it.
func (e *Engine) retryRefused(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.retryWake:
		}
		for delay := 2 * time.Second; ; delay = min(2*delay, time.Minute) {
			timer := time.NewTimer(delay)
			select {
			case <-ctx.Done():
				timer.Stop()
				return
			case <-e.retryWake: // a newer refused set: back off from the start
				timer.Stop()
				delay = time.Second
				continue
			case <-timer.C:
			}
			e.mu.Lock()
			r := e.refused
			e.mu.Unlock()
			if r == nil {
				break
			}
			if done, _ := e.retryOnce(ctx, r.gen, r.ev); done {
				e.mu.Lock()
				if e.refused == r {
					e.refused = nil
				}
				e.mu.Unlock()
				e.wakeServed()
				break
			}
		}
	}
}

// retryOnce makes one retry and reports whether retrying is over: the set
// was accepted, or a newer reload superseded it.
func (e *Engine) retryOnce(ctx context.Context, gen uint64, ev watch.ReloadEvent) (bool, error) {
	e.acceptMu.Lock()
	defer e.acceptMu.Unlock()
	e.mu.Lock()
	latest := e.reloadGen == gen
	e.mu.Unlock()
	if !latest {
		return true, nil
	}
	if err := e.accept(ctx, ev.Set); err != nil {
		e.reportReloadFailure(ctx, err)
		return false, err
	}
	metricReloads.WithLabelValues("success").Inc()
	metricReloadHealthy.Set(1)
	e.setReloadErr(nil)
	log.FromContext(ctx).Info("templates reloaded after a retry", "changed", ev.Changed)
	return true, nil
}

// accept checks a new set against the cluster and swaps it in.
func (e *Engine) accept(ctx context.Context, set *templates.Set) error {
	if err := e.checkLiveParents(ctx, set); err != nil {
		return err
	}
	if e.opts.InstallCRDs && e.isLeader() && e.coordinates() {
		if err := InstallCRDs(ctx, e.writer, e.apiReader, set, e.opts.ForceCRDChanges, e.opts.ConversionWebhook, e.migrationNote); err != nil {
			return err
		}
	}
	e.SetTemplates(set)
	e.kickMigrations() // a storage version may have moved (migrate.go)
	return nil
}

// checkLiveParents refuses a schema change that live parents of the kind no
// longer satisfy: serving it would turn every one of them InvalidSpec.
func (e *Engine) checkLiveParents(ctx context.Context, set *templates.Set) error {
	var problems []string
	for _, t := range set.Templates() {
		kc := e.kind(t.GVK)
		if kc == nil || kc.Template().Hash == t.Hash || !kc.isRunning() {
			continue
		}
		parents, err := e.listParents(ctx, t.GVK)
		if err != nil {
			return err
		}
		// The cache lists in no fixed order: sort, so the same refusal
		// reads the same and is reported once (reportReloadFailure).
		slices.SortFunc(parents, func(a, b unstructured.Unstructured) int {
			return cmp.Or(strings.Compare(a.GetNamespace(), b.GetNamespace()), strings.Compare(a.GetName(), b.GetName()))
		})
		bad := 0
		for i := range parents {
			if reconciler.UnconvertibleVersion(&parents[i]) != "" {
				continue // not read in the hub at all: Stalled on its own (storedversion.go)
			}
			// Validating a parent evaluates the template for it. For a
			// template that may run away, with evaluator processes, it is
			// bounded as an evaluation is, in a process, so that a runaway
			// parent cannot hold the reload of every kind; one that cannot
			// be checked within the limit does not refuse the set (its
			// own reconcile reports it). In process it runs to its end: a
			// check left running past a timeout would hold its memory,
			// uncounted by the budget, at every reload.
			var err error
			if pool := e.budget.Pool(); pool != nil && t.MayRunAway() {
				err = render.ValidateParent(t, &parents[i], e.opts.Limits, pool, nil, nil)
				if re := (*render.Error)(nil); errors.As(err, &re) {
					continue
				}
			} else {
				err = t.ValidateParent(&parents[i])
			}
			if err != nil {
				bad++
				if bad <= maxInvalidParents {
					problems = append(problems, fmt.Sprintf("%s %s/%s: %s", t.GVK.Kind, parents[i].GetNamespace(), parents[i].GetName(), templates.Summary(err, 1)))
				}
			}
		}
		if bad > maxInvalidParents {
			problems = append(problems, fmt.Sprintf("and %d more %s objects", bad-maxInvalidParents, t.GVK.Kind))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("the new schema rejects live objects (change them first, or relax the template): %s", strings.Join(problems, "; "))
	}
	return nil
}

func (e *Engine) kind(gvk schema.GroupVersionKind) *kindController {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.kinds[gvk]
}

func (e *Engine) isLeader() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ctx != nil
}

// listParents lists the parents of a kind from the cache.
func (e *Engine) listParents(ctx context.Context, gvk schema.GroupVersionKind) ([]unstructured.Unstructured, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	var opts []client.ListOption
	if e.opts.Namespace != "" {
		opts = append(opts, client.InNamespace(e.opts.Namespace))
	}
	if err := e.parents.List(ctx, list, opts...); err != nil {
		return nil, fmt.Errorf("listing %s: %w", gvk.Kind, err)
	}
	return list.Items, nil
}

// ReloadError returns why the templates on disk are not being served, or
// nil when they are.
func (e *Engine) ReloadError() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.reloadErr
}

func (e *Engine) setReloadErr(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.reloadErr = err
}

// reloadFailure is a reload failure to report on the parents of kinds.
type reloadFailure struct {
	msg   string
	kinds []schema.GroupVersionKind
}

// reportReloadFailure records the error and, once per distinct error,
// hands it to the one worker that puts a Warning event on every parent of
// the affected kinds (reportReloadFailures).
func (e *Engine) reportReloadFailure(_ context.Context, err error) {
	e.mu.Lock()
	same := e.reloadErr != nil && e.reloadErr.Error() == err.Error()
	e.reloadErr = err
	leader := e.ctx != nil
	e.mu.Unlock()
	if same || !leader {
		return
	}
	f := &reloadFailure{
		msg:   "the template on disk cannot be served, this object is reconciled with the last good version: " + templates.Summary(err, 3),
		kinds: e.affectedKinds(err),
	}
	e.mu.Lock()
	e.failure = f
	e.mu.Unlock()
	select {
	case e.failureWake <- struct{}{}:
	default:
	}
}

// reportReloadFailures is the worker that puts the Warning events of the
// reload failures on the parents, no faster than RequeueQPS. A newer
// failure replaces the one being reported (what the files say now is what
// the parents are told); the worker runs while the engine does, and Start
// waits for it.
func (e *Engine) reportReloadFailures(ctx context.Context) {
	limiter := rate.NewLimiter(rate.Limit(e.opts.RequeueQPS), 1)
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.failureWake:
		}
		for f := e.takeFailure(); f != nil && ctx.Err() == nil; f = e.takeFailure() {
			e.reportFailure(ctx, limiter, f)
		}
	}
}

// takeFailure returns the failure to report next and forgets it; nil when
// there is none.
func (e *Engine) takeFailure() *reloadFailure {
	e.mu.Lock()
	defer e.mu.Unlock()
	f := e.failure
	e.failure = nil
	return f
}

// reportFailure puts f's event on every parent of its kinds, until a
// newer failure comes.
func (e *Engine) reportFailure(ctx context.Context, limiter *rate.Limiter, f *reloadFailure) {
	newer := func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.failure != nil
	}
	for _, gvk := range f.kinds {
		parents, err := e.listParents(ctx, gvk)
		if err != nil {
			log.FromContext(ctx).Error(err, "cannot list parents to report the template reload failure on", "kind", contract.KindString(gvk))
			continue
		}
		for i := range parents {
			if newer() || limiter.Wait(ctx) != nil {
				return
			}
			e.recorder.Eventf(&parents[i], nil, corev1.EventTypeWarning, contract.ReasonTemplateReloadFailed, "Reload", "%s", reconciler.SafeMessage(f.msg))
		}
	}
}

// affectedKinds maps a reload error to the kinds whose templates failed;
// an error that names no template affects every kind.
func (e *Engine) affectedKinds(err error) []schema.GroupVersionKind {
	e.mu.Lock()
	defer e.mu.Unlock()
	paths := map[string]bool{}
	var le *templates.LoadError
	if errors.As(err, &le) {
		for _, te := range le.Errors {
			paths[te.Template] = true
		}
	}
	var held *rollout.HoldError
	if errors.As(err, &held) {
		for _, p := range held.Templates {
			paths[p] = true
		}
	}
	var out []schema.GroupVersionKind
	for gvk, kc := range e.kinds {
		if len(paths) == 0 || paths[kc.Template().Path] {
			out = append(out, gvk)
		}
	}
	return out
}
