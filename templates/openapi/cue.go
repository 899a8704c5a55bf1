package openapi

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// cueOfKind writes a kind's OpenAPI schema as CUE: a definition #kind that
// a child is unified with, and one definition per schema it refers to.
// Definitions are closed, so a field the schema does not declare is an
// error ("field not allowed"); free-form maps (additionalProperties),
// x-kubernetes-preserve-unknown-fields and objects without properties stay
// open. Every field is optional: required fields the apiserver defaults, or
// that a later evaluation fills in, are not this check's business.
//
// Formats become CUE types where CUE has one (int32, int64), enums become
// disjunctions, int-or-string becomes int | string, and a oneOf or anyOf of
// bare types (a Quantity: string or number) the disjunction of those types.
// Value validations (patterns, bounds, lengths, CEL rules) are left to the
// apiserver.
func cueOfKind(ks *KindSchema) string {
	w := &cueWriter{defs: ks.defs, names: map[string]string{}, crd: ks.crd}
	var b strings.Builder
	b.WriteString("#kind: ")
	root := ks.defs[ks.root]
	if root == nil {
		root = &openAPISchema{}
	}
	w.object(&b, root, true)
	b.WriteString("\n")
	for i := 0; i < len(w.queue); i++ {
		name := w.queue[i]
		fmt.Fprintf(&b, "%s: ", w.names[name])
		w.schema(&b, ks.defs[name])
		b.WriteString("\n")
	}
	return b.String()
}

type cueWriter struct {
	defs  map[string]*openAPISchema
	names map[string]string // definition name to CUE identifier
	queue []string          // definitions to write, in order of first use
	crd   bool              // the kind is a CRD's (KindSchema.crd)
}

// ref returns the CUE identifier of a definition, queuing it the first time.
func (w *cueWriter) ref(ref string) string {
	name := refName(ref)
	if id, ok := w.names[name]; ok {
		return id
	}
	if _, ok := w.defs[name]; !ok {
		return "_" // a dangling reference checks nothing
	}
	id := "#" + identifier(name)
	w.names[name] = id
	w.queue = append(w.queue, name)
	return id
}

// identifier makes a definition name a CUE identifier:
// io.k8s.api.core.v1.PodSpec becomes io_k8s_api_core_v1_PodSpec.
func identifier(name string) string {
	var b strings.Builder
	for _, r := range name {
		if r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

func (w *cueWriter) schema(b *strings.Builder, s *openAPISchema) {
	if s == nil {
		b.WriteString("_")
		return
	}
	if s.Ref != "" {
		b.WriteString(w.ref(s.Ref))
		return
	}
	// openapi-gen writes a reference with a default as allOf: [{$ref}].
	if len(s.AllOf) == 1 && len(s.Type) == 0 && len(s.Properties) == 0 {
		w.schema(b, s.AllOf[0])
		return
	}
	if s.IntOrString {
		b.WriteString("int | string")
		return
	}
	if len(s.Enum) > 0 {
		for i, e := range s.Enum {
			if i > 0 {
				b.WriteString(" | ")
			}
			b.Write(e) // JSON literals are CUE literals
		}
		return
	}
	if len(s.Type) == 0 {
		if alts := typeAlternatives(s); alts != "" {
			b.WriteString(alts)
			return
		}
		if len(s.Properties) > 0 || s.AdditionalProperties != nil {
			w.object(b, s, false)
			return
		}
		b.WriteString("_")
		return
	}
	for i, t := range s.Type {
		if i > 0 {
			b.WriteString(" | ")
		}
		switch t {
		case "object":
			w.object(b, s, false)
		case "array":
			// A null item stays null; the apiserver refuses it unless
			// the items are nullable (a null field is another matter:
			// childProblems).
			b.WriteString("[...")
			if s.Items != nil && s.Items.Nullable {
				b.WriteString("null | ")
			}
			w.schema(b, s.Items)
			b.WriteString("]")
		case "string":
			b.WriteString("string")
		case "integer":
			switch s.Format {
			case "int32", "int64":
				b.WriteString(s.Format)
			default:
				b.WriteString("int")
			}
		case "number":
			b.WriteString("number")
		case "boolean":
			b.WriteString("bool")
		case "null":
			b.WriteString("null")
		default:
			b.WriteString("_")
		}
	}
}

// typeAlternatives is the disjunction of a oneOf or anyOf whose branches
// only name types (int-or-string, a Quantity), or "".
func typeAlternatives(s *openAPISchema) string {
	branches := s.OneOf
	if len(branches) == 0 {
		branches = s.AnyOf
	}
	var alts []string
	for _, br := range branches {
		if br == nil || len(br.Type) != 1 || len(br.Properties) > 0 || br.Items != nil || len(br.Enum) > 0 {
			return ""
		}
		switch br.Type[0] {
		case "string":
			alts = append(alts, "string")
		case "integer":
			alts = append(alts, "int")
		case "number":
			alts = append(alts, "number")
		case "boolean":
			alts = append(alts, "bool")
		default:
			return ""
		}
	}
	return strings.Join(alts, " | ")
}

// object writes a struct. Inside a definition it is closed unless the schema
// leaves it open. The kind's root also admits the engine's own dependsOn,
// readyWhen, ownership and cluster, which are never applied, and a CRD's root
// apiVersion, kind and metadata (an ObjectMeta), which the apiserver
// handles itself whether the CRD's schema lists them or not.
func (w *cueWriter) object(b *strings.Builder, s *openAPISchema, root bool) {
	open := s.PreserveUnknown || len(s.Properties) == 0 && s.AdditionalProperties == nil
	if ap := s.AdditionalProperties; ap != nil && ap.Schema == nil && ap.Allows {
		open = true
	}
	b.WriteString("{")
	names := make([]string, 0, len(s.Properties))
	for name := range s.Properties {
		names = append(names, name)
	}
	if s.EmbeddedResource || root && w.crd {
		for _, name := range []string{"apiVersion", "kind", "metadata"} {
			if _, ok := s.Properties[name]; !ok {
				names = append(names, name)
			}
		}
	}
	sort.Strings(names)
	for _, name := range names {
		b.WriteString(strconv.Quote(name))
		b.WriteString("?: ")
		switch p := s.Properties[name]; {
		case root && w.crd && name == "metadata":
			// The apiserver reads a custom object's metadata as an
			// ObjectMeta, whatever the CRD says of it.
			b.WriteString(w.ref(objectMetaRef))
		case p != nil:
			if w.crd && (p.Nullable || p.Default != nil) {
				// A CRD takes a null field only where the schema says
				// nullable, or has a default, which replaces it.
				b.WriteString("null | ")
			}
			w.schema(b, p)
		case name == "metadata":
			b.WriteString("{...}")
		default:
			b.WriteString("string")
		}
		b.WriteString(", ")
	}
	if root {
		b.WriteString("dependsOn?: _, readyWhen?: _, ownership?: _, cluster?: _, ")
	}
	if ap := s.AdditionalProperties; ap != nil && ap.Schema != nil {
		b.WriteString("[string]: ")
		if w.crd && ap.Schema.Nullable {
			b.WriteString("null | ")
		}
		w.schema(b, ap.Schema)
		b.WriteString(", ")
	}
	if open {
		b.WriteString("...")
	}
	b.WriteString("}")
}
