package harness

import (
	"context"
	"time"
)

// Settling: after a phase, the controller may still be writing (status,
// events). The next phase starts, and the phase's requests are counted,
// only once the watched objects have been quiet for quietPeriod and the
// apiserver's write counters stopped moving.
const (
	quietPeriod   = time.Second
	settleTick    = 500 * time.Millisecond
	settleTimeout = time.Minute
)

// snapshot is the state of the counters at one point of a run.
type snapshot struct {
	api, own counts
	use      []usage // per process of the controller
	// controlPlane is etcd's and the kube-apiserver's CPU time so far;
	// hasControlPlane is false when it is not measured.
	controlPlane    time.Duration
	hasControlPlane bool
}

// controllerRequests returns the requests the controller made since an
// earlier snapshot: the apiserver's count minus the harness's own.
func (s snapshot) controllerRequests(since snapshot) counts {
	return s.api.minus(since.api).minus(s.own.minus(since.own)).attributable()
}

// settle waits until the controller has finished reacting, then returns a
// snapshot of the counters and of the resource usage of the controller's
// processes.
func (h *Harness) settle(ctx context.Context, wl *workload, g group) (snapshot, error) {
	start := time.Now()
	ticker := time.NewTicker(settleTick)
	defer ticker.Stop()
	var last counts
	for {
		api, own, err := wl.scrape(ctx)
		if err != nil {
			return snapshot{}, err
		}
		stable := last != nil && api.attributable().writes() == last.attributable().writes()
		if timedOut := time.Since(start) > settleTimeout; (stable && wl.w.quietFor(quietPeriod)) || timedOut {
			if timedOut {
				h.log.printf("  warning: the controller was still writing after %s", settleTimeout)
			}
			use, err := g.usage()
			if err != nil {
				return snapshot{}, err
			}
			cp, ok, err := wl.controlPlaneCPU()
			return snapshot{api: api, own: own, use: use, controlPlane: cp, hasControlPlane: ok}, err
		}
		last = api
		select {
		case <-ctx.Done():
			return snapshot{}, ctx.Err()
		case <-ticker.C:
		}
	}
}
