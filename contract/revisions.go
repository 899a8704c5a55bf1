package contract

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Every accepted version of a kind's template is a revision: an apps/v1
// ControllerRevision in the engine's namespace (package revisions). The
// rollout of a revision (engine/rollout.go) is recorded in the revision's
// annotations, so every replica and a restarted engine agree on it, and
// kubectl can read and change it:
//
//	kubectl get controllerrevisions -l engine.cuengine.dev/template-kind=mykind.webapp.my.domain
//	kubectl annotate controllerrevision NAME engine.cuengine.dev/rollout-paused=true
const (
	// LabelTemplateKind selects a kind's revisions: "mykind.webapp.my.domain"
	// (TemplateKindLabel). It is the key of AnnotationTemplateKind, in the
	// labels (see the package documentation).
	LabelTemplateKind = "engine.cuengine.dev/template-kind"
	// AnnotationTemplateKind is the revision's kind in full:
	// "MyKind.webapp.my.domain/v1" (KindString).
	AnnotationTemplateKind = "engine.cuengine.dev/template-kind"
	// AnnotationTemplatePath is the template's path in the templates directory.
	AnnotationTemplatePath = "engine.cuengine.dev/template-path"
	// AnnotationTemplateHash is the template's content hash.
	AnnotationTemplateHash = "engine.cuengine.dev/template-hash"

	// AnnotationRolloutPhase is where the revision's rollout stands (revisions.Phase).
	AnnotationRolloutPhase = "engine.cuengine.dev/rollout-phase"
	// AnnotationRolloutWave is the index of the wave in progress.
	AnnotationRolloutWave = "engine.cuengine.dev/rollout-wave"
	// AnnotationRolloutMessage says why the rollout is where it is.
	AnnotationRolloutMessage = "engine.cuengine.dev/rollout-message"
	// AnnotationRolloutHeldDeletes counts the children a held revision
	// would delete; absent unless the revision is held.
	AnnotationRolloutHeldDeletes = "engine.cuengine.dev/rollout-held-deletes"
	// AnnotationRolloutFailingBefore lists, comma-separated, the parents
	// ("namespace/name") that were not healthy on their previous revision
	// when the rollout moved them: their health is not held against the
	// revision. Absent when there are none.
	AnnotationRolloutFailingBefore = "engine.cuengine.dev/rollout-failing-before"
	// AnnotationRolloutSoakSince is when the wave in progress started its
	// soak (RFC 3339): every parent of the wave was healthy on the
	// revision. Absent when the wave is not soaking. A new leader resumes
	// the clock from it.
	AnnotationRolloutSoakSince = "engine.cuengine.dev/rollout-soak-since"
	// AnnotationRolloutAnalysis holds the latest result of each of the
	// wave's analysis checks, one line each. Absent when none ran.
	AnnotationRolloutAnalysis = "engine.cuengine.dev/rollout-analysis"

	// AnnotationRolloutPaused, "true", set by a user, stops a rollout
	// between waves; removing it resumes.
	AnnotationRolloutPaused = "engine.cuengine.dev/rollout-paused"
	// AnnotationRolloutApproved, "true", set by a user, lets a held
	// revision (one that deletes children) roll out.
	AnnotationRolloutApproved = "engine.cuengine.dev/rollout-approved"
	// AnnotationRolloutUndo, "true", set by a user, rolls the revision
	// back: every parent returns to the previous complete revision
	// (revisions.UndoTarget).
	AnnotationRolloutUndo = "engine.cuengine.dev/rollout-undo"
)

// PinnedRevision returns the revision number a parent is pinned to
// (AnnotationTemplateRevision), 0 when it is not pinned, and an error when
// the annotation is not a number.
func PinnedRevision(parent *unstructured.Unstructured) (int64, error) {
	v, ok := parent.GetAnnotations()[AnnotationTemplateRevision]
	if !ok {
		return 0, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("annotation %s=%q is not a revision number", AnnotationTemplateRevision, v)
	}
	return n, nil
}
