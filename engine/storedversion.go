package engine

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/cuengine/engine/evaluator"
	"github.com/cuengine/engine/reconciler"
	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/templates"
)

// A kind whose stored version is not its template's hub is read in its
// stored version, and converted to the hub in the engine, with the same
// conversion the apiserver would ask its /convert for. Read in the hub, the
// apiserver converts every object of a list or watch and fails the whole
// of it when one object does not convert ("object not decodable"): one
// object written in v1 that the hub refuses (before the validating webhook
// refused such writes, while it was down, or left by a template change
// that tightened the hub) stopped every parent of the kind, also after a
// restart. Read this way, such an object is cached as it is stored,
// marked (reconciler.MarkUnconvertible), and Stalled on its own, while
// every other object is served. A kind stored in its hub is read as any
// other: no conversion is asked for but that of objects still stored in
// an older version after a storage move, until the migration rewrites
// them (conversion.go).

// storedReads builds the parent informers of such kinds.
type storedReads struct {
	cfg        *rest.Config
	httpClient *http.Client
	mapper     meta.RESTMapper
	namespace  string
	selector   labels.Selector
	limits     render.Limits
	pool       *evaluator.Pool

	// kinds holds each kind's controller (a *kindController by GVK), as
	// the engine's kinds do, without the engine's lock: an informer's list
	// runs inside the cache's own locks.
	kinds sync.Map

	mu      sync.Mutex
	dynamic *dynamic.DynamicClient // made at the first read in a stored version
}

// templateOf is gvk's current template, nil when no controller serves it.
func (s *storedReads) templateOf(gvk schema.GroupVersionKind) *templates.Template {
	kc, ok := s.kinds.Load(gvk)
	if !ok {
		return nil
	}
	return kc.(*kindController).Template()
}

// newInformer is the parent cache's cache.Options.NewInformer: the
// informer of a parent kind with several versions lists and watches
// through listerWatcher, which decides at each list and watch whether the
// kind's current template stores it in another version than the hub.
func (s *storedReads) newInformer(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
	// Only a kind with several versions: any other informer is left as
	// controller-runtime makes it (wrapping every one changed the timing
	// of engine TestRunawayParentsAreBoundedAndRememberedAcrossRestart,
	// not understood yet). The kind's controller is registered before it
	// starts its informer.
	if u, ok := obj.(*unstructured.Unstructured); ok {
		if t := s.templateOf(u.GroupVersionKind()); t != nil && t.Converts() {
			lw = s.listerWatcher(u.GroupVersionKind(), toolscache.ToListerWatcherWithContext(lw))
		}
	}
	return toolscache.NewSharedIndexInformer(lw, obj, resync, indexers)
}

// listerWatcher reads gvk's objects in the version its current template
// stores them in, converted to the hub; through hub, the informer's own
// ListerWatcher, while the kind is stored in the hub (or has no template).
func (s *storedReads) listerWatcher(gvk schema.GroupVersionKind, hub toolscache.ListerWatcherWithContext) toolscache.ListerWatcher {
	// stored is the kind's current template, its stored version and the
	// client of that version; a nil template when the kind is read in
	// the hub.
	stored := func() (*templates.Template, dynamic.ResourceInterface, error) {
		t := s.templateOf(gvk)
		if t == nil || !t.Converts() || t.StorageVersion() == gvk.Version {
			return nil, nil, nil
		}
		r, err := s.resource(gvk, t.StorageVersion())
		return t, r, err
	}
	return &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			t, r, err := stored()
			if err != nil {
				return nil, err
			}
			if t == nil {
				return hub.ListWithContext(ctx, opts)
			}
			s.selectOn(&opts)
			list, err := r.List(ctx, opts)
			if err != nil {
				return nil, err
			}
			for i := range list.Items {
				s.toHub(t, gvk, &list.Items[i])
			}
			list.SetAPIVersion(gvk.GroupVersion().String())
			list.SetKind(gvk.Kind + "List")
			return list, nil
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			t, r, err := stored()
			if err != nil {
				return nil, err
			}
			if t == nil {
				return hub.WatchWithContext(ctx, opts)
			}
			s.selectOn(&opts)
			w, err := r.Watch(ctx, opts)
			if err != nil {
				return nil, err
			}
			return newConvertingWatch(w, func(ev watch.Event) watch.Event {
				u, ok := ev.Object.(*unstructured.Unstructured)
				if !ok || u.GetKind() != gvk.Kind {
					return ev // an error's Status
				}
				switch ev.Type {
				case watch.Bookmark:
					u.SetAPIVersion(gvk.GroupVersion().String())
				case watch.Added, watch.Modified, watch.Deleted:
					s.toHub(t, gvk, u)
				}
				return ev
			}), nil
		},
	}
}

