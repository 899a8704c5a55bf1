package revisions

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/contract"
)

// Stored are a kind's stored revisions as a reader outside the engine finds
// them (`engine rollout`, `engine diff --revision`): oldest first, all in
// one namespace, of the template's current version, with the
// ControllerRevisions they were read from.
type Stored struct {
	// Kind is the kind as the revisions name it: "MyKind.webapp.my.domain/v1".
	Kind      string
	Namespace string
	Revisions []Revision
	objects   map[string]*appsv1.ControllerRevision
}

// Target is the newest revision: the one the engine rolls out.
func (s *Stored) Target() Revision { return s.Revisions[len(s.Revisions)-1] }

// Object is the ControllerRevision a revision was read from, by its name;
// nil when there is none.
func (s *Stored) Object(name string) *appsv1.ControllerRevision { return s.objects[name] }

// ByNumber returns the revision with a number.
func (s *Stored) ByNumber(n int64) (Revision, bool) {
	i := slices.IndexFunc(s.Revisions, func(r Revision) bool { return r.Number == n })
	if i < 0 {
		return Revision{}, false
	}
	return s.Revisions[i], true
}

// ByHash returns the revision with a content hash (a revision renumbered
// since keeps its hash).
func (s *Stored) ByHash(hash string) (Revision, bool) {
	i := slices.IndexFunc(s.Revisions, func(r Revision) bool { return r.Hash == hash })
	if i < 0 {
		return Revision{}, false
	}
	return s.Revisions[i], true
}

// Find reads a kind's revisions from namespace, or from every namespace
// when it is "", and selects them (Select).
func Find(ctx context.Context, c client.Reader, gk schema.GroupKind, namespace string) (*Stored, error) {
	list := &appsv1.ControllerRevisionList{}
	err := c.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{contract.LabelTemplateKind: contract.TemplateKindLabel(gk)})
	if err != nil {
		where := "namespace " + namespace
		if namespace == "" {
			where = "any namespace (--revision-namespace names the engine's)"
		}
		return nil, fmt.Errorf("listing the revisions of %s in %s: %w", gk, where, err)
	}
	return Select(list.Items, gk, namespace)
}

// Select picks a kind's revisions out of the ControllerRevisions labelled
// for it: those whose annotation names the kind, all in one namespace, of
// the template's current version (the version of the newest one; a
// template that changed its version leaves the older ones behind).
func Select(crs []appsv1.ControllerRevision, gk schema.GroupKind, namespace string) (*Stored, error) {
	var mine []*appsv1.ControllerRevision
	namespaces := map[string]bool{}
	for i := range crs {
		if annotatedKind(&crs[i]).GroupKind() != gk {
			continue
		}
		mine = append(mine, &crs[i])
		namespaces[crs[i].Namespace] = true
	}
	if len(mine) == 0 {
		where := "in any namespace"
		if namespace != "" {
			where = "in namespace " + namespace
		}
		return nil, fmt.Errorf("no revisions of %s %s: the engine records one when it serves the kind's template (is it running, with this kind's template?)", gk, where)
	}
	if len(namespaces) > 1 {
		names := slices.Sorted(maps.Keys(namespaces))
		return nil, fmt.Errorf("revisions of %s are in several namespaces (%s): choose the engine's with --revision-namespace", gk, strings.Join(names, ", "))
	}
	newest := slices.MaxFunc(mine, func(a, b *appsv1.ControllerRevision) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Revision, b.Revision))
	})
	version := annotatedKind(newest).Version
	mine = slices.DeleteFunc(mine, func(cr *appsv1.ControllerRevision) bool { return annotatedKind(cr).Version != version })
	slices.SortFunc(mine, func(a, b *appsv1.ControllerRevision) int { return cmp.Compare(a.Revision, b.Revision) })
	out := &Stored{
		Kind:      newest.Annotations[contract.AnnotationTemplateKind],
		Namespace: newest.Namespace,
		objects:   map[string]*appsv1.ControllerRevision{},
	}
	for _, cr := range mine {
		out.Revisions = append(out.Revisions, RevisionOf(cr))
		out.objects[cr.Name] = cr
	}
	return out, nil
}

// annotatedKind reads a revision's kind annotation, "MyKind.webapp.my.domain/v1";
// the zero kind when it is not one.
func annotatedKind(cr *appsv1.ControllerRevision) schema.GroupVersionKind {
	gvk, _ := contract.ParseKindString(cr.Annotations[contract.AnnotationTemplateKind])
	return gvk
}
