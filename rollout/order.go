package rollout

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/templates/policy"
)

// rolloutOrder is the order parents move in: the canaries of the rollout
// policy first (policy.Canary: its namespaces, and a parent's own
// canary label only where the policy lets it count), then by a hash of
// their UID, so the same parents go first every time. Whoever writes a
// parent cannot put it first unless the platform's template says so.
func rolloutOrder(parents []unstructured.Unstructured, canary policy.Canary) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for i := range parents {
		p := &parents[i]
		if p.GetDeletionTimestamp() != nil {
			continue
		}
		if n, err := contract.PinnedRevision(p); n > 0 || err != nil {
			continue // pinned: not part of the rollout
		}
		if contract.Paused(p) {
			// Not reconciled, so never healthy on the target: it would
			// hold its wave to the progress deadline. Resumed, it takes
			// the stable revision of that time.
			continue
		}
		out = append(out, p)
	}
	isCanary := func(p *unstructured.Unstructured) bool { return canary.Includes(p.GetNamespace(), p.GetLabels()) }
	slices.SortFunc(out, func(a, b *unstructured.Unstructured) int {
		ca, cb := isCanary(a), isCanary(b)
		if ca != cb {
			if ca {
				return -1
			}
			return 1
		}
		return strings.Compare(uidOrder(a.GetUID()), uidOrder(b.GetUID()))
	})
	return out
}

// uidOrder spreads parents evenly and stably: a hash of the UID.
func uidOrder(uid types.UID) string {
	h := fnv.New64a()
	h.Write([]byte(uid))
	return fmt.Sprintf("%016x", h.Sum64())
}
