package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/templates"
)

type renderOptions struct {
	templates string
	file      string
	observed  string
	uid       string
	limits    render.Limits
	// budget is the command's one render.Budget: an object given twice is
	// not evaluated again over a limit; nil is a new one.
	budget *render.Budget
	crds   []string
}

func newRenderCommand() *cobra.Command {
	o := &renderOptions{}
	cmd := &cobra.Command{
		Use:   "render",
		Short: "Print the children and status a custom resource renders to, without a cluster",
		Long: `Render evaluates the template of each custom resource in -f and prints the
desired children as YAML documents, followed by the parent with the status the
template computes. Fields the schema does not declare are dropped with a
warning, as the apiserver would drop them.

--observed gives the live state, as YAML documents: Kubernetes objects (for
example "kubectl get deployment mykind -o yaml"), each matched to the child
with the same apiVersion, kind and name (and namespace, when it has one), or
to the references it matches (by name, or by selector); and maps of local
name to the observation of an external resource (such as "assets: {name:
shop-assets-1a2b3c4d}"). A reference that neither gives is an error: the
engine would wait for it. The parent is rendered again with the children it
matched until the matches settle, as the reconciles converge live: a child
that waits for another's observed state is rendered when both are given.

The apiserver gives every object a uid, a generation and a creation
timestamp; a template that reads one needs it in -f (the uid also with
--uid), or the error says which is missing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&o.templates, "templates", "templates", "templates directory")
	addCRDsFlag(cmd.Flags(), &o.crds)
	cmd.Flags().StringVarP(&o.file, "filename", "f", "", `custom resource YAML file ("-" for stdin)`)
	cmd.Flags().StringVar(&o.observed, "observed", "", "YAML file with the live state of children, resources and references")
	cmd.Flags().StringVar(&o.uid, "uid", "", "metadata.uid of the custom resource in -f, for a file without one")
	addLimitFlags(cmd.Flags(), &o.limits)
	_ = cmd.MarkFlagRequired("filename")
	return cmd
}

func (o *renderOptions) run(stdin io.Reader, stdout, stderr io.Writer) error {
	set, err := loadOffline(o.templates, o.crds, stderr)
	if err != nil {
		return asExitError(err)
	}
	parents, err := readObjects(o.file, stdin)
	if err != nil {
		return err
	}
	if o.uid != "" && len(parents) > 1 {
		return fmt.Errorf("--uid is the uid of one custom resource, and %s holds %d", o.file, len(parents))
	}
	var given render.Given
	if o.observed != "" {
		if given, err = readObserved(o.observed); err != nil {
			return err
		}
	}
	if o.budget == nil {
		o.budget = render.NewBudget(render.BudgetLimits{})
	}
	opts := render.Options{Limits: o.limits, Budget: o.budget}
	failed := false
	for i, parent := range parents {
		if i > 0 {
			fmt.Fprintln(stdout, "---")
		}
		if err := o.renderOne(set, parent, given, opts, stdout, stderr); err != nil {
			failed = true
			fmt.Fprintf(stderr, "%s %s: %v\n", parent.GetKind(), parent.GetName(), err)
		}
	}
	if failed {
		return &exitError{code: 1}
	}
	return nil
}

func (o *renderOptions) renderOne(set *templates.Set, parent *unstructured.Unstructured, given render.Given, opts render.Options, stdout, stderr io.Writer) error {
	if o.uid != "" {
		if uid := string(parent.GetUID()); uid != "" && uid != o.uid {
			return fmt.Errorf("metadata.uid is %s in -f and %s in --uid; give one", uid, o.uid)
		}
		parent.SetUID(types.UID(o.uid))
	}
	r, err := renderParent(set, parent, given, opts)
	if err != nil {
		return advise(err, func(field string) string {
			if field == "uid" {
				return "-f or --uid"
			}
			return "-f"
		})
	}
	for _, p := range r.result.Pruned {
		fmt.Fprintf(stderr, "warning: %s %s: unknown field %q dropped (not in the schema of %s)\n", parent.GetKind(), parent.GetName(), p, r.template.Path)
	}
	return r.write(stdout)
}

// rendering is what one parent renders to offline.
type rendering struct {
	template *templates.Template
	parent   *unstructured.Unstructured // as given, its namespace defaulted
	result   *templates.Result
	children []*unstructured.Unstructured // as applied: with the engine's namespace, owner and labels
}

// renderParent renders the template of parent offline, within the limits
// and the budget of opts, from the given live state (render.Offline: to the
// fixed point the reconciles converge to).
func renderParent(set *templates.Set, parent *unstructured.Unstructured, given render.Given, opts render.Options) (*rendering, error) {
	t, ok := set.Lookup(parent.GroupVersionKind())
	if other, found := set.LookupGroupKind(parent.GroupVersionKind().GroupKind()); !ok && found && declares(other, parent.GroupVersionKind().Version) {
		// In another version of its kind: converted to the hub, as the
		// apiserver does before the engine reads it (testversions.go).
		hub, err := other.Convert(parent, other.GVK.Version)
		if err != nil {
			return nil, err
		}
		t, ok, parent = other, true, hub
	}
	if !ok {
		var known []string
		for _, t := range set.Templates() {
			known = append(known, t.GVK.Kind+" ("+t.GVK.GroupVersion().String()+")")
		}
		return nil, fmt.Errorf("no template for %s; templates exist for %s", parent.GroupVersionKind(), strings.Join(known, ", "))
	}
	if parent.GetNamespace() == "" && t.CRD().Spec.Scope != "Cluster" {
		parent.SetNamespace("default")
	}
	opts.Scoper = render.OfflineScoper{}
	out, err := render.Offline(t, parent, given, opts)
	if err != nil {
		return nil, err
	}
	if len(out.Refused) > 0 {
		return nil, out.Refused[0]
	}
	// In the template's order, as the children are printed.
	byName := make(map[string]*unstructured.Unstructured, len(out.Children))
	for _, obj := range out.Children {
		byName[obj.GetLabels()[contract.LabelChild]] = obj
	}
	r := &rendering{template: t, parent: parent, result: out.Result}
	for _, c := range out.Result.Children {
		r.children = append(r.children, byName[c.Name])
	}
	return r, nil
}

// advise returns err, rewritten to say where to give the metadata the
// parent lacks when it is a *render.MissingMetadataError.
func advise(err error, where func(field string) string) error {
	var mm *render.MissingMetadataError
	if !errors.As(err, &mm) {
		return err
	}
	var b strings.Builder
	for _, f := range mm.Fields {
		fmt.Fprintf(&b, "the parent has no metadata.%s; give one in %s\n", f, where(f))
	}
	them := "it"
	if len(mm.Fields) > 1 {
		them = "them"
	}
	return fmt.Errorf("%sthe template fails without %s: %w", b.String(), them, mm.Err)
}

// write prints the rendering as YAML documents: the children, the external
// resources, then the parent as stored with the status the template computes.
func (r *rendering) write(w io.Writer) error {
	for i, c := range r.result.Children {
		comment := fmt.Sprintf("child %q", c.Name)
		if c.Cluster != "" {
			comment += " (in cluster " + c.Cluster + ")"
		}
		if len(c.Ownership) > 0 {
			var left []string
			for _, p := range slices.Sorted(maps.Keys(c.Ownership)) {
				left = append(left, p+" "+c.Ownership[p])
			}
			comment += " (left to other writers: " + strings.Join(left, ", ") + ")"
		}
		if err := writeYAML(w, comment, r.children[i].Object); err != nil {
			return err
		}
		fmt.Fprintln(w, "---")
	}
	for _, res := range r.result.Resources {
		if err := writeYAML(w, fmt.Sprintf("resource %q (external)", res.Name), res.Document()); err != nil {
			return err
		}
		fmt.Fprintln(w, "---")
	}
	out := r.parent.DeepCopy()
	for _, p := range r.result.Pruned {
		unstructured.RemoveNestedField(out.Object, strings.Split(p, ".")...)
	}
	if r.result.Status != nil {
		out.Object["status"] = r.result.Status
	}
	comment := "parent with the status the template computes"
	if r.result.Ready != nil {
		comment += fmt.Sprintf(" (template says ready: %t)", *r.result.Ready)
	}
	return writeYAML(w, comment, out.Object)
}

func writeYAML(w io.Writer, comment string, obj any) error {
	b, err := yaml.Marshal(obj)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "# %s\n%s", comment, b)
	return nil
}

// readObjects reads the Kubernetes objects of a multi-document YAML or JSON file.
func readObjects(path string, stdin io.Reader) ([]*unstructured.Unstructured, error) {
	docs, err := readDocuments(path, stdin)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, d := range docs {
		objs, ok := asObjects(d.content)
		if !ok {
			return nil, fmt.Errorf("%s: document %d: apiVersion and kind are required", path, d.index)
		}
		out = append(out, objs...)
	}
	return out, nil
}

// readObserved reads observed state from a multi-document YAML or JSON file:
// a document with apiVersion and kind is a live Kubernetes object (a List
// gives its items); any other document maps local names to observations,
// such as a resource's {name, url}.
func readObserved(path string) (render.Given, error) {
	docs, err := readDocuments(path, nil)
	if err != nil {
		return render.Given{}, err
	}
	var given render.Given
	for _, d := range docs {
		if objs, ok := asObjects(d.content); ok {
			given.Live = append(given.Live, objs...)
			continue
		}
		if given.ByName == nil {
			given.ByName = map[string]any{}
		}
		maps.Copy(given.ByName, d.content)
	}
	return given, nil
}

// asObjects returns a document as Kubernetes objects, the items of a List
// one by one; false when it has no apiVersion and kind.
func asObjects(m map[string]any) ([]*unstructured.Unstructured, bool) {
	u := &unstructured.Unstructured{Object: m}
	if u.GetAPIVersion() == "" || u.GetKind() == "" {
		return nil, false
	}
	items, ok := m["items"].([]any)
	if !ok || !strings.HasSuffix(u.GetKind(), "List") {
		return []*unstructured.Unstructured{u}, true
	}
	var out []*unstructured.Unstructured
	for _, it := range items {
		if im, ok := it.(map[string]any); ok {
			out = append(out, &unstructured.Unstructured{Object: im})
		}
	}
	return out, true
}

// document is one non-empty document of a YAML or JSON file.
type document struct {
	index   int // from 1
	content map[string]any
}

// readDocuments reads the non-empty documents of a multi-document YAML or
// JSON file ("-" is stdin, when given).
func readDocuments(path string, stdin io.Reader) ([]document, error) {
	var data []byte
	var err error
	if path == "-" && stdin != nil {
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, err
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []document
	for i := 1; ; i++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, i, err)
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, i, err)
		}
		// utiljson keeps whole numbers as int64, as the apiserver does.
		var m map[string]any
		if err := utiljson.Unmarshal(js, &m); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, i, err)
		}
		if len(m) > 0 {
			out = append(out, document{index: i, content: m})
		}
	}
	return out, nil
}
