package reconciler

// The harness of the unit tests (the unit_*_test.go files): one reconciler built by New on
// controller-runtime's fake client, with fakes for the kind's template, the
// child cache, the event recorder and a provider. No control plane: `go
// test ./reconciler` runs in seconds.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/providers"
	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/revisions"
	"github.com/cuengine/engine/templates"
)

// The parent kinds of the templates the unit tests use: ../testdata/unit and
// the engine's integration tests' engine/testdata/templates.
var (
	unitMyKind  = schema.GroupVersionKind{Group: "webapp.my.domain", Version: "v1", Kind: "MyKind"}
	unitWebsite = schema.GroupVersionKind{Group: "test.cuengine.dev", Version: "v1", Kind: "Website"}
	unitLeaky   = schema.GroupVersionKind{Group: "test.cuengine.dev", Version: "v1", Kind: "Leaky"}
	unitTenant  = schema.GroupVersionKind{Group: "test.cuengine.dev", Version: "v1", Kind: "Tenant"}
	unitStore   = schema.GroupVersionKind{Group: "unit.cuengine.dev", Version: "v1", Kind: "Store"}
	unitBroken  = schema.GroupVersionKind{Group: "unit.cuengine.dev", Version: "v1", Kind: "Broken"}
	unitVault   = schema.GroupVersionKind{Group: "unit.cuengine.dev", Version: "v1", Kind: "Vault"}
	unitWaiter  = schema.GroupVersionKind{Group: "unit.cuengine.dev", Version: "v1", Kind: "Waiter"}
)

const (
	unitNamespace = "ns"
	// unitResync is the reconciler's resourceResync in the unit tests.
	unitResync = time.Hour
)

var unitTemplates = sync.OnceValues(func() (map[schema.GroupVersionKind]*templates.Template, error) {
	out := map[schema.GroupVersionKind]*templates.Template{}
	for _, dir := range []string{"../engine/testdata/templates", "../testdata/unit"} {
		set, err := templates.Load(dir)
		if err != nil {
			return nil, err
		}
		for _, t := range set.Templates() {
			out[t.GVK] = t
		}
	}
	return out, nil
})

// unitEnv is one reconciler of one kind on a fake apiserver.
type unitEnv struct {
	t   *testing.T
	ctx context.Context
	// store is the fake apiserver without the write counter, for the
	// test's own setup and reads.
	store    client.Client
	r        *Reconciler
	kind     *unitKind
	provider *fakeProvider
	events   *unitRecorder
	refs     *unitReferences

	mu     sync.Mutex
	writes map[string]int // by "verb Kind": apply, create, update, patch, delete, status
	reads  map[string]int // by "get Kind": the reads that reach the apiserver (the reconciler's client)
	// deletes lists each delete sent, in order: "Kind name propagation".
	deletes []string
	fail    map[string]error // injected: the error a write of that key returns
	// check, when set, may refuse a write by what it writes, as the
	// apiserver does an object over its size limit.
	check func(key string, obj client.Object) error
	// requeued lists the parents the status writer asked to reconcile
	// again (after a conflict).
	requeued []types.NamespacedName
}

