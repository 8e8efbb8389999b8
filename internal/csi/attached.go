package csi

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// UniqueVolumeName is upstream's name of a CSI volume in the node's
// status (volumesAttached, volumesInUse).
func UniqueVolumeName(driver, handle string) v1.UniqueVolumeName {
	return v1.UniqueVolumeName("kubernetes.io/csi/" + driver + "^" + handle)
}

// attachedInNodeStatus checks, as upstream's kubelet before it mounts a
// volume the attach-detach controller attaches, that the node's
// status.volumesAttached lists the volume: the controller writes it there
// once the attachment succeeded, and a VolumeAttachment alone may be one
// the controller has not accounted for yet.
func (p *Publisher) attachedInNodeStatus(ctx context.Context, pvName, driver, handle string) error {
	node, err := p.opts.Kube.CoreV1().Nodes().Get(ctx, p.opts.NodeName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get node %s: %w", p.opts.NodeName, err)
	}
	want := UniqueVolumeName(driver, handle)
	for _, a := range node.Status.VolumesAttached {
		if a.Name == want {
			return nil
		}
	}
	return &AttachError{Msg: fmt.Sprintf("volume %q (%s): volume not attached according to node status", pvName, want)}
}
