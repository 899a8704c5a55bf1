package sharding

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cuengine/engine/contract"
)

// Member keeps this replica's shard Lease renewed: the shard is alive while
// the Lease is. If it cannot renew within RenewDeadline, Start returns an
// error, which stops the manager: a replica that may have been declared
// dead must stop reconciling before its parents are given to others, as a
// leader that lost its lease does.
type Member struct {
	Client    client.Client
	Namespace string
	Group     string
	ID        string
	// LeaseDuration is how long the Lease is valid after a renewal;
	// RenewDeadline (shorter) how long renewals may fail before the
	// replica stops; RetryPeriod how often it renews.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// LeaseName is the name of a shard's Lease.
func LeaseName(group, id string) string { return group + "-shard-" + id }

// Start implements manager.Runnable.
func (m *Member) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithValues("shard", m.ID)
	last := time.Now()
	tick := time.NewTicker(m.RetryPeriod)
	defer tick.Stop()
	for {
		if err := m.renew(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if time.Since(last) > m.RenewDeadline {
				return fmt.Errorf("shard %s could not renew its lease for %s: stopping, as its parents go to other shards: %w", m.ID, m.RenewDeadline, err)
			}
			logger.V(1).Info("renewing the shard lease failed; retrying", "error", err.Error())
		} else {
			last = time.Now()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: every
// replica is a shard.
func (m *Member) NeedLeaderElection() bool { return false }

func (m *Member) renew(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, m.RetryPeriod+time.Second)
	defer cancel()
	now := metav1.NewMicroTime(time.Now())
	lease := &coordinationv1.Lease{}
	err := m.Client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: LeaseName(m.Group, m.ID)}, lease)
	if apierrors.IsNotFound(err) {
		lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: LeaseName(m.Group, m.ID), Labels: map[string]string{contract.LabelShardGroup: m.Group}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(m.ID), LeaseDurationSeconds: ptr.To(int32(m.LeaseDuration.Seconds())),
				AcquireTime: &now, RenewTime: &now},
		}
		return m.Client.Create(ctx, lease)
	}
	if err != nil {
		return err
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != m.ID || expired(lease, now.Time) {
		lease.Spec.AcquireTime = &now // a new life of the shard
	}
	lease.Spec.HolderIdentity = ptr.To(m.ID)
	lease.Spec.LeaseDurationSeconds = ptr.To(int32(m.LeaseDuration.Seconds()))
	lease.Spec.RenewTime = &now
	return m.Client.Update(ctx, lease)
}

// expired reports that a shard's Lease was not renewed within its duration.
func expired(lease *coordinationv1.Lease, now time.Time) bool {
	if lease.Spec.RenewTime == nil || lease.Spec.LeaseDurationSeconds == nil {
		return true
	}
	return lease.Spec.RenewTime.Add(time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second).Before(now)
}

// liveShards lists the shards of a group whose Lease is valid at now.
func liveShards(ctx context.Context, c client.Reader, namespace, group string, now time.Time) ([]string, error) {
	leases := &coordinationv1.LeaseList{}
	if err := c.List(ctx, leases, client.InNamespace(namespace), client.MatchingLabels{contract.LabelShardGroup: group}); err != nil {
		return nil, fmt.Errorf("listing shard leases: %w", err)
	}
	var out []string
	for i := range leases.Items {
		l := &leases.Items[i]
		if l.Spec.HolderIdentity != nil && !expired(l, now) {
			out = append(out, *l.Spec.HolderIdentity)
		}
	}
	return out, nil
}
