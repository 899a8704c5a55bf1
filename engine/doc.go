// Package engine is the generic reconciler: one dynamic controller per
// templated parent kind, reconciling each parent into the children and
// external resources its compiled template describes.
//
// It owns applying and pruning children, status and conditions, finalizers,
// events and the lifecycle of the per-kind controllers. It never loads CUE
// files: it asks a compiled templates.Template to evaluate one parent.
package engine
