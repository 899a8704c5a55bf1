package engine

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/revisions"
)

// serveStored, when the files' template is too large to store as a
// revision (templates.Template.StoreError: an engine started with
// templates.LoadError.Servable), makes the kind's newest stored revision
// its template, so that the kind starts and its parents are reconciled as
// before, and says so in the kind's status (and /readyz). A running engine
// never gets there: a reload of such files is refused whole, the last good
// templates serving. Without any stored revision the kind cannot start.
func (kc *kindController) serveStored(ctx context.Context) error {
	t := kc.Template()
	serr := t.StoreError()
	if serr == nil {
		return nil
	}
	crs, err := kc.store.List(ctx)
	if err != nil {
		return err
	}
	for i := len(crs) - 1; i >= 0; i-- {
		stored, err := kc.store.Load(&crs[i])
		if err != nil {
			continue // written by another engine: the one before
		}
		rev := revisions.RevisionOf(&crs[i])
		msg := fmt.Sprintf("serving revision %d, the newest stored: the files cannot be stored as a revision (%s)", rev.Number, serr)
		log.FromContext(ctx).Error(serr, "template too large to store; serving the newest stored revision", "kind", contract.KindString(kc.gvk), "template", t.Path, "revision", rev.Number)
		kc.mu.Lock()
		kc.stored = msg
		kc.mu.Unlock()
		kc.tpl.CompareAndSwap(t, stored)
		return nil
	}
	return fmt.Errorf("the files cannot be stored as a revision, and the kind has no stored revision to serve: %w", serr)
}
