package csi

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/heartlet/heartlet/internal/mergepatch"
)

// Upstream's event reasons of the node's part of a volume expansion.
const (
	EventFileSystemResizeSuccessful = "FileSystemResizeSuccessful"
	EventFileSystemResizeFailed     = "FileSystemResizeFailed"
)

// expandState remembers the publications made but not yet expanded: an
// expansion they need is part of their mount, and its failure keeps the
// pod's containers waiting, as upstream's MountVolume. The zero value is
// ready.
type expandState struct {
	mu      sync.Mutex
	atMount map[string]bool // uid/name
}

func (s *expandState) mark(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.atMount == nil {
		s.atMount = map[string]bool{}
	}
	s.atMount[key] = true
}

func (s *expandState) pending(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.atMount[key]
}

func (s *expandState) done(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.atMount, key)
}

// ExpandPersistent does the node's part of the expansion of claim's CSI
// volume pv, published for pod, as upstream's kubelet: when the PV's
// capacity exceeds the claim's status.capacity and the resizer asks for
// it (allocatedResourceStatuses[storage] NodeResizePending or
// NodeResizeInProgress), it marks the claim NodeResizeInProgress, calls
// NodeExpandVolume on the published volume (when the driver has the
// EXPAND_VOLUME node capability; else it only records the new size), and
// then sets status.capacity to the PV's, drops allocatedResourceStatuses'
// storage entry and the resize conditions, with FileSystemResizeSuccessful
// events on the pod and the claim. Read-only volumes are not expanded.
//
// A failure on a volume published in this round (a mount) is returned,
// so that the pod's containers wait, and retried on the next call; on a
// volume in use it is a FileSystemResizeFailed event on the pod and nil.
// A final driver error also marks the claim: NodeResizeInfeasible for
// InvalidArgument and OutOfRange, else a NodeResizeError condition.
func (p *Publisher) ExpandPersistent(ctx context.Context, pod *v1.Pod, claim *v1.PersistentVolumeClaim, pv *v1.PersistentVolume, readOnly bool) error {
	if pv.Spec.CSI == nil || p.opts.Kube == nil {
		return nil
	}
	// The volume's lock: no unstage or unpublish of it meanwhile.
	unlock := p.locks.lock(pv.Spec.CSI.Driver, pv.Spec.CSI.VolumeHandle)
	defer unlock()
	key := string(pod.UID) + "/" + pv.Name
	if !p.isPublished(key) {
		return nil
	}
	atMount := p.expand.pending(key)
	newSize, ok := pv.Spec.Capacity[v1.ResourceStorage]
	have := claim.Status.Capacity[v1.ResourceStorage]
	resizeStatus := claim.Status.AllocatedResourceStatuses[v1.ResourceStorage]
	if readOnly || !ok || have.Cmp(newSize) >= 0 ||
		(resizeStatus != v1.PersistentVolumeClaimNodeResizePending && resizeStatus != v1.PersistentVolumeClaimNodeResizeInProgress) {
		p.expand.done(key)
		return nil
	}
	logger := klog.FromContext(ctx).WithValues("pod", klog.KObj(pod), "podUID", pod.UID, "volume", pv.Name, "pvc", klog.KObj(claim))
	err := p.expandOnNode(ctx, pod, claim, pv, newSize)
	if err == nil {
		p.expand.done(key)
		return nil
	}
	if atMount {
		return fmt.Errorf("MountVolume.NodeExpandVolume failed for volume %q : %w", pv.Name, err)
	}
	logger.Error(err, "Couldn't expand the volume on the node")
	p.event(pod, v1.EventTypeWarning, EventFileSystemResizeFailed, fmt.Sprintf("NodeExpandVolume.NodeExpandVolume failed for volume %q : %v", pv.Name, err))
	return nil
}