// resource is the dynamic client of gvk's resource in version, within
// the cache's namespace.
func (s *storedReads) resource(gvk schema.GroupVersionKind, version string) (dynamic.ResourceInterface, error) {
	mapping, err := s.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	dc := s.dynamic
	s.mu.Unlock()
	if dc == nil {
		cfg := rest.CopyConfig(s.cfg)
		cfg.NegotiatedSerializer = nil
		if dc, err = dynamic.NewForConfigAndClient(cfg, s.httpClient); err != nil {
			return nil, err
		}
		s.mu.Lock()
		s.dynamic = dc
		s.mu.Unlock()
	}
	gvr := mapping.Resource
	gvr.Version = version
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace && s.namespace != "" {
		return dc.Resource(gvr).Namespace(s.namespace), nil
	}
	return dc.Resource(gvr), nil
}

// selectOn applies the cache's label selector, as controller-runtime does
// to the ListerWatcher it hands over.
func (s *storedReads) selectOn(opts *metav1.ListOptions) {
	if s.selector != nil && !s.selector.Empty() {
		opts.LabelSelector = s.selector.String()
	}
}

// toHub replaces u, a parent in its stored version, by its conversion to
// the hub; one that does not convert is kept as stored, marked with the
// conversion's message, under the hub's apiVersion as the informer
// expects (parentCache's reads give it back its stored one).
func (s *storedReads) toHub(t *templates.Template, gvk schema.GroupVersionKind, u *unstructured.Unstructured) {
	if u.GetAPIVersion() == gvk.GroupVersion().String() {
		return
	}
	raw, err := json.Marshal(u.Object)
	if err == nil {
		var b []byte
		if b, err = render.Convert(t, u, raw, gvk.Version, s.limits, s.pool, nil, nil); err == nil {
			out := &unstructured.Unstructured{}
			if err = out.UnmarshalJSON(b); err == nil {
				u.Object = out.Object
				return
			}
		}
	}
	var re *render.Error
	if errors.As(err, &re) && re.Err != nil {
		err = re.Err
	}
	reconciler.MarkUnconvertible(u, err.Error())
	u.SetAPIVersion(gvk.GroupVersion().String())
}

// convertingWatch passes a watch's events on, each through convert. Its
// loop is owned by Stop, which ends it and waits for it: a consumer that
// stops reading never leaves it blocked on a send (watch.Filter's would).
type convertingWatch struct {
	in      watch.Interface
	out     chan watch.Event
	stop    chan struct{}
	done    chan struct{}
	stopped sync.Once
}

func newConvertingWatch(in watch.Interface, convert func(watch.Event) watch.Event) *convertingWatch {
	w := &convertingWatch{in: in, out: make(chan watch.Event), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		defer close(w.out)
		for ev := range in.ResultChan() {
			select {
			case w.out <- convert(ev):
			case <-w.stop:
				return
			}
		}
	}()
	return w
}

// ResultChan implements watch.Interface.
func (w *convertingWatch) ResultChan() <-chan watch.Event { return w.out }

// Stop implements watch.Interface: it stops the watch it reads and waits
// for its loop to end.
func (w *convertingWatch) Stop() {
	w.stopped.Do(func() {
		close(w.stop)
		w.in.Stop()
	})
	<-w.done
}
