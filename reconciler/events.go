package reconciler

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/events"
)

// normal records a Normal event on the parent for a real change.
func (r *Reconciler) normal(parent *unstructured.Unstructured, reason, action, format string, args ...any) {
	r.recorder.Eventf(parent, nil, corev1.EventTypeNormal, reason, action, format, args...)
}

// warn records a Warning event on the parent. The events library
// aggregates repeats, so a failure that persists does not flood the API.
func (r *Reconciler) warn(parent *unstructured.Unstructured, reason, action, format string, args ...any) {
	warn(r.recorder, parent, reason, action, format, args...)
}

// warn records a Warning event on the parent with recorder: the
// reconciler's, or the status writer's (statuswriter.go).
func warn(recorder events.EventRecorder, parent *unstructured.Unstructured, reason, action, format string, args ...any) {
	recorder.Eventf(parent, nil, corev1.EventTypeWarning, reason, action, format, args...)
}
