package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/cuengine/engine/providers"
	"github.com/cuengine/engine/templates"
)

const (
	// annotationResourcePrefix + local name records an external resource on
	// the parent before it is created: the source of truth for its name.
	annotationResourcePrefix = "resources.engine.cuengine.dev/"
	// ReasonUnknownProvider: a template names a provider the engine lacks.
	ReasonUnknownProvider = "UnknownProvider"
	// maxNameAttempts bounds how many new names a NameConflict may try.
	maxNameAttempts = 5
	// providerCallTimeout bounds one provider call as a whole.
	providerCallTimeout = 2 * time.Minute
)

// resourceRecord is what the parent's annotation says of one resource.
type resourceRecord struct {
	Name           string            `json:"-"`
	Provider       string            `json:"provider"`
	ExternalName   string            `json:"externalName"`
	Attempt        int               `json:"attempt,omitempty"`
	Settings       map[string]string `json:"settings,omitempty"`
	DeletionPolicy string            `json:"deletionPolicy"`
}

// recordedResources reads every resource record of the parent, by name.
func recordedResources(parent *unstructured.Unstructured) ([]resourceRecord, error) {
	var out []resourceRecord
	for k, v := range parent.GetAnnotations() {
		name, ok := strings.CutPrefix(k, annotationResourcePrefix)
		if !ok {
			continue
		}
		var rec resourceRecord
		if err := json.Unmarshal([]byte(v), &rec); err != nil {
			return nil, fmt.Errorf("annotation %s: %w", k, err)
		}
		rec.Name = name
		out = append(out, rec)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func findRecord(records []resourceRecord, name string) *resourceRecord {
	for i := range records {
		if records[i].Name == name {
			return &records[i]
		}
	}
	return nil
}

// resourceState is the provider's last observation of each resource, as
// recorded in status.resources: what the template sees as observed.<name>.
func resourceState(parent *unstructured.Unstructured) map[string]any {
	res, _, _ := unstructured.NestedMap(parent.Object, "status", "resources")
	out := map[string]any{}
	for name, v := range res {
		if m, ok := v.(map[string]any); ok {
			if state, ok := m["state"].(map[string]any); ok && m["exists"] == true {
				out[name] = state
			}
		}
	}
	return out
}

// reconcileResources makes the external resources match the template. It
// first records (finalizer, external names) on the parent in one
// optimistic-locked write and returns; the next reconcile, seeing the
// record, calls the providers. A create therefore never happens before the
// name that identifies it is stored.
func (r *reconciler) reconcileResources(ctx context.Context, parent *unstructured.Unstructured, out *templates.Result, needFinalizer bool, st *statusUpdate) (ctrl.Result, bool, error) {
	records, err := recordedResources(parent)
	if err != nil {
		return ctrl.Result{}, false, err
	}
	if len(out.Resources) == 0 && len(records) == 0 && !needFinalizer {
		return ctrl.Result{}, false, nil
	}
	updated := parent.DeepCopy()
	changed := false
	if len(out.Resources) > 0 || needFinalizer {
		changed = controllerutil.AddFinalizer(updated, Finalizer)
	}
	for _, res := range out.Resources {
		p, ok := r.e.opts.Providers.Get(res.Provider)
		if !ok {
			st.syncFailed(ReasonUnknownProvider, fmt.Sprintf("resource %s: no provider %q (this engine has: %s)", res.Name, res.Provider, strings.Join(r.e.opts.Providers.Names(), ", ")))
			continue
		}
		rec := findRecord(records, res.Name)
		if rec != nil && rec.DeletionPolicy == res.DeletionPolicy {
			continue
		}
		next := resourceRecord{Provider: res.Provider, DeletionPolicy: res.DeletionPolicy}
		if rec != nil {
			next.ExternalName, next.Attempt, next.Settings = rec.ExternalName, rec.Attempt, rec.Settings
		} else {
			name, settings, err := p.ExternalName(providers.Request{Name: res.Name, Owner: ownerOf(parent), Spec: res.Spec}, 0)
			if err != nil {
				reason, _ := providers.Classify(err)
				st.syncFailed(reason, fmt.Sprintf("resource %s: %v", res.Name, err))
				continue
			}
			next.ExternalName, next.Settings = name, settings
		}
		setRecord(updated, res.Name, next)
		changed = true
	}
	if changed {
		return ctrl.Result{}, true, r.writeMetadata(ctx, parent, updated)
	}
	return r.applyResources(ctx, parent, out, records, st)
}

func setRecord(obj *unstructured.Unstructured, name string, rec resourceRecord) {
	b, _ := json.Marshal(rec)
	setAnnotation(obj, annotationResourcePrefix+name, string(b))
}

// writeMetadata writes the parent's finalizers and annotations with
// optimistic locking: a concurrent change makes it fail and retry, never
// overwrite.
func (r *reconciler) writeMetadata(ctx context.Context, parent, updated *unstructured.Unstructured) error {
	patch := client.MergeFromWithOptions(parent, client.MergeFromWithOptimisticLock{})
	if err := r.e.writer.Patch(ctx, updated, patch); err != nil {
		if apierrors.IsConflict(err) {
			return nil // the cache will bring the new version, and an event
		}
		return fmt.Errorf("recording resources on the parent: %w", err)
	}
	return nil
}

// applyResources calls each provider's Apply for the recorded resources and
// deletes (per policy) recorded resources the template no longer declares.
func (r *reconciler) applyResources(ctx context.Context, parent *unstructured.Unstructured, out *templates.Result, records []resourceRecord, st *statusUpdate) (ctrl.Result, bool, error) {
	result := ctrl.Result{RequeueAfter: jitter(r.e.opts.ResourceResync)}
	for _, res := range out.Resources {
		p, ok := r.e.opts.Providers.Get(res.Provider)
		rec := findRecord(records, res.Name)
		if !ok || rec == nil {
			continue
		}
		req := providers.Request{Name: res.Name, ExternalName: rec.ExternalName, Owner: ownerOf(parent), Spec: res.Spec, Settings: rec.Settings}
		callCtx, cancel := context.WithTimeout(ctx, providerCallTimeout)
		obs, err := p.Apply(callCtx, req)
		cancel()
		if err != nil {
			reason, retryable := providers.Classify(err)
			if reason == providers.ReasonNameConflict && rec.Attempt+1 < maxNameAttempts && !everCreated(parent, res.Name, rec.ExternalName) {
				// Someone else holds the name and we never had a resource
				// under it: move to the next name, recorded before the
				// next create. (Had we created it, the conflict means its
				// ownership mark was removed: a new name would leak it.)
				return ctrl.Result{}, true, r.nextName(ctx, parent, p, req, *rec)
			}
			st.syncFailed(reason, fmt.Sprintf("resource %s (%s): %v", res.Name, rec.ExternalName, err))
			if _, found, _ := unstructured.NestedMap(parent.Object, "status", "resources", res.Name); !found {
				// Mirror the recorded name; a known observation is kept.
				st.setResource(res.Name, rec, providers.Observation{}, false)
			}
			if retryable {
				result = ctrl.Result{Requeue: true}
			}
			continue
		}
		st.setResource(res.Name, rec, obs, true)
	}
	for _, rec := range records {
		if findResource(out.Resources, rec.Name) {
			continue
		}
		if err := r.removeResource(ctx, parent, rec, st); err != nil {
			return ctrl.Result{}, false, err
		}
	}
	return result, false, nil
}

// everCreated reports whether status.resources says the resource existed
// under this external name.
func everCreated(parent *unstructured.Unstructured, name, externalName string) bool {
	entry, _, _ := unstructured.NestedMap(parent.Object, "status", "resources", name)
	return entry["externalName"] == externalName && entry["exists"] == true
}

func findResource(list []templates.Resource, name string) bool {
	for _, r := range list {
		if r.Name == name {
			return true
		}
	}
	return false
}

// nextName records a new external name after a NameConflict.
func (r *reconciler) nextName(ctx context.Context, parent *unstructured.Unstructured, p providers.Provider, req providers.Request, rec resourceRecord) error {
	name, settings, err := p.ExternalName(req, rec.Attempt+1)
	if err != nil {
		return err
	}
	r.warn(parent, providers.ReasonNameConflict, "Create", "resource %s: name %s is taken by a bucket this parent does not own; moving to %s", req.Name, rec.ExternalName, name)
	rec.ExternalName, rec.Settings, rec.Attempt = name, settings, rec.Attempt+1
	updated := parent.DeepCopy()
	setRecord(updated, req.Name, rec)
	return r.writeMetadata(ctx, parent, updated)
}

// removeResource deletes (or orphans) a resource the template dropped, then
// forgets its record.
func (r *reconciler) removeResource(ctx context.Context, parent *unstructured.Unstructured, rec resourceRecord, st *statusUpdate) error {
	if rec.DeletionPolicy != templates.DeletionPolicyOrphan {
		p, ok := r.e.opts.Providers.Get(rec.Provider)
		if !ok {
			st.syncFailed(ReasonUnknownProvider, fmt.Sprintf("resource %s: no provider %q to delete it", rec.Name, rec.Provider))
			return nil
		}
		callCtx, cancel := context.WithTimeout(ctx, providerCallTimeout)
		err := p.Delete(callCtx, providers.Request{Name: rec.Name, ExternalName: rec.ExternalName, Owner: ownerOf(parent), Settings: rec.Settings})
		cancel()
		if err != nil {
			reason, _ := providers.Classify(err)
			st.syncFailed(reason, fmt.Sprintf("deleting resource %s (%s): %v", rec.Name, rec.ExternalName, err))
			return nil
		}
		r.normal(parent, "Deleted", "Delete", "Deleted %s resource %s", rec.Provider, rec.ExternalName)
	}
	updated := parent.DeepCopy()
	a := updated.GetAnnotations()
	delete(a, annotationResourcePrefix+rec.Name)
	updated.SetAnnotations(a)
	st.dropResource(rec.Name)
	return r.writeMetadata(ctx, parent, updated)
}

// jitter spreads resyncs over +-10% so they do not all fall at once.
func jitter(d time.Duration) time.Duration {
	return d - d/10 + time.Duration(rand.Int64N(int64(d/5)+1))
}
