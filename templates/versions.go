package templates

import (
	"sort"
	"strings"

	"cuelang.org/go/cue"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/version"

	"github.com/cuengine/engine/templates/openapi"
	"github.com/cuengine/engine/templates/policy"
)

// Paths of the versions block, defined once.
var (
	pathVersions = cue.ParsePath("versions")
	pathIn       = cue.ParsePath("in")
	pathInSpec   = cue.ParsePath("in.spec")
	pathOutSpec  = cue.ParsePath("out.spec")
	pathOutStat  = cue.ParsePath("out.status")
)

// versionFields are the fields of one version in the versions block.
var versionFields = []string{"served", "storage", "deprecated", "deprecationWarning", "spec", "toHub", "fromHub"}

// Version is one version of a template's parent kind, as its CRD serves it.
type Version struct {
	// Name is the version, "v1".
	Name string
	// Served: the apiserver serves it; Storage: etcd holds objects in it.
	Served, Storage bool
	// Deprecated, with the warning clients get.
	Deprecated         bool
	DeprecationWarning string
	// Hub is the version the template is written against (parent's
	// apiVersion): every other converts to it and from it.
	Hub bool
}

// versionSet is a template's versions block, compiled.
type versionSet struct {
	list   []Version // the hub first, then by Kubernetes version priority
	others map[string]*otherVersion
}

// otherVersion is what converting to or from one version needs.
type otherVersion struct {
	spec           cue.Value // the version's spec schema
	toHub, fromHub cue.Value // the conversion blocks: {in: _, out: {...}}
	structural     *structuralschema.Structural
}

// Versions returns the versions of the template's parent kind: the one of
// parent.apiVersion, served and stored, for a template without a versions
// block.
func (t *Template) Versions() []Version {
	if t.versions == nil {
		return []Version{{Name: t.GVK.Version, Served: true, Storage: true, Hub: true}}
	}
	return append([]Version(nil), t.versions.list...)
}

// Converts reports whether the kind has several versions, so its CRD
// names the engine's conversion webhook.
func (t *Template) Converts() bool { return t.versions != nil && len(t.versions.list) > 1 }

// ConvertsStatus reports whether a conversion of the versions block gives
// a status of its own (out.status), so that the status differs by version;
// without one, every version carries the hub's status as it is.
func (t *Template) ConvertsStatus() bool {
	if t.versions == nil {
		return false
	}
	for _, o := range t.versions.others {
		if o.toHub.LookupPath(pathOutStat).Exists() || o.fromHub.LookupPath(pathOutStat).Exists() {
			return true
		}
	}
	return false
}

// StorageVersion is the version etcd holds the kind's objects in.
func (t *Template) StorageVersion() string {
	for _, v := range t.Versions() {
		if v.Storage {
			return v.Name
		}
	}
	return t.GVK.Version
}

// LookupGroupKind returns the template for a parent kind in any of its
// versions.
func (s *Set) LookupGroupKind(gk schema.GroupKind) (*Template, bool) {
	for _, t := range s.templates {
		if t.GVK.GroupKind() == gk {
			return t, true
		}
	}
	return nil, false
}

// decodeVersions reads the versions block: every version the kind serves,
// the hub (parent.apiVersion's) among them, exactly one stored, and each
// other version's spec schema and its conversions to the hub and back.
func (c *compiler) decodeVersions(path string, t *Template) error {
	vv := t.value.LookupPath(pathVersions)
	if !vv.Exists() {
		return nil
	}
	it, err := vv.Fields(cue.Optional(true))
	if err != nil {
		return c.problemf(path, vv, "versions", "must be a struct of version name to version, as in versions: v1: {...}")
	}
	vs := &versionSet{others: map[string]*otherVersion{}}
	hubDeclared := false
	var stored []string
	for it.Next() {
		name := it.Selector().Unquoted()
		v := it.Value()
		at := "versions." + name
		if errs := validation.IsDNS1035Label(name); len(errs) > 0 {
			return c.problemf(path, v, at, "%q is not a version name (a DNS label, as in v1 or v2beta1): %s", name, strings.Join(errs, "; "))
		}
		if err := policy.KnownFields(at, v, versionFields); err != nil {
			return c.blockError(path, v, err)
		}
		ver, err := c.versionFlags(path, v, at)
		if err != nil {
			return err
		}
		ver.Name = name
		if ver.Storage {
			stored = append(stored, name)
			if len(stored) > 1 {
				return c.problemf(path, v.LookupPath(cue.ParsePath("storage")), at+".storage",
					"versions %s are both stored: exactly one version has storage: true", strings.Join(stored, " and "))
			}
		}
		spec, toHub, fromHub := v.LookupPath(cue.ParsePath("spec")), v.LookupPath(cue.ParsePath("toHub")), v.LookupPath(cue.ParsePath("fromHub"))
		if name == t.GVK.Version {
			hubDeclared = true
			ver.Hub = true
			for _, f := range []cue.Value{spec, toHub, fromHub} {
				if f.Exists() {
					return c.problemf(path, f, at, "%s is the hub (parent.apiVersion): its schema is parent.spec and it converts to nothing; declare only served, storage and deprecated here", name)
				}
			}
			if !ver.Served {
				return c.problemf(path, v, at+".served", "the hub %s (parent.apiVersion) is the version the engine reads and writes: it must be served", name)
			}
			vs.list = append(vs.list, ver)
			continue
		}
		if !spec.Exists() {
			return c.problemf(path, v, at+".spec", "missing: each version other than the hub declares its spec schema, as parent.spec does for the hub")
		}
		for _, d := range []struct {
			name string
			v    cue.Value
			what string
		}{{"toHub", toHub, name + " to the hub " + t.GVK.Version}, {"fromHub", fromHub, "the hub " + t.GVK.Version + " to " + name}} {
			if !d.v.Exists() {
				return c.problemf(path, v, at+"."+d.name, "missing: the conversion from %s, as in %s: {in: _, out: spec: {...}} (the apiserver converts both ways)", d.what, d.name)
			}
			if in := d.v.LookupPath(pathIn); !in.Exists() {
				return c.problemf(path, d.v, at+"."+d.name+".in", "missing: declare in: _ and write out: spec: {...} from it")
			}
			if out := d.v.LookupPath(pathOutSpec); !out.Exists() {
				return c.problemf(path, d.v, at+"."+d.name+".out.spec", "missing: the converted object's spec")
			}
		}
		vs.others[name] = &otherVersion{spec: spec, toHub: toHub, fromHub: fromHub}
		vs.list = append(vs.list, ver)
	}
	if !hubDeclared {
		return c.problemf(path, vv, "versions", "the hub %s (parent.apiVersion, the version the template is written against) is not declared: add versions: %s: {}", t.GVK.Version, t.GVK.Version)
	}
	if len(stored) == 0 {
		return c.problemf(path, vv, "versions", "no version is stored: mark the one etcd holds with storage: true")
	}
	sort.SliceStable(vs.list, func(i, j int) bool {
		a, b := vs.list[i], vs.list[j]
		if a.Hub != b.Hub {
			return a.Hub
		}
		return version.CompareKubeAwareVersionStrings(a.Name, b.Name) > 0
	})
	t.versions = vs
	return nil
}

