package migration

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/time/rate"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Migrator moves a CRD's stored objects to its storage version.
type Migrator struct {
	// Client reads and writes the CRD (apiextensions/v1 in its scheme)
	// and the kind's objects.
	Client client.Client
	// QPS bounds the updates (default 20 a second).
	QPS float64
	// PageSize is the objects listed at a time (default 500).
	PageSize int64
	// Report, when set, is called with the progress after every page and
	// at the end.
	Report func(Progress)
}

// Progress is where a migration stands.
type Progress struct {
	CRD string
	// From are the versions stored when it started; To the storage version.
	From []string
	To   string
	// Rewritten objects were stored in another version and are now in
	// To; Current ones were in To already (no write); Failed ones the
	// apiserver refused.
	Rewritten, Current, Failed int
	// Done: every object is in To and storedVersions is [To].
	Done bool
}

func (p Progress) String() string {
	return fmt.Sprintf("%s: to %s from %s: %d rewritten, %d already current, %d failed",
		p.CRD, p.To, strings.Join(p.From, ","), p.Rewritten, p.Current, p.Failed)
}

// maxNamed bounds the objects an error names.
const maxNamed = 5

// Migrate moves every object of the CRD named crdName to its storage
// version and then trims status.storedVersions to it. Nothing to do (only
// the storage version is stored) is Done at once. It returns the progress
// so far with any error; running it again resumes.
func (m *Migrator) Migrate(ctx context.Context, crdName string) (Progress, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := m.Client.Get(ctx, client.ObjectKey{Name: crdName}, crd); err != nil {
		return Progress{CRD: crdName}, fmt.Errorf("reading CRD %s: %w", crdName, err)
	}
	storage := ""
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			storage = v.Name
		}
	}
	p := Progress{CRD: crdName, From: slices.Clone(crd.Status.StoredVersions), To: storage}
	if storage == "" {
		return p, fmt.Errorf("CRD %s has no storage version", crdName)
	}
	if slices.Equal(crd.Status.StoredVersions, []string{storage}) {
		p.Done = true
		return p, nil
	}
	gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: storage, Kind: crd.Spec.Names.Kind}
	failures, err := m.rewriteAll(ctx, gvk, &p)
	m.report(p)
	if err != nil {
		return p, err
	}
	if len(failures) > 0 {
		return p, fmt.Errorf("%d objects of %s could not be rewritten in %s, so %s stay stored (fix or delete them and the migration resumes): %s",
			p.Failed, crdName, storage, strings.Join(without(p.From, storage), ","), strings.Join(failures, "; "))
	}
	if err := m.trim(ctx, crdName, storage); err != nil {
		return p, err
	}
	p.Done = true
	m.report(p)
	return p, nil
}

func (m *Migrator) report(p Progress) {
	metricObjects.WithLabelValues(p.CRD, "rewritten").Set(float64(p.Rewritten))
	metricObjects.WithLabelValues(p.CRD, "current").Set(float64(p.Current))
	metricObjects.WithLabelValues(p.CRD, "failed").Set(float64(p.Failed))
	if m.Report != nil {
		m.Report(p)
	}
}

// rewriteAll updates every object of gvk unchanged, page by page. A
// continue token that expired starts the list again (rewrites are free
// for the objects already done).
func (m *Migrator) rewriteAll(ctx context.Context, gvk schema.GroupVersionKind, p *Progress) ([]string, error) {
	qps := m.QPS
	if qps <= 0 {
		qps = 20
	}
	limiter := rate.NewLimiter(rate.Limit(qps), max(1, int(qps)))
	pageSize := m.PageSize
	if pageSize <= 0 {
		pageSize = 500
	}
	var failures []string
	cont := ""
	for {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		err := m.Client.List(ctx, list, client.Limit(pageSize), client.Continue(cont))
		if apierrors.IsResourceExpired(err) {
			cont = ""
			continue
		}
		if err != nil {
			return failures, fmt.Errorf("listing %s: %w", gvk.Kind, err)
		}
		for i := range list.Items {
			if err := limiter.Wait(ctx); err != nil {
				return failures, err
			}
			if err := m.rewrite(ctx, &list.Items[i], p); err != nil {
				if ctx.Err() != nil {
					return failures, ctx.Err()
				}
				p.Failed++
				if len(failures) < maxNamed {
					failures = append(failures, fmt.Sprintf("%s: %v", key(&list.Items[i]), err))
				}
			}
		}
		m.report(*p)
		cont = list.GetContinue()
		if cont == "" {
			return failures, nil
		}
	}
}

// rewrite updates obj as it was read: a write only when it is stored in
// another version (its resourceVersion moves).
func (m *Migrator) rewrite(ctx context.Context, obj *unstructured.Unstructured, p *Progress) error {
	before := obj.GetResourceVersion()
	err := m.Client.Update(ctx, obj)
	switch {
	case apierrors.IsConflict(err):
		p.Rewritten++ // someone's write stored it in the storage version
		return nil
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	case obj.GetResourceVersion() != before:
		p.Rewritten++
	default:
		p.Current++
	}
	return nil
}

// trim sets status.storedVersions to the storage version alone.
func (m *Migrator) trim(ctx context.Context, crdName, storage string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := m.Client.Get(ctx, client.ObjectKey{Name: crdName}, crd); err != nil {
			return err
		}
		if !slices.Contains(crd.Status.StoredVersions, storage) {
			return fmt.Errorf("CRD %s: the storage version %s is not among status.storedVersions %v", crdName, storage, crd.Status.StoredVersions)
		}
		crd.Status.StoredVersions = []string{storage}
		return m.Client.Status().Update(ctx, crd)
	})
}

func without(vs []string, v string) []string {
	return slices.DeleteFunc(slices.Clone(vs), func(x string) bool { return x == v })
}

func key(o metav1.Object) string {
	if o.GetNamespace() == "" {
		return o.GetName()
	}
	return o.GetNamespace() + "/" + o.GetName()
}