// expandOnNode marks the claim in progress, expands the volume on the
// node and records the new size.
func (p *Publisher) expandOnNode(ctx context.Context, pod *v1.Pod, claim *v1.PersistentVolumeClaim, pv *v1.PersistentVolume, newSize resource.Quantity) error {
	drv, err := p.opts.Drivers.get(pv.Spec.CSI.Driver)
	if err != nil {
		return err
	}
	if claim.Status.AllocatedResourceStatuses[v1.ResourceStorage] != v1.PersistentVolumeClaimNodeResizeInProgress {
		in := claim.DeepCopy()
		in.Status.AllocatedResourceStatuses = setStorageStatus(in.Status.AllocatedResourceStatuses, v1.PersistentVolumeClaimNodeResizeInProgress)
		if claim, err = p.patchClaimStatus(ctx, claim, in); err != nil {
			return fmt.Errorf("mark node expansion in progress: %w", err)
		}
	}
	if drv.expand {
		if err := p.nodeExpand(ctx, drv, pod, pv, newSize); err != nil {
			p.markExpandFailed(ctx, claim, err)
			if status.Code(err) == codes.FailedPrecondition {
				// Upstream: not to be retried on this node, and no reason
				// to keep the volume from its pod.
				klog.FromContext(ctx).Error(err, "NodeExpandVolume refused by the driver", "pod", klog.KObj(pod), "podUID", pod.UID, "volume", pv.Name)
				return nil
			}
			return err
		}
		msg := fmt.Sprintf("MountVolume.NodeExpandVolume succeeded for volume %q %s", pv.Name, p.opts.NodeName)
		p.event(pod, v1.EventTypeNormal, EventFileSystemResizeSuccessful, msg)
		p.event(claim, v1.EventTypeNormal, EventFileSystemResizeSuccessful, msg)
	}
	done := claim.DeepCopy()
	if done.Status.Capacity == nil {
		done.Status.Capacity = v1.ResourceList{}
	}
	done.Status.Capacity[v1.ResourceStorage] = newSize
	delete(done.Status.AllocatedResourceStatuses, v1.ResourceStorage)
	if len(done.Status.AllocatedResourceStatuses) == 0 {
		done.Status.AllocatedResourceStatuses = nil
	}
	done.Status.Conditions = withoutResizeConditions(done.Status.Conditions)
	if _, err := p.patchClaimStatus(ctx, claim, done); err != nil {
		return fmt.Errorf("mark file system resize finished: %w", err)
	}
	klog.FromContext(ctx).V(2).Info("Volume expanded on the node", "pod", klog.KObj(pod), "podUID", pod.UID, "volume", pv.Name, "capacity", newSize.String())
	return nil
}

// nodeExpand calls NodeExpandVolume on the pod's publication of pv.
func (p *Publisher) nodeExpand(ctx context.Context, drv *driver, pod *v1.Pod, pv *v1.PersistentVolume, newSize resource.Quantity) error {
	src := pv.Spec.CSI
	secrets, err := p.secrets(ctx, src.NodeExpandSecretRef)
	if err != nil {
		return err
	}
	mode := &csipb.VolumeCapability_AccessMode{Mode: accessMode(pv.Spec.AccessModes)}
	var (
		staging, path string
		capability    *csipb.VolumeCapability
	)
	if pv.Spec.VolumeMode != nil && *pv.Spec.VolumeMode == v1.PersistentVolumeBlock {
		// A raw block volume: its publication is the device, as upstream
		// hands block volumes to NodeExpandVolume.
		if drv.stage {
			staging = p.BlockStagingPath(pv.Name)
		}
		path = p.BlockPublishPath(pv.Name, pod.UID)
		capability = &csipb.VolumeCapability{AccessType: &csipb.VolumeCapability_Block{Block: &csipb.VolumeCapability_BlockVolume{}}, AccessMode: mode}
	} else {
		if drv.stage {
			staging = filepath.Join(p.StagingDir(src.Driver, src.VolumeHandle), globalMount)
		}
		path = filepath.Join(p.PublishDir(pod.UID, pv.Name), "mount")
		capability = &csipb.VolumeCapability{
			AccessType: &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{FsType: src.FSType, MountFlags: pv.Spec.MountOptions}},
			AccessMode: mode,
		}
	}
	_, err = drv.client.NodeExpandVolume(ctx, &csipb.NodeExpandVolumeRequest{
		VolumeId:          src.VolumeHandle,
		VolumePath:        path,
		StagingTargetPath: staging,
		CapacityRange:     &csipb.CapacityRange{RequiredBytes: newSize.Value()},
		VolumeCapability:  capability,
		Secrets:           secrets,
	})
	if err != nil {
		return fmt.Errorf("NodeExpandVolume of volume %q (driver %s): %w", pv.Name, src.Driver, err)
	}
	return nil
}

