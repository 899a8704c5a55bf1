package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
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
			if name := k.GroupKind().String(); !slices.Contains(names, name) {
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
