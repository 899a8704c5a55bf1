package clusters

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/cuengine/engine/contract"
)

// Target is one registered cluster, as a Source reads it.
type Target struct {
	// Name is how templates name the cluster.
	Name string
	// Origin says where it is registered, for messages
	// ("Secret engine-system/prod-eu").
	Origin string
	// Version changes whenever the registration does; a cluster whose
	// version changes is restarted with its new config.
	Version string
	// Config reaches the cluster; nil when Err says why it cannot.
	Config *rest.Config
	Err    error
}

// Source says which clusters are registered.
type Source interface {
	// Run calls update with every registered cluster each time the set
	// changes (and once at the start), until ctx ends, and problem with
	// why the registrations cannot be read while they cannot (a refused
	// list: the engine's role lacks the right). It returns why it cannot
	// go on, or nil once ctx ends. update and problem are called from one
	// goroutine at a time.
	Run(ctx context.Context, update func([]Target), problem func(error)) error
}

// Secrets registers the clusters of the Secrets labelled
// contract.LabelCluster in one namespace (the engine's).
type Secrets struct {
	Client    corev1client.SecretsGetter
	Namespace string
}

// Run watches the cluster Secrets and calls update with all of them on
// every change; a list or watch of them that fails is a problem.
func (s Secrets) Run(ctx context.Context, update func([]Target), problem func(error)) error {
	secrets := s.Client.Secrets(s.Namespace)
	labelled := func(o metav1.ListOptions) metav1.ListOptions {
		o.LabelSelector = contract.LabelCluster
		return o
	}
	// The client says whether it serves watch-list (a fake does not), as
	// client-go's generated informers ask it.
	informer := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return secrets.List(ctx, labelled(o))
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return secrets.Watch(ctx, labelled(o))
		},
	}, s.Client), &corev1.Secret{}, 10*time.Minute, cache.Indexers{})
	changed := make(chan struct{}, 1)
	kick := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { kick() },
		UpdateFunc: func(any, any) { kick() },
		DeleteFunc: func(any) { kick() },
	}); err != nil {
		return err
	}
	if err := informer.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
		problem(fmt.Errorf("reading the cluster Secrets in namespace %s: %w", s.Namespace, err))
	}); err != nil {
		return err
	}
	var informing sync.WaitGroup
	defer informing.Wait()
	informCtx, stopInforming := context.WithCancel(ctx)
	defer stopInforming() // before the Wait: the informer ends with it
	informing.Go(func() { informer.RunWithContext(informCtx) })
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return nil // ctx ended first
	}
	kick() // the first set, even when there is no Secret
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
		var secrets []*corev1.Secret
		for _, o := range informer.GetStore().List() {
			if sec, ok := o.(*corev1.Secret); ok {
				secrets = append(secrets, sec)
			}
		}
		update(targetsOf(secrets))
	}
}

// targetsOf reads the cluster Secrets. Two Secrets naming one cluster are
// both refused: which one the engine would use is not for it to guess.
func targetsOf(secrets []*corev1.Secret) []Target {
	byName := map[string][]*corev1.Secret{}
	for _, sec := range secrets {
		name := sec.Labels[contract.LabelCluster]
		byName[name] = append(byName[name], sec)
	}
	var out []Target
	for name, secs := range byName {
		slices.SortFunc(secs, func(a, b *corev1.Secret) int { return strings.Compare(a.Name, b.Name) })
		sec := secs[0]
		t := Target{Name: name, Origin: fmt.Sprintf("Secret %s/%s", sec.Namespace, sec.Name), Version: sec.ResourceVersion}
		switch {
		case len(secs) > 1:
			var origins, versions []string
			for _, s := range secs {
				origins = append(origins, s.Name)
				versions = append(versions, s.ResourceVersion)
			}
			t.Version = strings.Join(versions, ",")
			t.Err = fmt.Errorf("cluster %q is registered by %d Secrets (%s): keep one", name, len(secs), strings.Join(origins, ", "))
		case !validName(name):
			t.Err = fmt.Errorf("%s: cluster name %q is not a DNS label (lower case letters, digits and '-', at most 63)", t.Origin, name)
		default:
			data, ok := sec.Data[contract.KeyKubeconfig]
			if !ok {
				t.Err = fmt.Errorf("%s has no %q key", t.Origin, contract.KeyKubeconfig)
				break
			}
			cfg, err := RESTConfig(data)
			if err != nil {
				t.Err = fmt.Errorf("%s: %w", t.Origin, err)
				break
			}
			t.Config = cfg
		}
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b Target) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// validName: a cluster name is a DNS label, as it is a label value on
// the children's inventory and a metric label.
func validName(name string) bool {
	if name == "" || len(name) > 63 || name[0] == '-' || name[len(name)-1] == '-' {
		return false
	}
	for _, r := range name {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' {
			return false
		}
	}
	return true
}
