package revisions_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/revisions"
)

// parent is a parent of generation 2 whose status is of generation
// observed, on revision hash (none when ""), with the given conditions
// (type to status; absent when not given).
func parent(hash string, observed int64, conditions map[string]string) *unstructured.Unstructured {
	p := &unstructured.Unstructured{Object: map[string]any{}}
	p.SetName("p")
	p.SetGeneration(2)
	var conds []any
	for _, typ := range []string{contract.ConditionSynced, contract.ConditionReady} {
		if status, ok := conditions[typ]; ok {
			conds = append(conds, map[string]any{"type": typ, "status": status, "reason": "R", "message": ""})
		}
	}
	status := map[string]any{"observedGeneration": observed, "conditions": conds}
	if hash != "" {
		status[contract.StatusTemplateRevision] = map[string]any{"number": int64(2), "hash": hash}
	}
	p.Object["status"] = status
	return p
}

func TestReadyOn(t *testing.T) {
	healthy := map[string]string{contract.ConditionSynced: "True", contract.ConditionReady: "True"}
	for _, tc := range []struct {
		name   string
		parent *unstructured.Unstructured
		hash   string
		want   bool
	}{
		{"on the revision, current, Synced and Ready", parent("h2", 2, healthy), "h2", true},
		{"on another revision", parent("h1", 2, healthy), "h2", false},
		{"on no revision yet", parent("", 2, healthy), "h2", false},
		{"no revision asked for", parent("", 2, healthy), "", false},
		{"its status is of an older generation", parent("h2", 1, healthy), "h2", false},
		// The case `engine rollout status` counted as Ready before it used
		// this rule: its last apply failed, its old children are ready.
		{"Ready but Synced=False", parent("h2", 2, map[string]string{contract.ConditionSynced: "False", contract.ConditionReady: "True"}), "h2", false},
		{"Ready, Synced unknown", parent("h2", 2, map[string]string{contract.ConditionSynced: "Unknown", contract.ConditionReady: "True"}), "h2", false},
		{"Ready, no Synced condition", parent("h2", 2, map[string]string{contract.ConditionReady: "True"}), "h2", false},
		{"Synced, not Ready", parent("h2", 2, map[string]string{contract.ConditionSynced: "True", contract.ConditionReady: "False"}), "h2", false},
		{"Synced, no Ready condition", parent("h2", 2, map[string]string{contract.ConditionSynced: "True"}), "h2", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, revisions.ReadyOn(tc.parent, tc.hash))
		})
	}
}