// newUnitEnv builds the reconciler of gvk's template on a fake apiserver
// holding objs, with a fakeProvider registered as "fake".
func newUnitEnv(t *testing.T, gvk schema.GroupVersionKind, objs ...client.Object) *unitEnv {
	t.Helper()
	all, err := unitTemplates()
	require.NoError(t, err)
	tpl, ok := all[gvk]
	require.True(t, ok, "no template for %s", gvk)

	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	parentObj := &unstructured.Unstructured{}
	parentObj.SetGroupVersionKind(gvk)
	store := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(parentObj).WithObjects(objs...).Build()

	e := &unitEnv{t: t, ctx: context.Background(), store: store, writes: map[string]int{}, reads: map[string]int{}, fail: map[string]error{},
		kind: &unitKind{tpl: tpl}, provider: newFakeProvider(), events: &unitRecorder{}, refs: &unitReferences{store: store, tracked: map[types.NamespacedName][]templates.Reference{}}}
	counted := interceptor.NewClient(store, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			gvk, err := apiutil.GVKForObject(obj, c.Scheme())
			require.NoError(t, err)
			e.mu.Lock()
			e.reads["get "+gvk.Kind]++
			e.mu.Unlock()
			return c.Get(ctx, key, obj, opts...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			return e.write("create", obj, func() error { return c.Create(ctx, obj, opts...) })
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			return e.write("update", obj, func() error { return c.Update(ctx, obj, opts...) })
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if patch.Type() == types.ApplyPatchType { // the reconciler's applies (apply.go)
				b, err := patch.Data(obj)
				require.NoError(t, err)
				u := &unstructured.Unstructured{}
				require.NoError(t, u.UnmarshalJSON(b))
				po := &client.PatchOptions{}
				po.ApplyOptions(opts)
				require.Equal(t, contract.FieldManager, po.FieldManager)
				require.True(t, po.Force != nil && *po.Force, "applies take ownership")
				// The fake client applies an apply configuration as the
				// apiserver does (a create ignores the resource version
				// precondition) where its apply patch does not; the reply
				// is the metadata, as the metadata client's.
				return e.write("apply", u, func() error {
					cfg := client.ApplyConfigurationFromUnstructured(u)
					if err := c.Apply(ctx, cfg, client.FieldOwner(po.FieldManager), client.ForceOwnership); err != nil {
						return err
					}
					stored := e.get(u.GroupVersionKind(), u.GetNamespace(), u.GetName())
					require.NotNil(t, stored)
					obj.SetUID(stored.GetUID())
					obj.SetResourceVersion(stored.GetResourceVersion())
					return nil
				})
			}
			return e.write("patch", obj, func() error { return c.Patch(ctx, obj, patch, opts...) })
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			do := &client.DeleteOptions{}
			do.ApplyOptions(opts)
			policy := ""
			if do.PropagationPolicy != nil {
				policy = string(*do.PropagationPolicy)
			}
			e.mu.Lock()
			e.deletes = append(e.deletes, strings.TrimSpace(obj.GetObjectKind().GroupVersionKind().Kind+" "+obj.GetName()+" "+policy))
			e.mu.Unlock()
			return e.write("delete", obj, func() error { return c.Delete(ctx, obj, opts...) })
		},
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			b, err := json.Marshal(obj)
			require.NoError(t, err)
			u := &unstructured.Unstructured{}
			require.NoError(t, u.UnmarshalJSON(b))
			return e.write("apply", u, func() error { return c.Apply(ctx, obj, opts...) })
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			return e.write(sub, obj, func() error { return c.SubResource(sub).Update(ctx, obj, opts...) })
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			return e.write(sub, e.patched(obj, patch), func() error { return c.SubResource(sub).Patch(ctx, obj, patch, opts...) })
		},
	})
	registry := providers.NewRegistry()
	registry.Register("fake", e.provider)
	children := &unitChildren{store: store, scheme: scheme, kinds: map[schema.GroupVersionKind]bool{}}
	for _, k := range tpl.ChildKinds() { // as the kind's controller does at start
		require.NoError(t, children.Watch(e.ctx, k))
	}
	e.r = New(Options{
		GVK:            gvk,
		Kind:           e.kind,
		Children:       children,
		Parents:        counted,
		Live:           counted,
		Writer:         counted,
		Scoper:         render.OfflineScoper{},
		Recorder:       e.events,
		Providers:      registry,
		References:     e.refs,
		ResourceResync: unitResync,
		Requeue: func(key types.NamespacedName) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.requeued = append(e.requeued, key)
		},
	})
	t.Cleanup(e.r.StartStatus(e.ctx, 0)) // no goroutines: reconcile writes with flush
	return e
}

// patched returns the object a merge patch of obj's metadata (the status
// writer's) would store, for the tests' checks to see what is written;
// otherwise obj.
func (e *unitEnv) patched(obj client.Object, patch client.Patch) client.Object {
	e.t.Helper()
	_, metadataOnly := obj.(*metav1.PartialObjectMetadata)
	cur := e.get(obj.GetObjectKind().GroupVersionKind(), obj.GetNamespace(), obj.GetName())
	if !metadataOnly || patch.Type() != types.MergePatchType || cur == nil {
		return obj
	}
	data, err := patch.Data(obj)
	require.NoError(e.t, err)
	doc, err := json.Marshal(cur.Object)
	require.NoError(e.t, err)
	merged, err := jsonpatch.MergePatch(doc, data)
	require.NoError(e.t, err)
	out := &unstructured.Unstructured{}
	require.NoError(e.t, out.UnmarshalJSON(merged))
	return out
}

