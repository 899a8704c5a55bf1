package contract

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestConditionConversionsAreTheConverters: ConditionValue and
// ConditionsOf, which skip the converter's reflection for conditions as
// the engine stores them, give what runtime.DefaultUnstructuredConverter
// gives, for set and zero fields; a condition in any other shape still
// goes through the converter.
func TestConditionConversionsAreTheConverters(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 12, 2, 13, 4, 5, 0, time.FixedZone("x", 3600)))
	conds := []metav1.Condition{
		{Type: "Ready", Status: metav1.ConditionTrue, ObservedGeneration: 3, LastTransitionTime: at, Reason: "Ready", Message: "all ready"},
		{Type: "Synced", Status: metav1.ConditionFalse, Reason: "ApplyFailed", Message: "ünïcode \"quoted\""},
		{},
	}
	var stored []any
	for _, c := range conds {
		want, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&c)
		require.NoError(t, err)
		got := ConditionValue(c)
		assert.Equal(t, want, got)
		stored = append(stored, got)
	}
	// And back, through the fast path and through the converter.
	odd := []any{
		map[string]any{"type": "Stalled", "status": "True", "observedGeneration": float64(2)},            // a float
		map[string]any{"type": "Reconciling", "status": "True", "lastTransitionTime": nil},               // a null time
		map[string]any{"type": "Paused", "status": "True", "extra": "field"},                             // an unknown field
		map[string]any{"type": "Bad", "status": "True", "lastTransitionTime": "yesterday"},               // not a time
		map[string]any{"type": int64(4)},                                                                 // not a condition
		map[string]any{"type": "Old", "status": "Unknown", "lastTransitionTime": "2026-01-02T03:04:05Z"}, // UTC
	}
	all := append(stored, odd...)
	var want []metav1.Condition
	for _, item := range all {
		var c metav1.Condition
		if runtime.DefaultUnstructuredConverter.FromUnstructured(item.(map[string]any), &c) == nil {
			want = append(want, c)
		}
	}
	got := ConditionsOf(map[string]any{StatusConditions: all})
	require.Len(t, got, len(want))
	for i := range want {
		assert.True(t, want[i].LastTransitionTime.Equal(&got[i].LastTransitionTime), "condition %d time", i)
		assert.Equal(t, want[i].LastTransitionTime.Location(), got[i].LastTransitionTime.Location(), "condition %d zone", i)
		want[i].LastTransitionTime, got[i].LastTransitionTime = metav1.Time{}, metav1.Time{}
		assert.Equal(t, want[i], got[i], "condition %d", i)
	}
	_, ok := conditionFrom(stored[0].(map[string]any))
	assert.True(t, ok, "the engine's own conditions take the fast path")
}
