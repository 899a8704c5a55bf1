package sharding

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/cuengine/engine/contract"
)

var metricStandby = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "engine_shard_standby",
	Help: "1 while this replica stands by because another process holds the Lease of its shard id (two replicas started with one --shard-id), else 0; under sharding only.",
}, []string{"shard"})

func init() {
	metrics.Registry.MustRegister(metricStandby)
}

// Member keeps this replica's shard Lease renewed: the shard is alive while
// the Lease is. It is also the shard's fence: Holds says whether this
// process may still write for the shard's parents, by its own clock.
//
// A Lease names the process holding it (Identity, unique per process), so
// two processes started with one shard ID do not both reconcile: the
// second stands by (engine_shard_standby, a log line) until the first's
// Lease lapses or is released, then takes over.
//
// The replica holds its shard until RenewDeadline after the start of its
// last successful renewal, measured on its own clock; the others take the
// Lease, and the sharder the parents, only LeaseDuration after that
// renewal, on theirs. LeaseDuration - RenewDeadline is the margin for the
// request's latency and the clocks' drift.
//
// A replica whose hold lapsed (renewals failed until RenewDeadline, or the
// process was paused: SIGSTOP, a frozen VM) stops: Start returns an error,
// which stops the manager, as a leader that lost its lease does. Its
// parents may have gone to other shards and its caches not have seen it
// yet, so nothing it had queued may be written; from the lapse to the
// stop, Holds refuses every write.
type Member struct {
	Client    client.Client
	Namespace string
	Group     string
	ID        string
	// Identity is this process's name in the Lease's holderIdentity;
	// "" is ID with a random suffix.
	Identity string
	// LeaseDuration is how long the Lease is valid after a renewal;
	// RenewDeadline (shorter) how long this replica holds the shard after
	// a renewal; RetryPeriod how often it renews.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration

	mu sync.Mutex
	// until is when the hold ends (zero: not held); renewed the start of
	// the renewal that set it.
	until, renewed time.Time
	standby        string // the other holder while standing by
}

// LeaseName is the name of a shard's Lease.
func LeaseName(group, id string) string { return group + "-shard-" + id }

// ErrNotHeld is what Holds returns, wrapped, when this process may not
// write for its shard.
var ErrNotHeld = errors.New("this replica does not hold its shard's lease")

// Holds returns nil while this process holds its shard's Lease by its own
// clock, else an error wrapping ErrNotHeld. Both the monotonic and the
// wall clock must be before the end of the hold: the first is immune to
// clock steps, the second keeps running while a machine is suspended.
func (m *Member) Holds() error {
	m.mu.Lock()
	until, renewed, standby := m.until, m.renewed, m.standby
	m.mu.Unlock()
	now := time.Now()
	switch {
	case standby != "":
		return fmt.Errorf("shard %s: %w: %s holds it", m.ID, ErrNotHeld, standby)
	case until.IsZero():
		return fmt.Errorf("shard %s: %w", m.ID, ErrNotHeld)
	case !now.Before(until) || !now.Round(0).Before(until.Round(0)):
		return fmt.Errorf("shard %s: %w: it was last renewed %s ago, past the renew deadline %s", m.ID, ErrNotHeld, now.Sub(renewed).Round(time.Millisecond), m.RenewDeadline)
	}
	return nil
}

// heldElsewhere is a Lease held by another process.
type heldElsewhere struct{ holder string }

func (e *heldElsewhere) Error() string { return "the lease is held by " + e.holder }