// write counts one write under "verb Kind" and runs it, unless an error is
// injected for that key.
func (e *unitEnv) write(verb string, obj client.Object, do func() error) error {
	key := verb + " " + obj.GetObjectKind().GroupVersionKind().Kind
	e.mu.Lock()
	e.writes[key]++
	err := e.fail[key]
	check := e.check
	e.mu.Unlock()
	if err == nil && check != nil {
		err = check(key, obj)
	}
	if err != nil {
		return err
	}
	return do()
}

// takeWrites returns the writes counted so far and resets the counter.
func (e *unitEnv) takeWrites() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := e.writes
	e.writes = map[string]int{}
	return out
}

// takeReads returns the reads counted so far and resets the counter.
func (e *unitEnv) takeReads() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := e.reads
	e.reads = map[string]int{}
	return out
}

// takeDeletes returns the deletes sent so far and forgets them.
func (e *unitEnv) takeDeletes() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := e.deletes
	e.deletes = nil
	return out
}

// failWrites makes every write of key ("apply ConfigMap") return err.
func (e *unitEnv) failWrites(key string, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.fail[key] = err
}

// reconcile runs one reconcile of obj, then the status writes it queued,
// so that a test reads the status the reconcile built.
func (e *unitEnv) reconcile(obj client.Object) (ctrl.Result, error) {
	res, err := e.r.Reconcile(e.ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(obj)})
	e.r.status.flush(e.ctx)
	return res, err
}

// reconcileClean reconciles obj and requires a successful reconcile; it
// returns the result.
func (e *unitEnv) reconcileClean(obj client.Object) ctrl.Result {
	e.t.Helper()
	res, err := e.reconcile(obj)
	require.NoError(e.t, err)
	return res
}

// get reads an object of gvk from the fake apiserver; nil when absent.
func (e *unitEnv) get(gvk schema.GroupVersionKind, namespace, name string) *unstructured.Unstructured {
	e.t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := e.store.Get(e.ctx, types.NamespacedName{Namespace: namespace, Name: name}, u); err != nil {
		require.True(e.t, client.IgnoreNotFound(err) == nil, "reading %s %s: %v", gvk.Kind, name, err)
		return nil
	}
	return u
}

// reread returns obj as the fake apiserver holds it now.
func (e *unitEnv) reread(obj *unstructured.Unstructured) *unstructured.Unstructured {
	e.t.Helper()
	cur := e.get(obj.GroupVersionKind(), obj.GetNamespace(), obj.GetName())
	require.NotNil(e.t, cur, "%s %s is gone", obj.GetKind(), obj.GetName())
	return cur
}

// update stores obj's metadata and spec as the test changed them.
func (e *unitEnv) update(obj *unstructured.Unstructured) {
	e.t.Helper()
	require.NoError(e.t, e.store.Update(e.ctx, obj))
}

// annotate adds an annotation to obj, as someone else's merge patch would.
func (e *unitEnv) annotate(obj *unstructured.Unstructured, key, value string) {
	e.t.Helper()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: value}}})
	require.NoError(e.t, err)
	require.NoError(e.t, e.store.Patch(e.ctx, obj, client.RawPatch(types.MergePatchType, patch)))
}

// condition returns the stored condition of the parent, or nil.
func (e *unitEnv) condition(parent *unstructured.Unstructured, condType string) *metav1.Condition {
	e.t.Helper()
	st, _, _ := unstructured.NestedMap(e.reread(parent).Object, "status")
	return meta.FindStatusCondition(contract.ConditionsOf(st), condType)
}

// evaluations returns how many times the kind's template was evaluated so
// far, from the engine's own histogram.
func (e *unitEnv) evaluations() uint64 {
	e.t.Helper()
	m := &dto.Metric{}
	h := metricEvaluateSeconds.WithLabelValues(contract.KindString(e.r.gvk)).(prometheus.Histogram)
	require.NoError(e.t, h.Write(m))
	return m.GetHistogram().GetSampleCount()
}

// remembered is how many of the kind's evaluations the template's memory
// answered.
func (e *unitEnv) remembered() float64 {
	e.t.Helper()
	m := &dto.Metric{}
	require.NoError(e.t, metricEvaluationsRemembered.WithLabelValues(contract.KindString(e.r.gvk)).Write(m))
	return m.GetCounter().GetValue()
}

