package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/templates"
	"github.com/cuengine/engine/templates/crdcompat"
)

// CRDError is a CRD the engine refused to apply because the change could
// break objects already stored.
type CRDError struct {
	CRD     string
	Changes []string
}

func (e *CRDError) Error() string {
	return fmt.Sprintf("CRD %s not updated: the change could break stored objects (use --force-crd-changes to apply it anyway): %s",
		e.CRD, strings.Join(e.Changes, "; "))
}

// InstallCRDs server-side applies the CRD generated from every template and
// waits until each is Established. A CRD whose change could break stored
// objects (a removed field, a narrowed type) is refused with a *CRDError
// unless force is set; the others are still applied. A CRD without a
// version objects may still be stored in is refused even when forced,
// naming how many objects of the kind there are (counted through r, an
// uncached reader) and what the engine knows of their migration (notes,
// which may be nil).
func InstallCRDs(ctx context.Context, c client.Client, r client.Reader, set *templates.Set, force bool, conv ConversionWebhook, notes MigrationNotes) error {
	var errs []error
	for _, t := range set.Templates() {
		crd := t.CRD()
		if err := withConversion(ctx, crd, conv); err != nil {
			errs = append(errs, fmt.Errorf("template %s: %w", t.Path, err))
			continue
		}
		if err := installCRD(ctx, c, r, crd, force, notes); err != nil {
			errs = append(errs, fmt.Errorf("template %s: %w", t.Path, err))
		}
	}
	return errors.Join(errs...)
}

func installCRD(ctx context.Context, c client.Client, r client.Reader, crd *apiextensionsv1.CustomResourceDefinition, force bool, notes MigrationNotes) error {
	live := &apiextensionsv1.CustomResourceDefinition{}
	err := c.Get(ctx, client.ObjectKey{Name: crd.Name}, live)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("reading CRD %s: %w", crd.Name, err)
	case len(unstored(live, crd)) > 0: // conversion.go
		return stillStored(ctx, r, live, crd, notes)
	case !force:
		if changes := crdcompat.BreakingChanges(live, crd); len(changes) > 0 {
			return &CRDError{CRD: crd.Name, Changes: changes}
		}
	}
	if err == nil {
		keepCABundle(live, crd) // conversion.go
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crd)
	if err != nil {
		return err
	}
	delete(content, "status")
	u := &unstructured.Unstructured{Object: content}
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(contract.FieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying CRD %s: %w", crd.Name, err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err = wait.PollUntilContextCancel(waitCtx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKey{Name: crd.Name}, live); err != nil {
			return false, nil
		}
		for _, cond := range live.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("CRD %s was not Established within 30s", crd.Name)
	}
	return nil
}