// Start implements manager.Runnable.
func (m *Member) Start(ctx context.Context) error {
	if m.Identity == "" {
		m.Identity = NewIdentity(m.ID)
	}
	logger := log.FromContext(ctx).WithValues("shard", m.ID, "identity", m.Identity)
	metricStandby.WithLabelValues(m.ID).Set(0)
	defer m.release(ctx)
	tick := time.NewTicker(m.RetryPeriod)
	defer tick.Stop()
	for {
		if err := m.step(ctx, logger); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// step renews the Lease once; an error stops the replica.
func (m *Member) step(ctx context.Context, logger logr.Logger) error {
	m.mu.Lock()
	until, renewed, standby := m.until, m.renewed, m.standby
	m.mu.Unlock()
	now := time.Now()
	if !until.IsZero() && (!now.Before(until) || !now.Round(0).Before(until.Round(0))) {
		return fmt.Errorf("shard %s lost its lease: last renewed %s ago, past the renew deadline %s; stopping, as its parents may have gone to other shards and what it had queued is stale",
			m.ID, now.Sub(renewed).Round(time.Millisecond), m.RenewDeadline)
	}
	err := m.renew(ctx, now)
	var other *heldElsewhere
	switch {
	case err == nil:
		m.mu.Lock()
		m.until, m.renewed, m.standby = now.Add(m.RenewDeadline), now, ""
		m.mu.Unlock()
		if standby != "" {
			metricStandby.WithLabelValues(m.ID).Set(0)
			logger.Info("took over the shard's lease", "previous", standby)
		}
	case errors.As(err, &other):
		if !until.IsZero() {
			return fmt.Errorf("shard %s lost its lease to %s; stopping", m.ID, other.holder)
		}
		m.mu.Lock()
		m.standby = other.holder
		m.mu.Unlock()
		if standby != other.holder {
			metricStandby.WithLabelValues(m.ID).Set(1)
			logger.Info("another process holds this shard's lease: standing by, reconciling nothing, until it lapses or is released", "holder", other.holder)
		}
	case ctx.Err() != nil:
	case until.IsZero() && standby == "":
		logger.Info("acquiring the shard lease failed; retrying", "error", err.Error())
	default:
		logger.V(1).Info("renewing the shard lease failed; retrying", "error", err.Error())
	}
	return nil
}

func (m *Member) renew(ctx context.Context, now time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, m.RetryPeriod+time.Second)
	defer cancel()
	at := metav1.NewMicroTime(now)
	key := client.ObjectKey{Namespace: m.Namespace, Name: LeaseName(m.Group, m.ID)}
	lease := &coordinationv1.Lease{}
	err := m.Client.Get(ctx, key, lease)
	if apierrors.IsNotFound(err) {
		lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: m.labels(nil)},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(m.Identity), LeaseDurationSeconds: ptr.To(m.leaseSeconds()),
				AcquireTime: &at, RenewTime: &at},
		}
		return m.Client.Create(ctx, lease)
	}
	if err != nil {
		return err
	}
	holder := ptr.Deref(lease.Spec.HolderIdentity, "")
	if holder != "" && holder != m.Identity && !expired(lease, now) {
		return &heldElsewhere{holder: holder}
	}
	if holder != m.Identity || expired(lease, now) {
		lease.Spec.AcquireTime = &at // a new life of the shard
	}
	lease.Labels = m.labels(lease.Labels)
	lease.Spec.HolderIdentity = ptr.To(m.Identity)
	lease.Spec.LeaseDurationSeconds = ptr.To(m.leaseSeconds())
	lease.Spec.RenewTime = &at
	// Conditional on the version read: of two processes taking a free
	// Lease at once, one conflicts.
	return m.Client.Update(ctx, lease)
}

// release, when the replica stops while holding its shard, closes the
// fence and then gives the Lease up without ending it (holder cleared,
// renewal kept): a process started with the same shard id takes it at
// once, and the sharder moves no parent unless none does before the Lease
// expires.
func (m *Member) release(ctx context.Context) {
	m.mu.Lock()
	held := !m.until.IsZero() && time.Now().Before(m.until) && m.standby == ""
	m.until = time.Time{}
	m.mu.Unlock()
	if !held {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.RetryPeriod+time.Second)
	defer cancel()
	lease := &coordinationv1.Lease{}
	if err := m.Client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: LeaseName(m.Group, m.ID)}, lease); err != nil {
		return
	}
	if ptr.Deref(lease.Spec.HolderIdentity, "") != m.Identity {
		return
	}
	lease.Spec.HolderIdentity = nil
	if err := m.Client.Update(ctx, lease); err != nil {
		log.FromContext(ctx).V(1).Info("releasing the shard lease failed; it expires instead", "shard", m.ID, "error", err.Error())
	}
}

func (m *Member) leaseSeconds() int32 { return int32(m.LeaseDuration.Seconds()) }

// labels are a shard Lease's: its group and its shard id.
func (m *Member) labels(have map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range have {
		out[k] = v
	}
	out[contract.LabelShardGroup] = m.Group
	out[contract.LabelShard] = m.ID
	return out
}

// expired reports that a shard's Lease was not renewed within its duration.
func expired(lease *coordinationv1.Lease, now time.Time) bool {
	if lease.Spec.RenewTime == nil || lease.Spec.LeaseDurationSeconds == nil {
		return true
	}
	return lease.Spec.RenewTime.Add(time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second).Before(now)
}

// liveShards lists the shards of a group whose Lease is valid at now. A
// Lease names its shard in its contract.LabelShard label; one written
// before holders were per process names it as its holder.
func liveShards(ctx context.Context, c client.Reader, namespace, group string, now time.Time) ([]string, error) {
	leases := &coordinationv1.LeaseList{}
	if err := c.List(ctx, leases, client.InNamespace(namespace), client.MatchingLabels{contract.LabelShardGroup: group}); err != nil {
		return nil, fmt.Errorf("listing shard leases: %w", err)
	}
	var out []string
	for i := range leases.Items {
		l := &leases.Items[i]
		id := l.Labels[contract.LabelShard]
		if id == "" {
			id = ptr.Deref(l.Spec.HolderIdentity, "")
		}
		if id != "" && !expired(l, now) && strings.HasSuffix(l.Name, "-shard-"+id) {
			out = append(out, id)
		}
	}
	return out, nil
}

// NewIdentity is a holder identity for a process of shard id: the id and
// a random suffix.
func NewIdentity(id string) string {
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	return id + "_" + hex.EncodeToString(suffix)
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: every
// replica is a shard.
func (m *Member) NeedLeaderElection() bool { return false }
