// Package jsoncmp compares JSON values as the engine holds them: the
// maps, lists, strings, booleans, nils and numbers of unstructured objects
// and of the statuses it writes. Equal is equality (a status field that
// has not changed, a field the engine applies that has not drifted);
// Contains is the subset a live object holds of a desired one, which may
// carry more (defaults, status). Both read numbers one way, whatever their
// Go type (int, int32, int64, float64, json.Number), and compare them by
// value: two integers exactly, an integer and a float as float64s.
//
// It does not decide which fields are compared: managed fields, fields
// left to other writers and the merge patch's own walk are the
// reconciler's.
//
// apimachinery offers no operation with these semantics: the api/equality
// Semantic.DeepEqual and DeepDerivative compare Go types (an int64 is
// never a float64), and DeepDerivative also skips empty strings, lists and
// maps and compares lists as prefixes; structured-merge-diff's
// value.Equals knows no json.Number and compares two integers only
// exactly, and allocates a value per node.
package jsoncmp
