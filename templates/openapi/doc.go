// Package openapi converts between CUE and OpenAPI for the templates
// package, and holds the schemas of the kinds templates' children may be:
//
//   - CUE to OpenAPI (schema.go, status.go): the schema of a template's
//     parent.spec, and of its status from what the template's `status` can
//     produce (StatusShapeOf reads its syntax) and the engine's own fields,
//     for the CRD templates generates;
//   - OpenAPI to CUE (cue.go): a kind's schema as a closed CUE definition
//     that templates unifies each child with (the child check);
//   - beyond the plain schema (immutable.go, constraints.go): the
//     @immutable() fields of parent.spec as CEL rules of its schema
//     (Immutable), and the constraints of parent.spec that the schema drops
//     or loosens, which the admission webhook checks instead (Constraints);
//   - the schemas of child kinds (kinds.go, document.go): the built-in
//     Kubernetes kinds (builtin.json.gz, written by make generate), CRDs
//     (files.go reads them from files, engine vet --crds) and the
//     cluster's OpenAPI v3 discovery, with each kind's scope.
//
// It works on CUE values and syntax, OpenAPI documents and CRDs; it knows
// nothing of templates, compiling or evaluating: the caller formats
// positions in its files, and reports a refusal (FieldError) as its own.
// It imports contract (the engine's status field names) and nothing else
// of this module: templates imports it, never the reverse
// (hack/imports.sh).
package openapi