// unitParent returns a parent of gvk in unitNamespace, with a UID and
// generation 1 as the apiserver would give it.
func unitParent(gvk schema.GroupVersionKind, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(unitNamespace)
	u.SetName(name)
	u.SetUID(types.UID("uid-" + name))
	u.SetGeneration(1)
	return u
}

// cond is the part of a condition the tests compare.
type cond struct {
	Status  metav1.ConditionStatus
	Reason  string
	Message string
}

func condOf(c *metav1.Condition) cond {
	if c == nil {
		return cond{}
	}
	return cond{Status: c.Status, Reason: c.Reason, Message: c.Message}
}

// unitKind is the Kind of the unit tests.
type unitKind struct {
	tpl  *templates.Template
	gone bool
	// rev, when set, is the revision TemplateFor returns.
	rev *revisions.Revision
}

func (k *unitKind) Template() *templates.Template { return k.tpl }
func (k *unitKind) Retired() bool                 { return k.gone }
func (k *unitKind) TemplateFor(*unstructured.Unstructured) (*templates.Template, *revisions.Revision, error) {
	return k.tpl, k.rev, nil
}

// unitChildren is the Children of the unit tests: it lists the objects
// labelled with the parent's UID, of every kind watched so far, from the
// fake apiserver, typed or unstructured as the engine's child cache holds
// them (the engine's childobjects.go): the kinds the scheme knows as their
// Go types, the others unstructured.
type unitChildren struct {
	store  client.Reader
	scheme *runtime.Scheme
	mu     sync.Mutex
	kinds  map[schema.GroupVersionKind]bool
}

func (c *unitChildren) Watch(_ context.Context, gvk schema.GroupVersionKind) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.kinds[gvk] = true
	return nil
}

func (c *unitChildren) List(ctx context.Context, parent *unstructured.Unstructured) ([]client.Object, error) {
	c.mu.Lock()
	kinds := slices.SortedFunc(maps.Keys(c.kinds), func(a, b schema.GroupVersionKind) int { return strings.Compare(a.String(), b.String()) })
	c.mu.Unlock()
	var out []client.Object
	for _, gvk := range kinds {
		list := c.list(gvk)
		if err := c.store.List(ctx, list, client.MatchingLabels{contract.LabelParentUID: string(parent.GetUID())}); err != nil {
			return nil, err
		}
		objs, err := meta.ExtractList(list)
		if err != nil {
			return nil, err
		}
		for _, obj := range objs {
			o := obj.(client.Object)
			o.GetObjectKind().SetGroupVersionKind(gvk) // typed items carry none
			out = append(out, o)
		}
	}
	return out, nil
}

// list returns an empty list of the kind: typed when the scheme knows it.
func (c *unitChildren) list(gvk schema.GroupVersionKind) client.ObjectList {
	listGVK := gvk.GroupVersion().WithKind(gvk.Kind + "List")
	if c.scheme.Recognizes(gvk) {
		if l, err := c.scheme.New(listGVK); err == nil {
			return l.(client.ObjectList)
		}
	}
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(listGVK)
	return l
}

// unitEvent is one event the reconciler recorded.
type unitEvent struct {
	Type, Reason, Message string
}

// unitRecorder is the events.EventRecorder of the unit tests.
type unitRecorder struct {
	mu     sync.Mutex
	events []unitEvent
}

func (r *unitRecorder) Eventf(_, _ runtime.Object, eventtype, reason, _, note string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, unitEvent{Type: eventtype, Reason: reason, Message: fmt.Sprintf(note, args...)})
}

// take returns the events recorded so far and forgets them.
func (r *unitRecorder) take() []unitEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.events
	r.events = nil
	return out
}

// fakeProvider is a providers.Provider over nothing: every resource exists
// and is ready once applied, unless an error is injected for a call. It
// names a resource <spec.name>-<attempt> and records every call.
type fakeProvider struct {
	mu    sync.Mutex
	calls []string
	fail  map[string]error // by call: "apply data-0", "delete data-0"
	// tokens counts the credentials issued on ResetCredentials.
	tokens int
}

var _ providers.Provider = (*fakeProvider)(nil)

func newFakeProvider() *fakeProvider { return &fakeProvider{fail: map[string]error{}} }

