package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/templates"
)

// The corpus of templates written by others (testdata/corpus/SOURCES.md):
// ports of other projects' examples, and Kubernetes' own example manifests
// as the children of small templates.
var corpusDirs = []string{"testdata/corpus/templates", "testdata/corpus/manifests"}

// TestCorpus runs every corpus template in one engine, with one parent
// each, all at once: the parent of the template's test case "live", or
// else of its case "instance". Each parent must become Synced at its
// generation, every child the template wants for it, evaluated against
// the live children, must exist (the whole chain of a template whose
// children wait for others: a Service for a ready Deployment, an Ingress
// for the Service), and the status the template computes must be the one
// stored.
func TestCorpus(t *testing.T) {
	dir := t.TempDir()
	var cases []string // the directories of the cases applied
	for _, d := range corpusDirs {
		files, err := filepath.Glob(filepath.Join(repo, d, "*.cue"))
		require.NoError(t, err)
		require.NotEmpty(t, files, d)
		for _, f := range files {
			b, err := os.ReadFile(f)
			require.NoError(t, err)
			dst := filepath.Join(dir, filepath.Base(f))
			_, err = os.Stat(dst)
			require.True(t, os.IsNotExist(err), "two corpus templates named %s", filepath.Base(f))
			require.NoError(t, os.WriteFile(dst, b, 0o644))
			name := strings.TrimSuffix(filepath.Base(f), ".cue")
			c := filepath.Join(repo, d, "tests", name, "live")
			if _, err := os.Stat(c); err != nil {
				c = filepath.Join(repo, d, "tests", name, "instance")
			}
			_, err = os.Stat(filepath.Join(c, "parent.yaml"))
			require.NoError(t, err, "corpus template %s has no test case live or instance", name)
			cases = append(cases, c)
		}
	}
	vet, err := execCommand(filepath.Join(bin, "engine"), "vet", "--templates", dir).CombinedOutput()
	require.NoError(t, err, "engine vet refuses the corpus:\n%s", vet)
	set, err := templates.Load(dir)
	require.NoError(t, err)
	for _, crd := range installCRDs(t, dir) {
		if len(crd.Spec.Versions) > 1 {
			// Nothing serves its conversions in this test, and the
			// namespace controller reads every object of a kind in its
			// preferred version: left behind, a CronJob stored in v1
			// keeps every later namespace deletion from finishing. The
			// CRD goes after the engine stops, with its objects.
			t.Cleanup(func() {
				if out, err := kubectlErr("delete", "crd", crd.Name, "--wait", "--timeout=2m"); err != nil {
					t.Errorf("cleanup: deleting CRD %s: %v: %s", crd.Name, err, out)
				}
			})
		}
	}
	startEngine(t, dir)
	ns := namespace(t)
	ctx := context.Background()
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(discovery.NewDiscoveryClientForConfigOrDie(cluster.Config)))

	type applied struct {
		tm   *templates.Template
		gvr  schema.GroupVersionResource
		name string
		what string // the case, for messages
	}
	var parents []applied
	for _, c := range cases {
		parent := readObject(t, filepath.Join(c, "parent.yaml"))
		parent.SetNamespace(ns)
		tm, ok := set.Lookup(parent.GroupVersionKind())
		require.True(t, ok, "%s: no template for %s", c, parent.GroupVersionKind())
		if tm.HasReferences() {
			// The objects the template reads and does not own: the case's
			// observed state, which the test creates as someone else would.
			for _, obj := range readObjects(t, filepath.Join(c, "observed.yaml")) {
				obj.SetNamespace(ns)
				createObject(t, mapper, obj)
			}
		}
		gvr := resource(t, mapper, parent.GroupVersionKind())
		_, err := dyn.Resource(gvr).Namespace(ns).Create(ctx, parent, metav1.CreateOptions{})
		require.NoError(t, err, c)
		what, _ := filepath.Rel(repo, c)
		parents = append(parents, applied{tm: tm, gvr: gvr, name: parent.GetName(), what: what})
	}

	// Every parent converges: one wait for all of them, bounded.
	pending := map[string]string{}
	eventually(t, "every corpus parent Synced with its children", 3*time.Minute, func(ctx context.Context) (bool, error) {
		clear(pending)
		for _, p := range parents {
			if why := corpusConverged(ctx, mapper, p.tm, p.gvr, ns, p.name); why != "" {
				pending[p.what] = why
			}
		}
		return len(pending) == 0, nil
	})
	if t.Failed() {
		keys := make([]string, 0, len(pending))
		for k := range pending {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			t.Logf("%s: %s", k, pending[k])
		}
	}
}

