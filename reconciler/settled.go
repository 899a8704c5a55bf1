package reconciler

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/templates"
)

// deferredStatusDelay bounds how long a status write waits for the watch
// event of a child write.
const deferredStatusDelay = 10 * time.Second

// isSettled reports whether the parent's inputs are those of the last
// reconcile that found nothing to change: a resync or a repeated event then
// needs no evaluation and no write.
func (r *Reconciler) isSettled(t *templates.Template, parent *unstructured.Unstructured, owned render.OwnedChildren, refs *render.Observation, st *status) bool {
	key := types.NamespacedName{Namespace: parent.GetNamespace(), Name: parent.GetName()}
	var revision int64
	if st.revision != nil {
		revision = st.revision.Number
	}
	bound := ""
	if r.bound(t, parent) != nil {
		bound = r.kind.Template().Hash // its policy bounds the children
	}
	fp := fingerprint(t, bound, revision, parent, owned, refs)
	if last, ok := r.settled.Load(key); ok && last == fp {
		st.skip = true
		return true
	}
	st.onSettled = func() { r.settled.Store(key, fp) }
	return false
}

// settle ends a reconcile that went through every step. After child
// applies the status is left to the reconcile their watch events bring,
// which sees the result (the requeue is a safety net for a write the
// apiserver found to be a no-op, which sends no event). Deletes do not
// defer it: what was pruned is not part of the status, and a pruned object
// that lingers (a finalizer) must not hold the status back. A reconcile
// that changed nothing records its inputs as settled once its status is
// stored.
func (r *Reconciler) settle(eval *evaluation, applies, deletes int, resync time.Duration, st *status) ctrl.Result {
	switch {
	case applies > 0 && st.synced.ok():
		st.skip = true
		return ctrl.Result{RequeueAfter: deferredStatusDelay}
	case applies == 0 && deletes == 0 && st.synced.ok() && len(eval.result.Resources) == 0:
		st.onWritten = st.onSettled
	}
	return ctrl.Result{RequeueAfter: resync}
}

// fingerprint summarises everything an evaluation and its status depend
// on: the template's content and revision number (a revision renumbered
// changes only the status), the newest template's when its policy bounds
// the children (a pinned parent, bound.go), the parent's spec generation
// and metadata, and the identity and resource version of each existing
// child and of each referenced object.
func fingerprint(t *templates.Template, bound string, revision int64, parent *unstructured.Unstructured, existing render.OwnedChildren, refs *render.Observation) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%d\x00%d\x00%s\x00", t.Hash, bound, revision, parent.GetGeneration(), parent.GetUID())
	writeMap(h, parent.GetLabels())
	writeMap(h, parent.GetAnnotations())
	fmt.Fprintf(h, "%s\x00", strings.Join(parent.GetFinalizers(), ","))
	keys := make([]string, 0, len(existing))
	for _, c := range existing {
		keys = append(keys, fmt.Sprintf("%s/%s/%s/%s", c.GetObjectKind().GroupVersionKind(), c.GetNamespace(), c.GetName(), c.GetResourceVersion()))
	}
	slices.Sort(keys)
	fmt.Fprint(h, strings.Join(keys, "\x00"))
	if refs != nil {
		fmt.Fprintf(h, "\x01%s", strings.Join(refs.Versions, "\x00"))
	}
	return hex.EncodeToString(h.Sum(nil))
}

func writeMap(w io.Writer, m map[string]string) {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(w, "%s=%s\x00", k, m[k])
	}
	fmt.Fprint(w, "\x01")
}