func (p *fakeProvider) ExternalName(_ context.Context, req providers.Request, attempt int) (string, map[string]string, error) {
	name, _ := req.Spec["name"].(string)
	return fmt.Sprintf("%s-%d", name, attempt), map[string]string{"zone": "test"}, nil
}

func (p *fakeProvider) Observe(_ context.Context, req providers.Request) (providers.Observation, error) {
	if err := p.call("observe " + req.ExternalName); err != nil {
		return providers.Observation{}, err
	}
	return providers.Observation{Exists: true, Ready: true, State: map[string]any{"name": req.ExternalName}}, nil
}

// Apply answers an observation; asked to reset credentials, it issues a
// new token (tok-1, tok-2, ...) among its sensitive outputs, next to the
// endpoint it always gives.
func (p *fakeProvider) Apply(_ context.Context, req providers.Request) (providers.Observation, error) {
	c := "apply " + req.ExternalName
	if req.ResetCredentials {
		c += " reset"
	}
	if err := p.call(c); err != nil {
		return providers.Observation{}, err
	}
	obs := providers.Observation{Exists: true, Ready: true, State: map[string]any{"name": req.ExternalName},
		Sensitive: map[string][]byte{"endpoint": []byte("fake://" + req.ExternalName)}}
	if req.ResetCredentials {
		p.mu.Lock()
		p.tokens++
		obs.Sensitive["token"] = []byte(fmt.Sprintf("tok-%d", p.tokens))
		p.mu.Unlock()
	}
	return obs, nil
}

func (p *fakeProvider) Delete(_ context.Context, req providers.Request) error {
	return p.call("delete " + req.ExternalName)
}

func (p *fakeProvider) Plan(_ context.Context, req providers.Request) (providers.Plan, error) {
	return providers.Plan{Action: providers.ActionNone}, p.call("plan " + req.ExternalName)
}

func (p *fakeProvider) call(c string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, c)
	return p.fail[c]
}

// failing makes the call c ("apply data-0") return err.
func (p *fakeProvider) failing(c string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fail[c] = err
}

// takeCalls returns the calls made so far and forgets them.
func (p *fakeProvider) takeCalls() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.calls
	p.calls = nil
	return out
}

// setRecord puts a resource record on the parent, as the record step
// writes it.
func setRecord(t *testing.T, parent *unstructured.Unstructured, rec resourceRecord) {
	t.Helper()
	b, err := json.Marshal(rec)
	require.NoError(t, err)
	a := parent.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[contract.AnnotationResourcePrefix+rec.Name] = string(b)
	parent.SetAnnotations(a)
}

// recordOf returns the parent's record of the resource name, or nil.
func recordOf(t *testing.T, parent *unstructured.Unstructured, name string) *resourceRecord {
	t.Helper()
	records, err := recordedResources(parent)
	require.NoError(t, err)
	rec, ok := records[name]
	if !ok {
		return nil
	}
	return &rec
}

// storedResource returns the parent's status.resources.<name>, or nil.
func storedResource(parent *unstructured.Unstructured, name string) map[string]any {
	m, _, _ := unstructured.NestedMap(parent.Object, "status", "resources", name)
	return m
}

// withRecords makes parent look as the record step leaves a parent with
// external resources: the finalizer, an empty inventory and the records.
func withRecords(t *testing.T, parent *unstructured.Unstructured, recs ...resourceRecord) *unstructured.Unstructured {
	t.Helper()
	parent.SetFinalizers([]string{contract.Finalizer})
	a := parent.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[contract.AnnotationInventory] = render.Inventory{}.Encode()
	parent.SetAnnotations(a)
	for _, rec := range recs {
		setRecord(t, parent, rec)
	}
	return parent
}

// requireJittered requires d to be the resource resync, jittered.
func requireJittered(t *testing.T, d time.Duration) {
	t.Helper()
	require.GreaterOrEqual(t, d, unitResync-unitResync/10)
	require.LessOrEqual(t, d, unitResync+unitResync/10)
}

// flush writes the statuses queued now on the caller's goroutine; a write
// that failed waits for its retry, and flush returns without it.
func (w *statusWriter) flush(ctx context.Context) {
	w.mu.Lock()
	q := w.queue
	w.mu.Unlock()
	for q.Len() > 0 {
		w.writeNext(ctx, q)
	}
}
