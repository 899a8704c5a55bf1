package engine

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// normal records a Normal event on the parent for a real change.
func (r *reconciler) normal(parent *unstructured.Unstructured, reason, action, format string, args ...any) {
	r.recorder.Eventf(parent, nil, corev1.EventTypeNormal, reason, action, format, args...)
}

// warn records a Warning event on the parent. The events library
// aggregates repeats, so a failure that persists does not flood the API.
func (r *reconciler) warn(parent *unstructured.Unstructured, reason, action, format string, args ...any) {
	r.recorder.Eventf(parent, nil, corev1.EventTypeWarning, reason, action, format, args...)
}
