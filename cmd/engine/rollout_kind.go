package main

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/revisions"
)

// kindMapper maps what a user types for a kind to the kind: the cluster's
// discovery, with the short names of its resources.
func kindMapper(dc discovery.DiscoveryInterfaceWithContext) meta.RESTMapperWithContext {
	cached := memory.NewMemCacheClientWithContext(dc)
	return restmapper.NewShortcutExpanderWithContext(restmapper.NewDeferredDiscoveryRESTMapperWithContext(cached), cached, func(string) {})
}

// resolveKind finds the kind arg names, as kubectl does: a kind or a
// resource, singular or plural, or a short name (MyKind, mykind, mykinds,
// mk), optionally with its group (MyKind.webapp.my.domain) or version and
// group (mykinds.v1.webapp.my.domain). The version is the cluster's
// preferred one unless arg names it. A name that several groups serve
// must be given with its group.
func resolveKind(ctx context.Context, mapper meta.RESTMapperWithContext, arg string) (schema.GroupVersionKind, error) {
	lower := strings.ToLower(arg)
	full, partial := schema.ParseResourceArg(lower)
	if full != nil {
		if gvk, err := mapper.KindForWithContext(ctx, *full); err == nil {
			return gvk, nil
		}
	}
	if kinds, err := mapper.KindsForWithContext(ctx, partial.WithVersion("")); err == nil {
		var names []string
		for _, k := range kinds {
			if name := kindName(k.GroupKind()); !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
		if len(names) > 1 {
			slices.Sort(names)
			return schema.GroupVersionKind{}, fmt.Errorf("%q names several kinds (%s): name one with its group", arg, strings.Join(names, ", "))
		}
	}
	gvk, err := mapper.KindForWithContext(ctx, partial.WithVersion(""))
	if err == nil {
		return gvk, nil
	}
	if !meta.IsNoMatchError(err) {
		return schema.GroupVersionKind{}, fmt.Errorf("resolving the kind %q: %w", arg, err)
	}
	// A kind that is not its resource's singular name (MyKind.v1.webapp.my.domain).
	kfull, kpartial := schema.ParseKindArg(arg)
	if kfull != nil {
		if m, err := mapper.RESTMappingWithContext(ctx, kfull.GroupKind(), kfull.Version); err == nil {
			return m.GroupVersionKind, nil
		}
	}
	if m, err := mapper.RESTMappingWithContext(ctx, kpartial); err == nil {
		return m.GroupVersionKind, nil
	}
	return schema.GroupVersionKind{}, fmt.Errorf("unknown kind %q: the cluster serves no such resource (is its CRD installed? `kubectl api-resources` lists the kinds)", arg)
}

// kindRevisions are a kind's stored revisions, oldest first, with the
// ControllerRevisions they were read from (by name).
type kindRevisions struct {
	// Kind is the kind as the revisions name it: "MyKind.webapp.my.domain/v1".
	Kind      string
	Namespace string
	Revisions []revisions.Revision
	objects   map[string]*appsv1.ControllerRevision
}

// target is the newest revision: the one the engine rolls out.
func (k *kindRevisions) target() revisions.Revision { return k.Revisions[len(k.Revisions)-1] }

// findRevisions reads a kind's revisions from namespace, or from every
// namespace when it is "".
func findRevisions(ctx context.Context, c client.Reader, gk schema.GroupKind, namespace string) (*kindRevisions, error) {
	list := &appsv1.ControllerRevisionList{}
	err := c.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{contract.LabelTemplateKind: contract.TemplateKindLabel(gk)})
	if err != nil {
		where := "namespace " + namespace
		if namespace == "" {
			where = "any namespace (--revision-namespace names the engine's)"
		}
		return nil, fmt.Errorf("listing the revisions of %s in %s: %w", kindName(gk), where, err)
	}
	return selectRevisions(list.Items, gk, namespace)
}

// selectRevisions picks a kind's revisions out of the ControllerRevisions
// labelled for it: those whose annotation names the kind, all in one
// namespace, of the template's current version (the version of the newest
// one; a template that changed its version leaves the older ones behind).
func selectRevisions(crs []appsv1.ControllerRevision, gk schema.GroupKind, namespace string) (*kindRevisions, error) {
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
		return nil, fmt.Errorf("no revisions of %s %s: the engine records one when it serves the kind's template (is it running, with this kind's template?)", kindName(gk), where)
	}
	if len(namespaces) > 1 {
		names := slices.Sorted(maps.Keys(namespaces))
		return nil, fmt.Errorf("revisions of %s are in several namespaces (%s): choose the engine's with --revision-namespace", kindName(gk), strings.Join(names, ", "))
	}
	newest := slices.MaxFunc(mine, func(a, b *appsv1.ControllerRevision) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Revision, b.Revision))
	})
	version := annotatedKind(newest).Version
	mine = slices.DeleteFunc(mine, func(cr *appsv1.ControllerRevision) bool { return annotatedKind(cr).Version != version })
	slices.SortFunc(mine, func(a, b *appsv1.ControllerRevision) int { return cmp.Compare(a.Revision, b.Revision) })
	out := &kindRevisions{
		Kind:      newest.Annotations[contract.AnnotationTemplateKind],
		Namespace: newest.Namespace,
		objects:   map[string]*appsv1.ControllerRevision{},
	}
	for _, cr := range mine {
		out.Revisions = append(out.Revisions, revisions.RevisionOf(cr))
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

// kindName is how the commands name a kind: "MyKind.webapp.my.domain".
func kindName(gk schema.GroupKind) string { return gk.Kind + "." + gk.Group }
