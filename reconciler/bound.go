package reconciler

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/templates"
	"github.com/cuengine/engine/templates/policy"
)

// bound is the policy that bounds the children of a parent reconciled with
// t: when the parent is pinned (contract.AnnotationTemplateRevision) to an
// older revision, the newest template's (the files'), so that a pin
// selects a template's content, never rights the platform has since taken
// away; nil otherwise. A parent that is not pinned runs the revision its
// rollout put it on, and moves with the rollout, under the rollout's
// holds and health gates; a pinned one is outside the rollout, so the
// bound applies at once.
func (r *Reconciler) bound(t *templates.Template, parent *unstructured.Unstructured) *policy.Policy {
	newest := r.kind.Template()
	if newest == nil || newest.Hash == t.Hash {
		return nil
	}
	if pin, err := contract.PinnedRevision(parent); err != nil || pin == 0 {
		return nil
	}
	return &newest.Policy
}