// versionFlags reads a version's served (true when absent), storage,
// deprecated and deprecationWarning (which implies deprecated).
func (c *compiler) versionFlags(path string, v cue.Value, at string) (Version, error) {
	ver := Version{Served: true}
	for _, f := range []struct {
		name string
		b    *bool
	}{{"served", &ver.Served}, {"storage", &ver.Storage}, {"deprecated", &ver.Deprecated}} {
		if fv := v.LookupPath(cue.ParsePath(f.name)); fv.Exists() {
			b, err := fv.Bool()
			if err != nil {
				return ver, c.problemf(path, fv, at+"."+f.name, "must be true or false")
			}
			*f.b = b
		}
	}
	if fv := v.LookupPath(cue.ParsePath("deprecationWarning")); fv.Exists() {
		s, err := fv.String()
		if err != nil {
			return ver, c.problemf(path, fv, at+".deprecationWarning", "must be a string")
		}
		ver.DeprecationWarning, ver.Deprecated = s, true
	}
	return ver, nil
}

// versionCRD gives the generated CRD every version of the versions block:
// each with its own spec schema (the status is the hub's), the hub first
// (the schema the engine prunes and admits with), and the conversion
// webhook when there are several. The webhook's clientConfig is the
// installer's (engine.InstallCRDs): where the engine is reached depends on
// how it runs.
func (c *compiler) versionCRD(path string, t *Template) error {
	if t.versions == nil {
		return nil
	}
	hub := t.crd.Spec.Versions[0]
	var out []apiextensionsv1.CustomResourceDefinitionVersion
	for _, v := range t.versions.list {
		cv := *hub.DeepCopy()
		cv.Name, cv.Served, cv.Storage, cv.Deprecated = v.Name, v.Served, v.Storage, v.Deprecated
		if v.DeprecationWarning != "" {
			cv.DeprecationWarning = ptr(v.DeprecationWarning)
		}
		if !v.Hub {
			o := t.versions.others[v.Name]
			spec := openapi.SchemaOf(o.spec)
			if fe := openapi.Immutable(o.spec, &spec); fe != nil {
				return c.problemf(path, fe.Value, "versions."+v.Name+"."+fe.Path, "%s", fe.Msg)
			}
			root := cv.Schema.OpenAPIV3Schema
			root.Properties["spec"] = spec
			root.Required = nil
			if openapi.HasRequired(o.spec) {
				root.Required = []string{"spec"}
			}
			s, err := structural(&apiextensionsv1.CustomResourceDefinition{Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{cv}}})
			if err != nil {
				return &Error{Template: path, Problems: []Problem{{Pos: userPos(c.root, o.spec), Path: "versions." + v.Name + ".spec",
					Msg: "generated schema is not structural: " + err.Error()}}}
			}
			o.structural = s
		}
		out = append(out, cv)
	}
	t.crd.Spec.Versions = out
	if len(out) > 1 {
		t.crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
			Strategy: apiextensionsv1.WebhookConverter,
			Webhook:  &apiextensionsv1.WebhookConversion{ConversionReviewVersions: []string{"v1"}},
		}
	}
	return nil
}
