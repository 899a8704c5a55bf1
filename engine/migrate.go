package engine

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cuengine/engine/migration"
)

// Reasons of the events on a CRD whose stored objects move.
const (
	reasonStorageMigrated        = "StorageMigrated"
	reasonStorageMigrationFailed = "StorageMigrationFailed"
)

// migrationRetry is how often a kind whose stored objects did not all
// move is tried again (and a CRD whose storage version someone else
// moved is noticed).
const migrationRetry = 5 * time.Minute

// migrationPage is how many objects are listed, rewritten and logged at a
// time: progress every few seconds at the Migrator's 20 writes a second.
const migrationPage = 100

// migrationRecord is how the engine's last migration of a CRD ended.
type migrationRecord struct {
	at       time.Time
	progress migration.Progress
	err      error
}

// migrationNote says how the last migration of the CRD named crd ended,
// for a refusal to drop a version still stored (conversion.go); "" when
// none ran since the engine started.
func (e *Engine) migrationNote(crd string) string {
	v, ok := e.lastMigration.Load(crd)
	if !ok {
		return ""
	}
	r := v.(migrationRecord)
	at := r.at.UTC().Format(time.RFC3339)
	switch {
	case r.err != nil:
		return fmt.Sprintf("the engine's last migration of it, at %s, did not finish (%s): %v", at, r.progress, r.err)
	case r.progress.Done:
		return fmt.Sprintf("the engine's last migration of it, at %s, finished (%s), before the stored versions changed again", at, r.progress)
	default:
		return fmt.Sprintf("the engine's last migration of it, at %s, stopped at %s", at, r.progress)
	}
}

// kickMigrations asks the migration loop to look again: the CRDs were
// just installed.
func (e *Engine) kickMigrations() {
	select {
	case e.migrations <- struct{}{}:
	default:
	}
}

// migrateStored moves the stored objects of every kind with several
// versions to its CRD's storage version (migration.Migrator), then trims
// the CRD's status.storedVersions: at start (a restart resumes), after
// each reload that installed the CRDs, and every migrationRetry. Only the
// engine that installs the CRDs and coordinates the rollouts (the leader)
// migrates. Progress is logged with counts, metered by the migration
// package (engine_storage_migration_objects) and, at the end or on a
// failure, an event on the CRD.
func (e *Engine) migrateStored(ctx context.Context) {
	logger := log.FromContext(ctx).WithName("storage-migration")
	// Uncached: the objects are listed in pages from the apiserver, and
	// the CRD's storedVersions read as the apiserver has them now.
	direct, err := client.New(e.mgr.GetConfig(), client.Options{Scheme: e.mgr.GetScheme(), Mapper: e.mgr.GetRESTMapper()})
	if err != nil {
		logger.Error(err, "stored objects are not migrated: no client")
		return
	}
	m := &migration.Migrator{Client: direct, PageSize: migrationPage, Report: func(p migration.Progress) {
		logger.Info("migrating stored objects", "crd", p.CRD, "to", p.To, "from", p.From,
			"rewritten", p.Rewritten, "current", p.Current, "failed", p.Failed, "done", p.Done)
	}}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.migrations:
		case <-timer.C:
		}
		if e.coordinates() {
			e.migrateAll(ctx, m)
		}
		timer.Reset(migrationRetry)
	}
}

// migrateAll runs the Migrator for each kind of the served set with
// several versions, one after the other.
func (e *Engine) migrateAll(ctx context.Context, m *migration.Migrator) {
	e.mu.Lock()
	set := e.set
	e.mu.Unlock()
	if set == nil {
		return
	}
	for _, t := range set.Templates() {
		if !t.Converts() || ctx.Err() != nil {
			continue
		}
		name := t.CRD().Name
		p, err := m.Migrate(ctx, name)
		if ctx.Err() == nil {
			e.lastMigration.Store(name, migrationRecord{at: time.Now(), progress: p, err: err})
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if gerr := m.Client.Get(ctx, client.ObjectKey{Name: name}, crd); gerr != nil {
			crd = nil
		}
		switch {
		case err != nil && ctx.Err() == nil:
			log.FromContext(ctx).Error(err, "migrating stored objects", "crd", name, "template", t.Path)
			if crd != nil {
				e.recorder.Eventf(crd, nil, corev1.EventTypeWarning, reasonStorageMigrationFailed, "Migrate", "%s", err.Error())
			}
		case err == nil && p.Done && len(p.From) > 1 && crd != nil:
			e.recorder.Eventf(crd, nil, corev1.EventTypeNormal, reasonStorageMigrated, "Migrate",
				"every %s is stored in %s: %d rewritten, %d already there; stored versions trimmed to %s", t.GVK.Kind, p.To, p.Rewritten, p.Current, p.To)
		}
	}
}
