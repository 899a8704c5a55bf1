package contract

import "k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

// The fields of a parent's status the engine owns: it writes them with
// every status (engine/status.go), over whatever the template's status
// block renders, and hides them from the template's view of the parent.
// The CRDs the engine generates declare them (templates/crd.go).
const (
	// StatusObservedGeneration is the parent generation the engine last
	// reconciled.
	StatusObservedGeneration = "observedGeneration"
	// StatusConditions holds Synced and Ready.
	StatusConditions = "conditions"
	// StatusResources holds the external resources by local name: their
	// external name and provider state.
	StatusResources = "resources"
	// StatusTemplateRevision is the template revision the parent was last
	// reconciled with: {number, hash} (TemplateRevisionStatus).
	StatusTemplateRevision = "templateRevision"
	// StatusLastHandledReconcileAt is the last value of
	// AnnotationReconcileRequestedAt the engine reconciled the parent for.
	StatusLastHandledReconcileAt = "lastHandledReconcileAt"
)

// EngineStatusFields returns the status fields the engine owns.
func EngineStatusFields() []string {
	return []string{StatusConditions, StatusObservedGeneration, StatusResources, StatusTemplateRevision, StatusLastHandledReconcileAt}
}

// Paused reports whether a parent carries AnnotationPaused "true".
func Paused(obj *unstructured.Unstructured) bool {
	return obj.GetAnnotations()[AnnotationPaused] == "true"
}

// TemplateRevisionStatus is the value of StatusTemplateRevision for a
// revision; ParentRevision reads it back.
func TemplateRevisionStatus(number int64, hash string) map[string]any {
	return map[string]any{"number": number, "hash": hash}
}

// ParentRevision returns the revision a parent's status says it runs:
// status.templateRevision, written by the engine with each status.
func ParentRevision(parent *unstructured.Unstructured) (number int64, hash string) {
	number, _, _ = unstructured.NestedInt64(parent.Object, "status", StatusTemplateRevision, "number")
	hash, _, _ = unstructured.NestedString(parent.Object, "status", StatusTemplateRevision, "hash")
	return number, hash
}

// GenerationObserved reports whether the object's status was written for
// its current generation.
func GenerationObserved(obj *unstructured.Unstructured) bool {
	g, _, _ := unstructured.NestedInt64(obj.Object, "status", StatusObservedGeneration)
	return g == obj.GetGeneration()
}
