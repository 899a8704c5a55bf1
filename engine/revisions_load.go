package engine

import (
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cuengine/engine/templates"
)

// LoadRevision compiles the template a stored revision holds, for readers
// outside the engine (engine diff --revision). It fails when the revision
// is a template of another kind than gvk.
func LoadRevision(cr *appsv1.ControllerRevision, gvk schema.GroupVersionKind) (*templates.Template, error) {
	var data revisionData
	if err := json.Unmarshal(cr.Data.Raw, &data); err != nil {
		return nil, fmt.Errorf("revision %d (ControllerRevision %s/%s): reading its files: %w", cr.Revision, cr.Namespace, cr.Name, err)
	}
	t, err := templates.Restore(cr.GetAnnotations()[AnnotationTemplatePath], data.Files)
	if err != nil {
		return nil, fmt.Errorf("revision %d (ControllerRevision %s/%s): %w", cr.Revision, cr.Namespace, cr.Name, err)
	}
	if t.GVK != gvk {
		return nil, fmt.Errorf("revision %d (ControllerRevision %s/%s) is a template of %s, not %s", cr.Revision, cr.Namespace, cr.Name, kindString(t.GVK), kindString(gvk))
	}
	return t, nil
}
