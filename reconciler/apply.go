package reconciler

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/internal/jsoncmp"
	"github.com/cuengine/engine/render"
)

// applyChildren server-side applies every desired child that is missing or
// has drifted from it as the apiserver stores it (drift.go), and returns
// the number of writes: applies the apiserver found nothing to change in
// are none. A child whose name is held by an object this parent does not
// control is left untouched (ChildConflict); a child the apiserver refuses
// is a terminal problem of its own (ApplyFailed); the others go on.
//
// A child the cache does not hold costs no read: it is applied create-only
// (createChild), and only a name already taken costs the ownership check.
func (r *Reconciler) applyChildren(ctx context.Context, parent *unstructured.Unstructured, desired []*unstructured.Unstructured, live *render.LiveChildren, st *status) (int, error) {
	key := types.NamespacedName{Namespace: parent.GetNamespace(), Name: parent.GetName()}
	writes := 0
	seen := make([]types.UID, 0, len(desired))
	for _, d := range desired {
		adopted := "" // the token an object adopted here is proven by, if it needs one
		if err := r.children.Watch(ctx, d.GroupVersionKind()); err != nil {
			return writes, err
		}
		hash := render.AppliedHash(d)
		cur := live.Get(d)
		if cur == nil {
			created, taken, err := r.createChild(ctx, parent, d, hash)
			if err != nil {
				if r.applyRefused(err, st) {
					continue
				}
				return writes, err
			}
			if created != nil {
				r.applied.remember(key, created, hash)
				seen = append(seen, created.GetUID())
				writes++
				r.normal(parent, "Created", "Create", "Created %s %s", d.GetKind(), d.GetName())
				log.FromContext(ctx).V(1).Info("created child", "child", d.GetLabels()[contract.LabelChild], "object", d.GetNamespace()+"/"+d.GetName())
				continue
			}
			// The name is taken: the object is this parent's (the cache
			// has not shown it yet), granted to it (adopt.go), or someone
			// else's, never touched.
			holder, err := render.HolderOf(ctx, r.live, parent, d)
			if err != nil {
				return writes, err
			}
			if holder.Conflict != "" {
				st.fail(contract.ReasonChildConflict, terminalError(contract.ReasonChildConflict, errors.New(holder.Conflict)))
				continue
			}
			if holder.Live == nil {
				return writes, fmt.Errorf("creating %s %s: %w (it was deleted since)", d.GetKind(), d.GetName(), taken)
			}
			cur = holder.Live
			if holder.Adopt {
				if cur, err = r.takeOver(ctx, parent, cur); err != nil {
					return writes, err
				}
				writes++
				adopted = createToken(parent, d)
			}
		}
		seen = append(seen, cur.GetUID())
		// The fields the template leaves to other writers hold their live
		// values: neither judged as drift nor changed by the apply.
		d, err := r.keepingLive(ctx, key, d, cur, hash) // leftfields.go
		if err != nil {
			return writes, err
		}
		var obj *unstructured.Unstructured // what is applied, made once
		if adopted == "" && cur.GetAnnotations()[contract.AnnotationAppliedHash] == hash {
			if r.applied.holds(key, cur, hash) || jsoncmp.Contains(cur.Object, d.Object) {
				continue // already as desired: no write
			}
			// Not literally as desired: as the apiserver stores it?
			obj = applyObject(d, cur, hash, "")
			same, err := r.storedAsDesired(ctx, obj, cur)
			if err != nil {
				err = fmt.Errorf("applying %s %s (dry run): %w", d.GetKind(), d.GetName(), err)
				if r.applyRefused(err, st) {
					continue
				}
				return writes, err
			}
			if same {
				r.applied.remember(key, cur, hash)
				continue
			}
		}
		if obj == nil {
			obj = applyObject(d, cur, hash, adopted)
		}
		if err := r.apply(ctx, obj); err != nil {
			err = fmt.Errorf("applying %s %s: %w", d.GetKind(), d.GetName(), err)
			if r.applyRefused(err, st) {
				continue
			}
			return writes, err
		}
		r.applied.remember(key, obj, hash) // the reply's uid and resource version
		if obj.GetResourceVersion() != "" && obj.GetResourceVersion() == cur.GetResourceVersion() {
			continue // the apiserver found nothing to change: no write
		}
		writes++
		r.normal(parent, "Updated", "Update", "Updated %s %s", d.GetKind(), d.GetName())
		log.FromContext(ctx).V(1).Info("applied child", "child", d.GetLabels()[contract.LabelChild], "object", d.GetNamespace()+"/"+d.GetName())
	}
	r.applied.keep(key, seen)
	return writes, nil
}

