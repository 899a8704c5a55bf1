package revisions

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cuengine/engine/contract"
)

// ReadyOn is the one rule for a parent healthy on a revision: the parent
// runs the revision with content hash (its status.templateRevision.hash is
// hash), its status is of its current generation
// (status.observedGeneration is metadata.generation), and its Synced and
// Ready conditions are both True. A parent that is Ready but not Synced
// (its last apply failed, its old children still ready) is not healthy on
// the revision, nor is one whose status is of an older generation.
//
// The rollout coordinator starts a wave once every parent moved so far
// meets it, and a moved parent that does not within the progressDeadline
// fails its health gate; `engine rollout status` counts the parents that
// meet it as Ready on their revision.
func ReadyOn(parent *unstructured.Unstructured, hash string) bool {
	_, h := contract.ParentRevision(parent)
	if hash == "" || h != hash || !contract.GenerationObserved(parent) {
		return false
	}
	return contract.ConditionIs(parent, contract.ConditionSynced, metav1.ConditionTrue) &&
		contract.ConditionIs(parent, contract.ConditionReady, metav1.ConditionTrue)
}