// corpusConverged says why a parent has not converged yet, "" when it has:
// it is Synced at its generation, every child its template wants,
// evaluated against the live children and references, exists, and its
// stored status is what the template computes.
func corpusConverged(ctx context.Context, mapper meta.RESTMapper, tm *templates.Template, gvr schema.GroupVersionResource, ns, name string) string {
	p, err := dyn.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	gen, _, _ := unstructured.NestedInt64(p.Object, "status", "observedGeneration")
	synced, msg := "", ""
	conds, _, _ := unstructured.NestedSlice(p.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Synced" {
			synced, msg = fmt.Sprint(m["status"]), fmt.Sprintf("%v: %v", m["reason"], m["message"])
		}
	}
	if synced != "True" || gen != p.GetGeneration() {
		return fmt.Sprintf("Synced=%q (%s), observedGeneration %d of %d", synced, msg, gen, p.GetGeneration())
	}
	observed := map[string]any{}
	for _, gvk := range tm.ChildKinds() {
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return err.Error()
		}
		list, err := dyn.Resource(m.Resource).List(ctx, metav1.ListOptions{LabelSelector: contract.LabelParentUID + "=" + string(p.GetUID())})
		if err != nil {
			return err.Error()
		}
		for _, item := range list.Items {
			observed[item.GetLabels()[contract.LabelChild]] = item.Object
		}
	}
	refs, err := tm.References(p)
	if err != nil {
		return err.Error()
	}
	for _, r := range refs {
		m, err := mapper.RESTMapping(r.GVK.GroupKind(), r.GVK.Version)
		if err != nil {
			return err.Error()
		}
		where := r.Namespace
		if where == "" && m.Scope.Name() == meta.RESTScopeNameNamespace {
			where = ns
		}
		if r.ByName() {
			obj, err := dyn.Resource(m.Resource).Namespace(where).Get(ctx, r.ObjectName, metav1.GetOptions{})
			if err != nil {
				return err.Error()
			}
			observed[r.Name] = obj.Object
			continue
		}
		list, err := dyn.Resource(m.Resource).Namespace(where).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(r.Selector).String()})
		if err != nil {
			return err.Error()
		}
		items := []any{}
		for _, item := range list.Items { // sorted by name, as the engine sorts them
			items = append(items, item.Object)
		}
		observed[r.Name] = map[string]any{"items": items}
	}
	res, err := tm.Evaluate(templates.Input{Parent: p, Observed: observed})
	if err != nil {
		return "evaluating against the live state: " + err.Error()
	}
	var missing []string
	for _, c := range res.Children {
		m, err := mapper.RESTMapping(c.Object.GroupVersionKind().GroupKind(), c.Object.GroupVersionKind().Version)
		if err != nil {
			return err.Error()
		}
		where := c.Object.GetNamespace()
		if where == "" && m.Scope.Name() == meta.RESTScopeNameNamespace {
			where = ns
		}
		if _, err := dyn.Resource(m.Resource).Namespace(where).Get(ctx, c.Object.GetName(), metav1.GetOptions{}); err != nil {
			missing = append(missing, fmt.Sprintf("child %s (%s %s/%s): %v", c.Name, c.Object.GetKind(), where, c.Object.GetName(), err))
		}
	}
	if len(missing) > 0 {
		return strings.Join(missing, "; ")
	}
	// The status the template computes is the status stored, every field
	// of it (the apiserver drops what the CRD does not declare).
	live, _, _ := unstructured.NestedMap(p.Object, "status")
	for k, want := range res.Status {
		if got, ok := live[k]; !ok || !equality.Semantic.DeepEqual(normalizeJSON(want), normalizeJSON(got)) {
			return fmt.Sprintf("status.%s: the template computes %v, the stored status has %v", k, want, got)
		}
	}
	return ""
}

// normalizeJSON makes two JSON-like values comparable: numbers as float64.
func normalizeJSON(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return v
	}
	return out
}

// readObject reads the one object of a YAML file.
func readObject(t *testing.T, path string) *unstructured.Unstructured {
	t.Helper()
	objs := readObjects(t, path)
	require.Len(t, objs, 1, path)
	return objs[0]
}

// readObjects reads the objects of a multi-document YAML file.
func readObjects(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var objs []*unstructured.Unstructured
	r := utilyaml.NewYAMLReader(bufio.NewReader(f))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err, path)
		js, err := yaml.YAMLToJSON(doc)
		require.NoError(t, err, path)
		var m map[string]any
		require.NoError(t, utiljson.Unmarshal(js, &m), "%s: whole numbers as int64, as the apiserver's", path)
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
	require.NotEmpty(t, objs, path)
	return objs
}

// createObject creates an object the corpus's templates read.
func createObject(t *testing.T, mapper meta.RESTMapper, obj *unstructured.Unstructured) {
	t.Helper()
	gvr := resource(t, mapper, obj.GroupVersionKind())
	_, err := dyn.Resource(gvr).Namespace(obj.GetNamespace()).Create(context.Background(), obj, metav1.CreateOptions{})
	require.NoError(t, err, "creating %s %s", obj.GetKind(), obj.GetName())
}

// resource maps a kind to its resource.
func resource(t *testing.T, mapper meta.RESTMapper, gvk schema.GroupVersionKind) schema.GroupVersionResource {
	t.Helper()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	require.NoError(t, err, gvk.String())
	return m.Resource
}
