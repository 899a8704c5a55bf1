package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/cuengine/engine/engine"
	"github.com/cuengine/engine/templates"
)

type renderOptions struct {
	templates string
	file      string
	observed  string
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

--observed gives the live state of children, as Kubernetes objects (for
example "kubectl get deployment mykind -o yaml"); each is matched to the child
with the same apiVersion, kind and name.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&o.templates, "templates", "templates", "templates directory")
	cmd.Flags().StringVarP(&o.file, "filename", "f", "", `custom resource YAML file ("-" for stdin)`)
	cmd.Flags().StringVar(&o.observed, "observed", "", "YAML file with the live state of children")
	_ = cmd.MarkFlagRequired("filename")
	return cmd
}

func (o *renderOptions) run(stdin io.Reader, stdout, stderr io.Writer) error {
	set, err := templates.Load(o.templates)
	if err != nil {
		return &exitError{code: 1, msg: err.Error()}
	}
	parents, err := readObjects(o.file, stdin)
	if err != nil {
		return err
	}
	var live []*unstructured.Unstructured
	if o.observed != "" {
		if live, err = readObjects(o.observed, nil); err != nil {
			return err
		}
	}
	failed := false
	for i, parent := range parents {
		if i > 0 {
			fmt.Fprintln(stdout, "---")
		}
		if err := renderOne(set, parent, live, stdout, stderr); err != nil {
			failed = true
			fmt.Fprintf(stderr, "%s %s: %v\n", parent.GetKind(), parent.GetName(), err)
		}
	}
	if failed {
		return &exitError{code: 1}
	}
	return nil
}

func renderOne(set *templates.Set, parent *unstructured.Unstructured, live []*unstructured.Unstructured, stdout, stderr io.Writer) error {
	t, ok := set.Lookup(parent.GroupVersionKind())
	if !ok {
		var known []string
		for _, t := range set.Templates() {
			known = append(known, t.GVK.Kind+" ("+t.GVK.GroupVersion().String()+")")
		}
		return fmt.Errorf("no template for %s; templates exist for %s", parent.GroupVersionKind(), strings.Join(known, ", "))
	}
	if parent.GetNamespace() == "" && t.CRD().Spec.Scope != "Cluster" {
		parent.SetNamespace("default")
	}
	res, err := t.Evaluate(templates.Input{Parent: parent})
	if err != nil {
		return err
	}
	if observed := matchObserved(res, live); len(observed) > 0 {
		if res, err = t.Evaluate(templates.Input{Parent: parent, Observed: observed}); err != nil {
			return err
		}
	}
	for _, p := range res.Pruned {
		fmt.Fprintf(stderr, "warning: %s %s: unknown field %q dropped (not in the schema of %s)\n", parent.GetKind(), parent.GetName(), p, t.Path)
	}
	for _, c := range res.Children {
		obj, err := engine.Desired(parent, t.Policy, engine.OfflineScoper{}, c)
		if err != nil {
			return err
		}
		if err := writeYAML(stdout, fmt.Sprintf("child %q", c.Name), obj.Object); err != nil {
			return err
		}
		fmt.Fprintln(stdout, "---")
	}
	for _, r := range res.Resources {
		doc := map[string]any{"provider": r.Provider, "spec": r.Spec, "deletionPolicy": r.DeletionPolicy}
		if err := writeYAML(stdout, fmt.Sprintf("resource %q (external)", r.Name), doc); err != nil {
			return err
		}
		fmt.Fprintln(stdout, "---")
	}
	out := parent.DeepCopy()
	for _, p := range res.Pruned {
		unstructured.RemoveNestedField(out.Object, strings.Split(p, ".")...)
	}
	if res.Status != nil {
		out.Object["status"] = res.Status
	}
	comment := "parent with the status the template computes"
	if res.Ready != nil {
		comment += fmt.Sprintf(" (template says ready: %t)", *res.Ready)
	}
	return writeYAML(stdout, comment, out.Object)
}

// matchObserved maps each live object to the local name of the child with the
// same apiVersion, kind and name.
func matchObserved(res *templates.Result, live []*unstructured.Unstructured) map[string]any {
	observed := map[string]any{}
	for _, c := range res.Children {
		for _, l := range live {
			if l.GetAPIVersion() == c.Object.GetAPIVersion() && l.GetKind() == c.Object.GetKind() && l.GetName() == c.Object.GetName() {
				observed[c.Name] = l.Object
			}
		}
	}
	return observed
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
	var out []*unstructured.Unstructured
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
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetAPIVersion() == "" || u.GetKind() == "" {
			return nil, fmt.Errorf("%s: document %d: apiVersion and kind are required", path, i)
		}
		if items, ok := m["items"].([]any); ok && strings.HasSuffix(u.GetKind(), "List") {
			for _, it := range items {
				if im, ok := it.(map[string]any); ok {
					out = append(out, &unstructured.Unstructured{Object: im})
				}
			}
			continue
		}
		out = append(out, u)
	}
	return out, nil
}
