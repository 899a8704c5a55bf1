package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cuengine/engine/templates"
)

// deferredStatusDelay bounds how long a status write waits for the watch
// event of a child write.
const deferredStatusDelay = 10 * time.Second

// reconciler reconciles the parents of one kind.
type reconciler struct {
	e  *Engine
	kc *kindController

	// settled holds, per parent, the fingerprint of the inputs of the
	// last reconcile that found nothing to change. The same inputs again
	// (a resync, a repeated event) need no evaluation and no writes.
	settled sync.Map
}

// Reconcile brings one parent's children, resources and status in line with
// its template. The steps, in order: deletion (before anything that needs
// the template), observe, evaluate, resources, children, prune; the status
// is written once, at the end, and only when it changed.
func (r *reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, err error) {
	parent, err := r.getParent(ctx, req.NamespacedName)
	if err != nil || parent == nil {
		if parent == nil && err == nil {
			r.settled.Delete(req.NamespacedName) // gone: forget it
		}
		return ctrl.Result{}, err
	}
	t := r.kc.template()
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("template", t.Path))
	if parent.GetDeletionTimestamp() != nil {
		r.settled.Delete(req.NamespacedName)
		return r.finalize(ctx, t, parent)
	}
	if r.kc.retired.Load() {
		return ctrl.Result{}, nil // the template is gone: children are left as they are
	}

	existing, err := r.observe(ctx, parent)
	if err != nil {
		return ctrl.Result{}, err
	}
	fp := fingerprint(t, parent, existing)
	if last, ok := r.settled.Load(req.NamespacedName); ok && last == fp {
		return ctrl.Result{}, nil
	}

	st := newStatusUpdate(parent)
	defer func() { result, err = r.writeStatus(ctx, parent, st, result, err) }()

	observed := observedState(existing)
	for name, state := range resourceState(parent) {
		observed[name] = state
	}
	out, desired, err := r.evaluate(t, parent, observed, st)
	if err != nil {
		return ctrl.Result{}, nil // nothing to retry until the parent or the template changes
	}

	res, recorded, err := r.reconcileResources(ctx, parent, out, needsFinalizer(desired), st)
	if err != nil || recorded {
		return res, err
	}
	if changed := resourceObservations(st); !sameObservations(observed, changed) {
		// A resource appeared or changed: let the template see it now, so
		// a child that depends on it is applied in this same reconcile.
		for name, state := range changed {
			observed[name] = state
		}
		if out, desired, err = r.evaluate(t, parent, observed, st); err != nil {
			return ctrl.Result{}, nil
		}
	}
	writes, err := r.applyChildren(ctx, parent, desired, existing, st)
	if err != nil {
		return ctrl.Result{}, err
	}
	deletes, err := r.prune(ctx, parent, desired, existing)
	if err != nil {
		return ctrl.Result{}, err
	}
	st.setReady(out, desired, existing)
	if writes+deletes > 0 && st.synced.ok() {
		// The watch event of what was just written brings a reconcile that
		// sees the result; its status is the one worth writing. (The
		// requeue is a safety net for a write the apiserver found to be a
		// no-op, which sends no event.)
		st.deferred = true
		return ctrl.Result{RequeueAfter: deferredStatusDelay}, nil
	}
	if writes == 0 && deletes == 0 && st.synced.ok() && len(out.Resources) == 0 {
		st.onWritten = func() { r.settled.Store(req.NamespacedName, fp) }
	}
	return res, nil
}

// evaluate runs the template and turns its children into the objects to
// apply. An evaluation error is recorded on the status and returned.
func (r *reconciler) evaluate(t *templates.Template, parent *unstructured.Unstructured, observed map[string]any, st *statusUpdate) (*templates.Result, []*unstructured.Unstructured, error) {
	start := time.Now()
	out, err := t.Evaluate(templates.Input{Parent: parent, Observed: observed})
	metricEvaluateSeconds.WithLabelValues(kindString(t.GVK)).Observe(time.Since(start).Seconds())
	if err != nil {
		st.templateFailed(err)
		return nil, nil, err
	}
	st.setTemplateStatus(out.Status)
	return out, r.desiredChildren(t, parent, out, st), nil
}

// resourceObservations returns the state of each resource observed in this
// reconcile.
func resourceObservations(st *statusUpdate) map[string]any {
	out := map[string]any{}
	for name, e := range st.resources {
		if e != nil && e["exists"] == true {
			if state, ok := e["state"].(map[string]any); ok {
				out[name] = state
			}
		}
	}
	return out
}

func sameObservations(observed, now map[string]any) bool {
	for name, state := range now {
		if !equality.Semantic.DeepEqual(observed[name], state) {
			return false
		}
	}
	return true
}

// getParent reads the parent from the cache; nil when it is gone.
func (r *reconciler) getParent(ctx context.Context, key types.NamespacedName) (*unstructured.Unstructured, error) {
	parent := &unstructured.Unstructured{}
	parent.SetGroupVersionKind(r.kc.gvk)
	if err := r.e.mgr.GetCache().Get(ctx, key, parent); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return parent, nil
}

// fingerprint summarises everything an evaluation depends on: the template
// revision, the parent's spec generation and metadata, and the identity and
// resource version of each existing child.
func fingerprint(t *templates.Template, parent *unstructured.Unstructured, existing []*unstructured.Unstructured) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%d\x00%s\x00", t.Hash, parent.GetGeneration(), parent.GetUID())
	writeMap(h, parent.GetLabels())
	writeMap(h, parent.GetAnnotations())
	fmt.Fprintf(h, "%s\x00", strings.Join(parent.GetFinalizers(), ","))
	keys := make([]string, 0, len(existing))
	for _, c := range existing {
		keys = append(keys, fmt.Sprintf("%s/%s/%s/%s", c.GroupVersionKind(), c.GetNamespace(), c.GetName(), c.GetResourceVersion()))
	}
	sort.Strings(keys)
	fmt.Fprint(h, strings.Join(keys, "\x00"))
	return hex.EncodeToString(h.Sum(nil))
}

func writeMap(w io.Writer, m map[string]string) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "%s=%s\x00", k, m[k])
	}
	fmt.Fprint(w, "\x01")
}
