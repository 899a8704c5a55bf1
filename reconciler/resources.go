package reconciler

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/providers"
	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/templates"
)

const (
	// maxNameAttempts bounds how many new names a NameConflict may try.
	maxNameAttempts = 5
	// providerCallTimeout bounds one provider call as a whole.
	providerCallTimeout = 2 * time.Minute
)

// resourcePlan is what the resources step leaves for the record step: the
// records the parent must carry (a new resource's name before its first
// create, a new name after a NameConflict, none for a resource deleted),
// and whether it needs the finalizer.
type resourcePlan struct {
	records   map[string]resourceRecord
	changed   bool
	finalizer bool
	// resync is when to observe the resources again; 0 when there are none.
	resync time.Duration
	// secrets are the resources' connection Secrets to apply as children
	// (connectionsecret.go).
	secrets []*unstructured.Unstructured
}

func (p *resourcePlan) set(rec resourceRecord) {
	p.records[rec.Name] = rec
	p.changed = true
}

func (p *resourcePlan) drop(name string) {
	delete(p.records, name)
	p.changed = true
}

// reconcileResources makes the external resources match the template. A
// provider creates or updates only a resource whose name is already
// recorded on the parent; a new one is only planned, and its first create
// comes in the reconcile after the record step stored its name. Recorded
// resources the template dropped are deleted (or orphaned, per policy).
// Provider failures are problems on the status, one per resource.
func (r *Reconciler) reconcileResources(ctx context.Context, parent *unstructured.Unstructured, eval *evaluation, live *render.LiveChildren, st *status) (*resourcePlan, error) {
	records, err := recordedResources(parent)
	if err != nil {
		return nil, err
	}
	plan := &resourcePlan{records: records, finalizer: len(eval.result.Resources) > 0 || needsFinalizer(eval.children)}
	stored := storedResources(parent)
	if len(eval.result.Resources) == 0 && len(records) == 0 && len(stored) == 0 {
		return plan, nil
	}
	plan.resync = jitter(r.resourceResync)
	for _, res := range eval.result.Resources {
		var secret *unstructured.Unstructured // the live connection Secret, kept whatever happens below
		lost := false
		var drift secretDrift // what someone else changed in it (connectiondrift.go)
		if res.ConnectionSecret != "" {
			if secret, lost, err = r.liveConnectionSecret(ctx, parent, res, live); err != nil {
				return nil, err
			}
			if secret, drift, err = r.confirmDrift(ctx, parent, secret); err != nil {
				return nil, err
			}
			if drift.typ != "" {
				if err := r.dropConnectionSecret(ctx, secret); err != nil {
					return nil, err
				}
				secret, lost = nil, true
			}
		}
		p, ok := r.provider(res.Provider)
		if !ok {
			st.fail(contract.ReasonUnknownProvider, terminalError(contract.ReasonUnknownProvider,
				fmt.Errorf("resource %s: no provider %q (this engine has: %s)", res.Name, res.Provider, strings.Join(r.providers.Names(), ", "))))
			r.planConnectionSecret(parent, res, secret, nil, plan, st)
			continue
		}
		rec, ok := records[res.Name]
		if !ok {
			r.planName(ctx, parent, p, res, plan, st)
			r.planConnectionSecret(parent, res, secret, nil, plan, st)
			continue
		}
		if rec.DeletionPolicy != res.DeletionPolicy || !slices.Equal(rec.DependsOn, res.DependsOn) {
			rec.DeletionPolicy, rec.DependsOn = res.DeletionPolicy, res.DependsOn
			plan.set(rec)
		}
		req := providers.Request{Name: res.Name, ExternalName: rec.ExternalName, Owner: ownerOf(parent), Spec: res.Spec, Settings: rec.Settings, ResetCredentials: lost}
		callCtx, cancel := context.WithTimeout(ctx, providerCallTimeout)
		obs, err := p.Apply(callCtx, req)
		cancel()
		if err == nil {
			st.setResource(res.Name, newResourceStatus(rec, &obs))
			if res.ConnectionSecret != "" {
				sensitive := obs.Sensitive
				if !drift.none() {
					sensitive = r.putRight(ctx, p, req, res, drift, sensitive, st)
				}
				r.planConnectionSecret(parent, res, secret, sensitive, plan, st)
			}
			continue
		}
		r.planConnectionSecret(parent, res, secret, nil, plan, st)
		if !drift.none() {
			st.fail(contract.ReasonConnectionSecretDrifted, fmt.Errorf("resource %s: connection Secret %s: %s changed by someone else; not put right while the provider fails", res.Name, res.ConnectionSecret, drift))
		}
		if renamed, ok := r.rename(ctx, parent, p, req, rec, stored[res.Name], err); ok {
			plan.set(renamed)
			continue
		}
		st.fail("", fmt.Errorf("resource %s (%s): %w", res.Name, rec.ExternalName, err))
		if _, found := stored[res.Name]; !found {
			st.setResource(res.Name, newResourceStatus(rec, nil)) // mirror the recorded name
		}
	}
	order := newDependencyOrder(live.List(), records)
	var waits []deletionWait
	for _, name := range slices.Sorted(maps.Keys(records)) {
		if slices.ContainsFunc(eval.result.Resources, func(res templates.Resource) bool { return res.Name == name }) {
			continue
		}
		// Dependents first: a resource goes once nothing left depends on it.
		if deps := order.dependents(name); len(deps) > 0 {
			waits = append(waits, deletionWait{what: "resource " + name, dependents: deps})
			continue
		}
		r.removeResource(ctx, parent, records[name], plan, st)
	}
	st.recordWaits(waits)
	for name := range stored {
		if _, ok := plan.records[name]; !ok {
			st.dropResource(name) // deleted or orphaned: not the parent's any more
		}
	}
	return plan, nil
}

