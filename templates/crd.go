package templates

import (
	"context"
	"strings"

	"cuelang.org/go/cue"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/templates/openapi"
)

// crdOptions is the template's optional crd block.
type crdOptions struct {
	Plural         string                                           `json:"plural"`
	Singular       string                                           `json:"singular"`
	ShortNames     []string                                         `json:"shortNames"`
	Categories     []string                                         `json:"categories"`
	Scope          string                                           `json:"scope"`
	PrinterColumns []apiextensionsv1.CustomResourceColumnDefinition `json:"printerColumns"`
}

// buildCRD generates the CustomResourceDefinition for the template's parent
// kind: the parent.spec schema, the status schema (parent.status, every field
// the template's status can produce, and the engine's own fields), the status
// subresource, and the crd block's names, scope and printer columns.
func (c *compiler) buildCRD(path string, t *Template, shape *openapi.StatusShape) (*apiextensionsv1.CustomResourceDefinition, error) {
	var opts crdOptions
	if cv := t.value.LookupPath(pathCRD); cv.Exists() {
		if err := cv.Decode(&opts); err != nil {
			return nil, fromCUE(c.root, path, err)
		}
	}
	kind := t.GVK.Kind
	if opts.Plural == "" {
		opts.Plural = Plural(strings.ToLower(kind))
	}
	if opts.Singular == "" {
		opts.Singular = strings.ToLower(kind)
	}
	scope := apiextensionsv1.NamespaceScoped
	switch opts.Scope {
	case "", "Namespaced":
	case "Cluster":
		scope = apiextensionsv1.ClusterScoped
	default:
		return nil, c.problemf(path, t.value.LookupPath(pathCRD), "crd.scope", `must be "Namespaced" or "Cluster", not %q`, opts.Scope)
	}

	spec := apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr(true)}
	if sv := t.value.LookupPath(pathSpec); sv.Exists() {
		spec = openapi.SchemaOf(sv)
		if fe := openapi.Immutable(sv, &spec); fe != nil {
			return nil, c.problemf(path, fe.Value, "parent."+fe.Path, "%s", fe.Msg)
		}
	}
	root := apiextensionsv1.JSONSchemaProps{
		Type:        "object",
		Description: kind + " is reconciled by the engine from template " + t.Path + ".",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"apiVersion": {Type: "string"},
			"kind":       {Type: "string"},
			"metadata":   {Type: "object"},
			"spec":       spec,
			"status":     openapi.StatusSchema(c.ctx, t.value, shape),
		},
	}
	if openapi.HasRequired(t.value.LookupPath(pathSpec)) {
		root.Required = []string{"spec"}
	}

	columns := append(opts.PrinterColumns,
		apiextensionsv1.CustomResourceColumnDefinition{Name: "Ready", Type: "string", JSONPath: `.status.conditions[?(@.type=="Ready")].status`},
		apiextensionsv1.CustomResourceColumnDefinition{Name: "Stalled", Type: "string", JSONPath: `.status.conditions[?(@.type=="Stalled")].status`, Description: "True when only a person can unblock the object"},
		apiextensionsv1.CustomResourceColumnDefinition{Name: "Synced", Type: "string", JSONPath: `.status.conditions[?(@.type=="Synced")].status`, Priority: 1},
		apiextensionsv1.CustomResourceColumnDefinition{Name: "Reason", Type: "string", JSONPath: `.status.conditions[?(@.type=="Stalled")].reason`, Priority: 1},
		apiextensionsv1.CustomResourceColumnDefinition{Name: "Revision", Type: "integer", JSONPath: `.status.templateRevision.number`, Description: "The template revision the object runs"},
		apiextensionsv1.CustomResourceColumnDefinition{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
	)
	return &apiextensionsv1.CustomResourceDefinition{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{
			Name:   opts.Plural + "." + t.GVK.Group,
			Labels: map[string]string{contract.LabelManagedBy: contract.ManagedByValue},
			Annotations: map[string]string{
				contract.AnnotationCRDTemplate:     t.Path,
				contract.AnnotationCRDTemplateHash: t.Hash,
			},
		},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: t.GVK.Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Kind:       kind,
				ListKind:   kind + "List",
				Plural:     opts.Plural,
				Singular:   opts.Singular,
				ShortNames: opts.ShortNames,
				Categories: opts.Categories,
			},
			Scope: scope,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name:                     t.GVK.Version,
				Served:                   true,
				Storage:                  true,
				Schema:                   &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &root},
				Subresources:             &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				AdditionalPrinterColumns: columns,
			}},
		},
	}, nil
}

// checkDefaults checks the CRD's defaults with the apiserver's own code, as
// it does when the CRD is created: each default must be valid against its
// schema and hold no field the schema would drop. A default the apiserver
// refuses is the template's error, at the field it defaults.
func (c *compiler) checkDefaults(path string, t *Template) error {
	errs, err := structuraldefaulting.ValidateDefaults(context.Background(), field.NewPath("openAPIV3Schema"), t.schema, true, true)
	if err != nil {
		return &Error{Template: path, Problems: []Problem{{Path: "parent", Msg: "checking the CRD's defaults: " + err.Error()}}}
	}
	if len(errs) == 0 {
		return nil
	}
	e := &Error{Template: path}
	for _, fe := range errs {
		at := append([]string{"parent"}, defaultedField(fe.Field)...)
		sels := make([]cue.Selector, len(at))
		for i, name := range at {
			sels[i] = cue.Str(name)
		}
		e.Problems = append(e.Problems, c.problemf(path, t.value.LookupPath(cue.MakePath(sels...)), strings.Join(at, "."),
			"the apiserver refuses this default in the CRD: %s", fe.ErrorBody()).Problems...)
	}
	return e
}

// defaultedField turns the schema path of a default the apiserver refuses
// ("openAPIV3Schema.properties[spec].properties[labels].default.app") into the path of the
// field it defaults (spec.labels).
func defaultedField(schemaPath string) []string {
	var out []string
	for _, part := range strings.Split(strings.TrimPrefix(schemaPath, "openAPIV3Schema."), ".") {
		name, ok := strings.CutPrefix(part, "properties[")
		if !ok {
			break
		}
		out = append(out, strings.TrimSuffix(name, "]"))
	}
	return out
}

// Plural makes the English plural Kubernetes tools expect for a lower-case
// kind: the resource name of a template's CRD, and engine rbac's guess for
// other kinds.
func Plural(s string) string {
	switch {
	case strings.HasSuffix(s, "s"), strings.HasSuffix(s, "x"), strings.HasSuffix(s, "z"),
		strings.HasSuffix(s, "ch"), strings.HasSuffix(s, "sh"):
		return s + "es"
	case strings.HasSuffix(s, "y") && len(s) > 1 && !strings.ContainsRune("aeiou", rune(s[len(s)-2])):
		return s[:len(s)-1] + "ies"
	}
	return s + "s"
}

func ptr[T any](x T) *T { return &x }
