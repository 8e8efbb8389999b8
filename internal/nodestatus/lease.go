package nodestatus

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// Lease renewal retries: updates are tried this many times per renewal;
// getting or creating the Lease is retried with a doubling delay up to
// leaseBackoffMax.
const (
	leaseUpdateRetries = 5
	leaseBackoffStart  = 100 * time.Millisecond
	leaseBackoffMax    = 7 * time.Second
)

// syncLease renews the Lease, creating it when it does not exist.
func (m *Manager) syncLease(ctx context.Context) {
	logger := klog.FromContext(ctx)
	if m.lease != nil {
		err := m.updateLease(ctx, m.lease)
		if err == nil {
			return
		}
		logger.V(2).Info("Renewing the lease from the last copy failed, getting it again", "node", m.opts.NodeName, "err", err)
	}
	lease, created, ok := m.ensureLeaseWithBackoff(ctx)
	if !ok {
		return
	}
	m.lease = lease
	if created {
		return
	}
	if err := m.updateLease(ctx, lease); err != nil {
		logger.Error(err, "Unable to renew node lease, will retry", "node", m.opts.NodeName, "interval", m.renewInterval())
	}
}

// ensureLeaseWithBackoff gets or creates the Lease, retrying until it
// succeeds or ctx ends (ok false).
func (m *Manager) ensureLeaseWithBackoff(ctx context.Context) (lease *coordinationv1.Lease, created, ok bool) {
	delay := leaseBackoffStart
	for {
		lease, created, err := m.ensureLease(ctx)
		if err == nil {
			return lease, created, true
		}
		m.cacheStale.Store(true)
		delay = min(2*delay, leaseBackoffMax)
		klog.FromContext(ctx).Error(err, "Unable to ensure the node lease exists, will retry", "node", m.opts.NodeName, "interval", delay)
		if !m.sleep(ctx, delay) {
			return nil, false, false
		}
	}
}

// ensureLease returns the Lease, creating it when missing.
func (m *Manager) ensureLease(ctx context.Context) (*coordinationv1.Lease, bool, error) {
	leases := m.heartbeat.CoordinationV1().Leases(LeaseNamespace)
	lease, err := leases.Get(ctx, m.opts.NodeName, metav1.GetOptions{})
	if err == nil {
		return lease, false, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, false, fmt.Errorf("getting lease %s/%s: %w", LeaseNamespace, m.opts.NodeName, err)
	}
	lease, err = leases.Create(ctx, m.newLease(ctx, nil), metav1.CreateOptions{})
	if err != nil {
		return nil, false, fmt.Errorf("creating lease %s/%s: %w", LeaseNamespace, m.opts.NodeName, err)
	}
	return lease, true, nil
}

// updateLease writes base with a new renew time, retrying; on a conflict
// it starts again from a fresh copy.
func (m *Manager) updateLease(ctx context.Context, base *coordinationv1.Lease) error {
	logger := klog.FromContext(ctx)
	var err error
	for i := 0; i < leaseUpdateRetries; i++ {
		var lease *coordinationv1.Lease
		lease, err = m.heartbeat.CoordinationV1().Leases(LeaseNamespace).Update(ctx, m.newLease(ctx, base), metav1.UpdateOptions{})
		if err == nil {
			m.lease = lease
			if m.cacheStale.Load() {
				// The API server answers again after a failure: the
				// status goes out now, not at the next update period.
				m.Trigger()
			}
			return nil
		}
		m.cacheStale.Store(true)
		err = fmt.Errorf("updating lease %s/%s: %w", LeaseNamespace, m.opts.NodeName, err)
		logger.Error(err, "Unable to renew node lease", "node", m.opts.NodeName, "attempt", i+1)
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			fresh, _, ok := m.ensureLeaseWithBackoff(ctx)
			if !ok {
				return ctx.Err()
			}
			base = fresh
			continue
		}
		if i > 0 && m.opts.OnRepeatedFailure != nil {
			m.opts.OnRepeatedFailure()
		}
	}
	return err
}

// newLease is base (or a new Lease) held by this node, renewed now, and
// owned by the Node so that it goes away with it.
func (m *Manager) newLease(ctx context.Context, base *coordinationv1.Lease) *coordinationv1.Lease {
	var lease *coordinationv1.Lease
	if base == nil {
		lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: m.opts.NodeName, Namespace: LeaseNamespace}}
	} else {
		lease = base.DeepCopy()
	}
	lease.Spec.HolderIdentity = ptr.To(m.opts.NodeName)
	lease.Spec.LeaseDurationSeconds = ptr.To(m.opts.LeaseDuration)
	lease.Spec.RenewTime = &metav1.MicroTime{Time: m.clk.Now()}
	m.setLeaseOwner(ctx, lease)
	return lease
}

// setLeaseOwner points the Lease's owner reference at the current Node.
// A reference to a Node that was deleted and registered again (another
// UID) is replaced, or the garbage collector would delete the Lease.
func (m *Manager) setLeaseOwner(ctx context.Context, lease *coordinationv1.Lease) {
	node := m.Node()
	if node == nil || node.UID == "" {
		n, err := m.heartbeat.CoreV1().Nodes().Get(ctx, m.opts.NodeName, metav1.GetOptions{})
		if err != nil {
			klog.FromContext(ctx).V(4).Info("Node unknown yet, lease has no owner", "node", m.opts.NodeName, "err", err)
			return
		}
		node = n
	}
	ref := metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}
	var kept []metav1.OwnerReference
	found := false
	for _, o := range lease.OwnerReferences {
		if o.APIVersion == ref.APIVersion && o.Kind == ref.Kind && o.Name == ref.Name {
			if found {
				continue
			}
			found = true
			o = ref
		}
		kept = append(kept, o)
	}
	if !found {
		kept = append(kept, ref)
	}
	lease.OwnerReferences = kept
}