// markExpandFailed records a final driver error on the claim, as
// upstream: NodeResizeInfeasible or a NodeResizeError condition. A
// failure to write it is logged; the expansion is retried anyway.
func (p *Publisher) markExpandFailed(ctx context.Context, claim *v1.PersistentVolumeClaim, err error) {
	code := status.Code(err)
	switch code {
	case codes.Canceled, codes.DeadlineExceeded, codes.Unavailable, codes.ResourceExhausted, codes.Aborted:
		return // may still be going on in the driver
	}
	failed := claim.DeepCopy()
	if code == codes.InvalidArgument || code == codes.OutOfRange {
		failed.Status.AllocatedResourceStatuses = setStorageStatus(failed.Status.AllocatedResourceStatuses, v1.PersistentVolumeClaimNodeResizeInfeasible)
	}
	cond := v1.PersistentVolumeClaimCondition{
		Type: v1.PersistentVolumeClaimNodeResizeError, Status: v1.ConditionTrue, LastTransitionTime: metav1.Now(),
		Message: fmt.Sprintf("failed to expand pvc with %v", err),
	}
	var conds []v1.PersistentVolumeClaimCondition
	for _, c := range failed.Status.Conditions {
		if c.Type != cond.Type {
			conds = append(conds, c)
		}
	}
	failed.Status.Conditions = append(conds, cond)
	if _, perr := p.patchClaimStatus(ctx, claim, failed); perr != nil {
		klog.FromContext(ctx).Error(perr, "Couldn't record the failed node expansion on the claim", "pvc", klog.KObj(claim))
	}
}

func setStorageStatus(m map[v1.ResourceName]v1.ClaimResourceStatus, s v1.ClaimResourceStatus) map[v1.ResourceName]v1.ClaimResourceStatus {
	out := make(map[v1.ResourceName]v1.ClaimResourceStatus, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	out[v1.ResourceStorage] = s
	return out
}

// resizeConditions are the claim conditions a finished resize drops, as
// upstream.
var resizeConditions = map[v1.PersistentVolumeClaimConditionType]bool{
	v1.PersistentVolumeClaimResizing:                true,
	v1.PersistentVolumeClaimFileSystemResizePending: true,
	v1.PersistentVolumeClaimControllerResizeError:   true,
	v1.PersistentVolumeClaimNodeResizeError:         true,
}

func withoutResizeConditions(cs []v1.PersistentVolumeClaimCondition) []v1.PersistentVolumeClaimCondition {
	var out []v1.PersistentVolumeClaimCondition
	for _, c := range cs {
		if !resizeConditions[c.Type] {
			out = append(out, c)
		}
	}
	return out
}

// patchClaimStatus writes the difference between old and new claim's
// status as a strategic merge patch of the status subresource, which
// carries old's resourceVersion so that it fails on a claim changed since
// (as upstream's PatchPVCStatus: the node authorizer lets a node patch
// the status of its pods' claims).
func (p *Publisher) patchClaimStatus(ctx context.Context, old, new *v1.PersistentVolumeClaim) (*v1.PersistentVolumeClaim, error) {
	oldData, err := json.Marshal(old)
	if err != nil {
		return nil, fmt.Errorf("encode claim %s/%s: %w", old.Namespace, old.Name, err)
	}
	newData, err := json.Marshal(new)
	if err != nil {
		return nil, fmt.Errorf("encode claim %s/%s: %w", old.Namespace, old.Name, err)
	}
	patch, err := mergepatch.CreateTwoWayMergePatch(oldData, newData, old)
	if err != nil {
		return nil, fmt.Errorf("patch of claim %s/%s: %w", old.Namespace, old.Name, err)
	}
	var m map[string]any
	if err := json.Unmarshal(patch, &m); err != nil {
		return nil, fmt.Errorf("patch of claim %s/%s: %w", old.Namespace, old.Name, err)
	}
	m["metadata"] = map[string]any{"resourceVersion": old.ResourceVersion}
	if patch, err = json.Marshal(m); err != nil {
		return nil, fmt.Errorf("patch of claim %s/%s: %w", old.Namespace, old.Name, err)
	}
	got, err := p.opts.Kube.CoreV1().PersistentVolumeClaims(old.Namespace).Patch(ctx, old.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return nil, fmt.Errorf("patch status of claim %s/%s: %w", old.Namespace, old.Name, err)
	}
	return got, nil
}

// event records an event when the publisher has a recorder.
func (p *Publisher) event(obj runtime.Object, eventType, reason, msg string) {
	if p.opts.Events != nil {
		p.opts.Events.Event(obj, eventType, reason, msg)
	}
}