// planName plans the record of a resource that has none: its external name,
// deterministic for the parent and the spec, so a crash before the record
// is stored yields the same name again.
func (r *Reconciler) planName(ctx context.Context, parent *unstructured.Unstructured, p providers.Provider, res templates.Resource, plan *resourcePlan, st *status) {
	ctx, cancel := context.WithTimeout(ctx, providerCallTimeout)
	defer cancel()
	name, settings, err := p.ExternalName(ctx, providers.Request{Name: res.Name, Owner: ownerOf(parent), Spec: res.Spec}, 0)
	if err != nil {
		st.fail("", fmt.Errorf("resource %s: %w", res.Name, err))
		return
	}
	plan.set(resourceRecord{Name: res.Name, Provider: res.Provider, ExternalName: name, Settings: settings, DeletionPolicy: res.DeletionPolicy, DependsOn: res.DependsOn})
}

// rename answers a NameConflict on a name this parent never had a resource
// under: someone else holds it, so the resource moves to its next name,
// recorded before its create. Had the parent created it, the conflict means
// its ownership mark was removed, and a new name would leak it: that stays
// a problem for a person to look at.
func (r *Reconciler) rename(ctx context.Context, parent *unstructured.Unstructured, p providers.Provider, req providers.Request, rec resourceRecord, stored resourceStatus, err error) (resourceRecord, bool) {
	reason, _ := providers.Classify(err)
	everCreated := stored.ExternalName == rec.ExternalName && stored.Exists
	if reason != providers.ReasonNameConflict || rec.Attempt+1 >= maxNameAttempts || everCreated {
		return rec, false
	}
	ctx, cancel := context.WithTimeout(ctx, providerCallTimeout)
	defer cancel()
	name, settings, nameErr := p.ExternalName(ctx, req, rec.Attempt+1)
	if nameErr != nil {
		return rec, false
	}
	r.warn(parent, providers.ReasonNameConflict, "Create", "resource %s: name %s is taken by a resource this parent does not own; moving to %s", req.Name, rec.ExternalName, name)
	rec.ExternalName, rec.Settings, rec.Attempt = name, settings, rec.Attempt+1
	return rec, true
}

// removeResource deletes (or orphans) a resource the template dropped and
// plans to forget its record.
func (r *Reconciler) removeResource(ctx context.Context, parent *unstructured.Unstructured, rec resourceRecord, plan *resourcePlan, st *status) {
	if rec.DeletionPolicy != templates.DeletionPolicyOrphan {
		p, ok := r.provider(rec.Provider)
		if !ok {
			st.fail(contract.ReasonUnknownProvider, terminalError(contract.ReasonUnknownProvider, fmt.Errorf("resource %s: no provider %q to delete it", rec.Name, rec.Provider)))
			return
		}
		callCtx, cancel := context.WithTimeout(ctx, providerCallTimeout)
		err := p.Delete(callCtx, providers.Request{Name: rec.Name, ExternalName: rec.ExternalName, Owner: ownerOf(parent), Settings: rec.Settings})
		cancel()
		if err != nil {
			st.fail("", fmt.Errorf("deleting resource %s (%s): %w", rec.Name, rec.ExternalName, err))
			return
		}
		r.normal(parent, "Deleted", "Delete", "Deleted %s resource %s", rec.Provider, rec.ExternalName)
	}
	plan.drop(rec.Name)
}

// needsFinalizer: children without an owner reference (in other namespaces,
// or cluster-scoped) are not garbage-collected, and children that depend on
// others must go before them, so the engine deletes them.
func needsFinalizer(desired []*unstructured.Unstructured) bool {
	return slices.ContainsFunc(desired, func(d *unstructured.Unstructured) bool {
		return len(d.GetOwnerReferences()) == 0 || len(dependsOn(d)) > 0
	})
}

func ownerOf(parent *unstructured.Unstructured) providers.Owner {
	return providers.Owner{UID: string(parent.GetUID()), Namespace: parent.GetNamespace(), Name: parent.GetName(), Kind: parent.GetKind()}
}

// jitter spreads resyncs over +-10% so they do not all fall at once.
func jitter(d time.Duration) time.Duration {
	return d - d/10 + time.Duration(rand.Int64N(int64(d/5)+1))
}

// resourceRecord is what the parent's annotation says of one resource.
type resourceRecord = contract.ResourceRecord

// recordedResources reads every resource record of the parent, by name.
func recordedResources(parent *unstructured.Unstructured) (map[string]resourceRecord, error) {
	out, err := contract.ResourceRecords(parent.GetAnnotations())
	if err != nil {
		return nil, terminalError(contract.ReasonNotSynced, err)
	}
	return out, nil
}
