package crdcompat

import (
	"fmt"
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// BreakingChanges lists the changes from the old CRD to the new one that can
// break objects already stored: a removed field (its values would be pruned
// on the next write), a changed type, a new required field, a narrowed
// bound, length, pattern or enum, a changed scope, or a removed version.
// An empty list means the new CRD accepts everything the old one did.
func BreakingChanges(old, new *apiextensionsv1.CustomResourceDefinition) []string {
	var out []string
	if old.Spec.Scope != new.Spec.Scope {
		out = append(out, fmt.Sprintf("scope changes from %s to %s", old.Spec.Scope, new.Spec.Scope))
	}
	newVersions := map[string]*apiextensionsv1.CustomResourceDefinitionVersion{}
	for i := range new.Spec.Versions {
		newVersions[new.Spec.Versions[i].Name] = &new.Spec.Versions[i]
	}
	for _, ov := range old.Spec.Versions {
		nv, ok := newVersions[ov.Name]
		if !ok {
			out = append(out, fmt.Sprintf("version %s is removed", ov.Name))
			continue
		}
		if ov.Schema == nil || ov.Schema.OpenAPIV3Schema == nil || nv.Schema == nil || nv.Schema.OpenAPIV3Schema == nil {
			continue
		}
		out = append(out, compareSchema(ov.Name, ov.Schema.OpenAPIV3Schema, nv.Schema.OpenAPIV3Schema)...)
	}
	return out
}

func compareSchema(path string, o, n *apiextensionsv1.JSONSchemaProps) []string {
	var out []string
	add := func(format string, args ...any) {
		out = append(out, path+": "+fmt.Sprintf(format, args...))
	}
	if o.Type != n.Type && n.Type != "" {
		add("type changes from %q to %q", o.Type, n.Type)
		return out
	}
	if n.XPreserveUnknownFields != nil && *n.XPreserveUnknownFields {
		return out // the new schema keeps whatever is there
	}
	if n.MaxLength != nil && (o.MaxLength == nil || *n.MaxLength < *o.MaxLength) {
		add("maxLength narrows to %d", *n.MaxLength)
	}
	if n.MinLength != nil && (o.MinLength == nil || *n.MinLength > *o.MinLength) {
		add("minLength rises to %d", *n.MinLength)
	}
	if n.Maximum != nil && (o.Maximum == nil || *n.Maximum < *o.Maximum) {
		add("maximum narrows to %v", *n.Maximum)
	}
	if n.Minimum != nil && (o.Minimum == nil || *n.Minimum > *o.Minimum) {
		add("minimum rises to %v", *n.Minimum)
	}
	if n.Pattern != "" && n.Pattern != o.Pattern {
		add("pattern changes to %q", n.Pattern)
	}
	if len(n.Enum) > 0 {
		allowed := map[string]bool{}
		for _, e := range n.Enum {
			allowed[string(e.Raw)] = true
		}
		if len(o.Enum) == 0 {
			add("values are restricted to an enum")
		}
		for _, e := range o.Enum {
			if !allowed[string(e.Raw)] {
				add("enum value %s is removed", e.Raw)
			}
		}
	}
	oldRequired := map[string]bool{}
	for _, r := range o.Required {
		oldRequired[r] = true
	}
	for _, r := range n.Required {
		if !oldRequired[r] {
			add("field %q becomes required", r)
		}
	}
	names := make([]string, 0, len(o.Properties))
	for name := range o.Properties {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		op := o.Properties[name]
		np, ok := n.Properties[name]
		if !ok {
			if n.AdditionalProperties == nil {
				add("field %q is removed (stored values would be dropped)", name)
			}
			continue
		}
		out = append(out, compareSchema(path+"."+name, &op, &np)...)
	}
	if o.Items != nil && o.Items.Schema != nil && n.Items != nil && n.Items.Schema != nil {
		out = append(out, compareSchema(path+"[]", o.Items.Schema, n.Items.Schema)...)
	}
	if o.AdditionalProperties != nil && o.AdditionalProperties.Schema != nil && n.AdditionalProperties != nil && n.AdditionalProperties.Schema != nil {
		out = append(out, compareSchema(path+"{}", o.AdditionalProperties.Schema, n.AdditionalProperties.Schema)...)
	}
	return out
}
