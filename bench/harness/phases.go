package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
)

// phase is one timed step of the workload: an action, and the goal whose
// reaching ends it.
type phase struct {
	key     string        // "a".."e", or "raw"
	parents int           // parents the phase affects, for writes per parent
	stall   time.Duration // > 0: no progress within it means errNotSupported
	goal    func() goal
	act     func(ctx context.Context) error
}

// Phase keys, in order.
const (
	phaseCreate   = "a"
	phaseStatus   = "b"
	phaseRecreate = "c"
	phaseScale    = "d"
	phaseReload   = "e"
	phaseRaw      = "raw"
	// phaseAllReady is the scale benchmark's one phase (scale.go).
	phaseAllReady = "all-ready"
)

// phaseTitles describe the phases in the report.
var phaseTitles = map[string]string{
	phaseCreate:   "(a) create N MyKinds -> N Deployments",
	phaseStatus:   "(b) Deployment status -> MyKind status",
	phaseRecreate: "(c) delete 10% Deployments -> recreated",
	phaseScale:    "(d) scale 10% MyKinds -> Deployments",
	phaseReload:   "(e) template image edit -> N Deployments",
	phaseRaw:      "raw: harness creates N Deployments",
	phaseAllReady: "create N MyKinds -> every parent Ready",
}

// createPhase creates every parent at once.
func (wl *workload) createPhase() phase {
	return phase{key: phaseCreate, parents: wl.n,
		goal: func() goal {
			return goal{on: onDeployments, namespace: benchNamespace, want: wl.n, ok: wl.hasReplicas}
		},
		act: func(ctx context.Context) error { return wl.forEach(ctx, wl.all(), wl.createMyKind) },
	}
}

// statusPhase marks every Deployment ready.
func (wl *workload) statusPhase() phase {
	return phase{key: phaseStatus, parents: wl.n,
		goal: func() goal {
			return goal{on: onMyKinds, namespace: benchNamespace, want: wl.n, ok: wl.statusFollows}
		},
		act: func(ctx context.Context) error { return wl.forEach(ctx, wl.all(), wl.setReady) },
	}
}

// recreatePhase deletes 10% of the Deployments; the goal is new ones (other
// UIDs) with the right replicas.
func (wl *workload) recreatePhase() phase {
	idx := everyTenth(wl.n, 0)
	old := map[string]types.UID{}
	return phase{key: phaseRecreate, parents: len(idx),
		goal: func() goal {
			for _, i := range idx {
				if obj, ok := wl.w.get(onDeployments, benchNamespace, deploymentName(i)); ok {
					old[deploymentName(i)] = obj.(*appsv1.Deployment).UID
				}
			}
			return goal{on: onDeployments, namespace: benchNamespace, want: len(idx), ok: func(obj any) bool {
				d, _, ok := wl.deploymentOf(obj)
				if !ok {
					return false
				}
				uid, deleted := old[d.Name]
				return deleted && d.UID != uid && wl.hasReplicas(obj)
			}}
		},
		act: func(ctx context.Context) error { return wl.forEach(ctx, idx, wl.deleteDeployment) },
	}
}

// scalePhase adds one replica to 10% of the parents.
func (wl *workload) scalePhase() phase {
	idx := everyTenth(wl.n, 5)
	scaled := map[int]bool{}
	return phase{key: phaseScale, parents: len(idx),
		goal: func() goal {
			for _, i := range idx {
				wl.replicas[i]++
				scaled[i] = true
			}
			return goal{on: onDeployments, namespace: benchNamespace, want: len(idx), ok: func(obj any) bool {
				_, i, ok := wl.deploymentOf(obj)
				return ok && scaled[i] && wl.hasReplicas(obj)
			}}
		},
		act: func(ctx context.Context) error { return wl.forEach(ctx, idx, wl.scale) },
	}
}

// reloadPhase rewrites the image in the controller's template (edit: the
// engine's copy of the templates directory, kro's ResourceGraphDefinition).
func (wl *workload) reloadPhase(edit func(ctx context.Context) error, stall time.Duration) phase {
	return phase{key: phaseReload, parents: wl.n, stall: stall,
		goal: func() goal {
			return goal{on: onDeployments, namespace: benchNamespace, want: wl.n, ok: wl.hasImage(imageAfter)}
		},
		act: edit,
	}
}

// rawPhase creates the Deployments directly, with no controller.
func (wl *workload) rawPhase() phase {
	return phase{key: phaseRaw, parents: wl.n,
		goal: func() goal {
			return goal{on: onDeployments, namespace: benchNamespace, want: wl.n, ok: wl.hasReplicas}
		},
		act: func(ctx context.Context) error { return wl.forEach(ctx, wl.all(), wl.createDeployment) },
	}
}

// replaceInTemplates replaces old with new in every .cue file under dir,
// writing each changed file the way editors do: a new file renamed over
// the old one.
func replaceInTemplates(dir, old, new string) error {
	changed := 0
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".cue") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil || !strings.Contains(string(b), old) {
			return err
		}
		changed++
		tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
		if err := os.WriteFile(tmp, []byte(strings.ReplaceAll(string(b), old, new)), 0o644); err != nil {
			return err
		}
		return os.Rename(tmp, path)
	})
	if err != nil {
		return fmt.Errorf("editing the templates: %w", err)
	}
	if changed == 0 {
		return fmt.Errorf("no template under %s mentions %q", dir, old)
	}
	return nil
}

// copyDir copies the regular files under src to dst.
func copyDir(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
}
