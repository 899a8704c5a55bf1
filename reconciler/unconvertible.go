package reconciler

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cuengine/engine/contract"
)

// UnconvertibleKey is the top-level key under which the engine's parent
// cache keeps, on a parent stored in a version that does not convert to
// its template's hub, the stored apiVersion and the conversion's message
// (MarkUnconvertible). Such a parent is cached as it is stored, so that
// one object does not fail the list of its whole kind; the key starts
// with a NUL, so no field of a custom resource has it, and nothing the
// engine writes carries it.
const UnconvertibleKey = "\x00engine.unconvertible"

// MarkUnconvertible marks u, a parent read in its stored version, as one
// that does not convert to the hub; cause is the conversion's message.
func MarkUnconvertible(u *unstructured.Unstructured, cause string) {
	u.Object[UnconvertibleKey] = map[string]any{"apiVersion": u.GetAPIVersion(), "message": cause}
}

// UnconvertibleVersion is the apiVersion a marked parent is stored in, ""
// for any other.
func UnconvertibleVersion(u *unstructured.Unstructured) string {
	m, _ := u.Object[UnconvertibleKey].(map[string]any)
	v, _ := m["apiVersion"].(string)
	return v
}

// unconvertible is the terminal error of a marked parent, nil for any
// other: Stalled with contract.ReasonConversionFailed, saying why and
// where to fix it. Nothing else is done for it but its deletion, which
// needs no evaluation (reconcileDelete: its recorded resources and its
// children by label), and whose writes go to the stored version.
func unconvertible(u *unstructured.Unstructured, hub string) error {
	version := UnconvertibleVersion(u)
	if version == "" {
		return nil
	}
	m, _ := u.Object[UnconvertibleKey].(map[string]any)
	cause, _ := m["message"].(string)
	return terminalError(contract.ReasonConversionFailed, fmt.Errorf(
		"stored as %s, this %s does not convert to %s, the version its template is written against, so the engine evaluates, applies and prunes nothing for it and leaves its children as they are: %s; fix it in %s (its status and deletion work there)",
		version, u.GetKind(), hub, SafeMessage(cause), version))
}