// createToken is the token a child of the engine's cluster is created or
// adopted with when it carries no owner reference (render.Proofs); ""
// for one that does, whose owner reference is the proof.
func createToken(parent, d *unstructured.Unstructured) string {
	if len(d.GetOwnerReferences()) > 0 {
		return ""
	}
	return render.CreateToken(parent, render.InventoryKey(d))
}

// applyObject is what is applied of the desired child d over its live
// object cur: d with its applied hash, and the create token cur carries,
// if any, so that the apply does not take away the proof of an object
// whose UID the parent does not hold yet (render.Proofs); or token, when
// given: that of an object just adopted, which the apply gives it.
func applyObject(d, cur *unstructured.Unstructured, hash, token string) *unstructured.Unstructured {
	obj := render.WithAppliedHash(d, hash)
	if token == "" {
		token = cur.GetAnnotations()[contract.AnnotationCreateToken]
	}
	if token != "" {
		setAnnotation(obj, contract.AnnotationCreateToken, token)
	}
	return obj
}

// setAnnotation sets one annotation of obj, an object of the engine's own
// making (a copy of a desired child).
func setAnnotation(obj *unstructured.Unstructured, key, value string) {
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[key] = value
	obj.SetAnnotations(annotations)
}

// createOnlyVersion is the resource version a new child is applied with. A
// resource version in an apply is a precondition on the existing object,
// and none has this one (resource versions are storage revisions, far
// below it), while an apply that creates the object ignores it. So the
// apply creates the child when its name is free and otherwise fails with a
// conflict, in one request and atomically: an object that holds the name,
// whoever made it, is never modified, and the server-side apply's field
// ownership is the same as that of every later apply.
const createOnlyVersion = "18446744073709551615" // max uint64

// createChild applies the desired child obj, with its applied hash, only
// if no object has its name; one without an owner reference carries the
// token whose hash the parent's inventory proofs hold (render.Pending).
func (r *Reconciler) createChild(ctx context.Context, parent, obj *unstructured.Unstructured, hash string) (created *unstructured.Unstructured, taken, err error) {
	return createOnly(ctx, r.apply, obj, hash, createToken(parent, obj))
}

// createOnly applies obj, with its applied hash and the create token when
// there is one, through apply (a server-side apply of the engine's field
// manager, to this cluster or a workload cluster) only if no object has
// its name (createOnlyVersion). It returns the object created, when it
// was, and otherwise the conflict that says the name is taken; any other
// error is the apply's.
func createOnly(ctx context.Context, apply func(context.Context, *unstructured.Unstructured) error, obj *unstructured.Unstructured, hash, token string) (created *unstructured.Unstructured, taken, err error) {
	create := render.WithAppliedHash(obj, hash)
	if token != "" {
		setAnnotation(create, contract.AnnotationCreateToken, token)
	}
	create.SetResourceVersion(createOnlyVersion)
	err = apply(ctx, create)
	switch {
	case err == nil:
		return create, nil, nil
	case apierrors.IsConflict(err):
		return nil, err, nil
	default:
		return nil, nil, fmt.Errorf("applying %s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
}

// apply server-side applies obj, as the engine's field manager taking
// ownership of its fields, and sets on it the uid and resource version the
// apiserver answers: all the caller reads of the reply. The reply is asked
// for as the object's metadata alone (protobuf, through the metadata
// client), not the whole object in JSON decoded into maps: that decoding
// was the larger part of an apply's CPU in the engine.
func (r *Reconciler) apply(ctx context.Context, obj *unstructured.Unstructured) error {
	body, err := obj.MarshalJSON()
	if err != nil {
		return err
	}
	reply := &metav1.PartialObjectMetadata{}
	reply.SetGroupVersionKind(obj.GroupVersionKind())
	reply.SetNamespace(obj.GetNamespace())
	reply.SetName(obj.GetName())
	if err := r.writer.Patch(ctx, reply, client.RawPatch(types.ApplyPatchType, body), client.FieldOwner(contract.FieldManager), client.ForceOwnership); err != nil {
		return err
	}
	obj.SetUID(reply.GetUID())
	obj.SetResourceVersion(reply.GetResourceVersion())
	return nil
}

// applyRefused records an error the apiserver answers for good (a child it
// refuses) as ApplyFailed and reports true; other errors are for the
// caller to return.
func (r *Reconciler) applyRefused(err error, st *status) bool {
	if class, _, _ := classify(err, 0); class != terminal {
		return false
	}
	st.fail(contract.ReasonApplyFailed, terminalError(contract.ReasonApplyFailed, err))
	return true
}
