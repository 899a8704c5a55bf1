// Package crdcompat says which changes from one CustomResourceDefinition to
// the next can break the objects already stored, so that the engine refuses
// to install such a CRD over the live one (--install-crds) instead of
// letting the apiserver prune or reject what users wrote.
//
// A change is breaking when an object valid under the old CRD may not be
// valid, or may lose data, under the new one:
//   - the scope changes (Namespaced <-> Cluster);
//   - a served version is removed;
//   - a field's type changes;
//   - a field is removed from a schema that neither keeps unknown fields
//     nor has additionalProperties (its stored values would be pruned on
//     the next write);
//   - a field becomes required;
//   - a bound narrows: maxLength, maximum down; minLength, minimum up;
//   - a pattern is added or changes;
//   - an enum is added, or loses a value.
//
// Widening (a new optional field, a looser bound, a new enum value, a schema
// that now keeps unknown fields) is not breaking. The comparison walks
// properties, list items and additionalProperties of every version both
// CRDs serve.
//
// It works on CRDs alone: it must not import templates or any other package
// of this module (hack/imports.sh).
package crdcompat
