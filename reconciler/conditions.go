package reconciler

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cuengine/engine/contract"
)

// maxMessage bounds a condition message.
const maxMessage = 1024

// condition is the engine's view of one condition before it is stored.
type condition struct {
	status  metav1.ConditionStatus
	reason  string
	message string
}

func (c condition) ok() bool { return c.status == metav1.ConditionTrue }

func (c condition) equal(stored *metav1.Condition) bool {
	return stored != nil && stored.Status == c.status && stored.Reason == c.reason && stored.Message == c.message
}

func (c condition) as(condType string, generation int64) metav1.Condition {
	return metav1.Condition{Type: condType, Status: c.status, Reason: c.reason, Message: c.message, ObservedGeneration: generation}
}

// setConditions returns the stored conditions with Synced and Ready set
// (their transition times move only when their status does), Stalled and
// Reconciling present only while True (Flux's convention for conditions
// of abnormal polarity: a healthy parent carries neither, nor their
// bytes), and Paused gone, or False when paused says why an annotation
// does not pause (ignoredPause), sorted by type, as JSON values.
func setConditions(stored []metav1.Condition, generation int64, synced, ready, stalled, reconciling, paused condition) []any {
	meta.SetStatusCondition(&stored, synced.as(contract.ConditionSynced, generation))
	meta.SetStatusCondition(&stored, ready.as(contract.ConditionReady, generation))
	for condType, c := range map[string]condition{contract.ConditionStalled: stalled, contract.ConditionReconciling: reconciling} {
		if c.ok() {
			meta.SetStatusCondition(&stored, c.as(condType, generation))
		} else {
			meta.RemoveStatusCondition(&stored, condType)
		}
	}
	if paused.status == "" {
		meta.RemoveStatusCondition(&stored, contract.ConditionPaused)
	} else {
		meta.SetStatusCondition(&stored, paused.as(contract.ConditionPaused, generation))
	}
	return conditionValues(stored)
}

// SafeMessage makes a message safe to show: printable (control characters and
// the bidirectional overrides that make text read differently from what it
// holds are dropped, invalid UTF-8 is replaced) and at most maxMessage
// bytes, cut at a rune boundary. Messages quote user input, so this is the
// only way one reaches a condition or an event.
func SafeMessage(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' {
			return ' '
		}
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) {
			return -1
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
	if len(s) <= maxMessage {
		return s
	}
	cut := maxMessage - 3
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
