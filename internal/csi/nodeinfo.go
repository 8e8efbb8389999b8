package csi

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
)

// NodeIDAnnotation is the node annotation that maps driver names to the
// node IDs the drivers reported, as upstream.
const NodeIDAnnotation = "csi.volume.kubernetes.io/nodeid"

// NodeInfo publishes drivers' node information as upstream does: the
// driver's node ID in the node annotation NodeIDAnnotation, its topology
// segments as node labels, and an entry (node ID, topology keys, maximum
// volume count) in the CSINode object named after the node, which is
// created (owned by the Node) when missing. It implements
// NodeInfoPublisher.
type NodeInfo struct {
	kube     KubeClient
	nodeName string
}

var _ NodeInfoPublisher = (*NodeInfo)(nil)

// NewNodeInfo returns the publisher for this node.
func NewNodeInfo(kube KubeClient, nodeName string) *NodeInfo {
	return &NodeInfo{kube: kube, nodeName: nodeName}
}

// Add implements NodeInfoPublisher.
func (n *NodeInfo) Add(ctx context.Context, driver string, info *csipb.NodeGetInfoResponse) error {
	node, err := n.kube.CoreV1().Nodes().Get(ctx, n.nodeName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get node %s: %w", n.nodeName, err)
	}
	ids, err := nodeIDs(node)
	if err != nil {
		return err
	}
	ids[driver] = info.GetNodeId()
	labels := map[string]string{}
	var keys []string
	for k, v := range info.GetAccessibleTopology().GetSegments() {
		labels[k] = v
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if err := n.patchNode(ctx, ids, labels); err != nil {
		return err
	}
	entry := storagev1.CSINodeDriver{Name: driver, NodeID: info.GetNodeId(), TopologyKeys: keys}
	if max := info.GetMaxVolumesPerNode(); max > 0 {
		count := int32(max)
		entry.Allocatable = &storagev1.VolumeNodeResources{Count: &count}
	}
	return n.updateCSINode(ctx, node, func(cn *storagev1.CSINode) {
		cn.Spec.Drivers = slices.DeleteFunc(cn.Spec.Drivers, func(d storagev1.CSINodeDriver) bool { return d.Name == driver })
		cn.Spec.Drivers = append(cn.Spec.Drivers, entry)
	})
}

// Remove implements NodeInfoPublisher. The topology labels stay, as
// upstream leaves them.
func (n *NodeInfo) Remove(ctx context.Context, driver string) error {
	node, err := n.kube.CoreV1().Nodes().Get(ctx, n.nodeName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get node %s: %w", n.nodeName, err)
	}
	ids, err := nodeIDs(node)
	if err != nil {
		return err
	}
	if _, ok := ids[driver]; ok {
		delete(ids, driver)
		if err := n.patchNode(ctx, ids, nil); err != nil {
			return err
		}
	}
	return n.updateCSINode(ctx, node, func(cn *storagev1.CSINode) {
		cn.Spec.Drivers = slices.DeleteFunc(cn.Spec.Drivers, func(d storagev1.CSINodeDriver) bool { return d.Name == driver })
	})
}

// nodeIDs reads the node annotation.
func nodeIDs(node *v1.Node) (map[string]string, error) {
	ids := map[string]string{}
	if s := node.Annotations[NodeIDAnnotation]; s != "" {
		if err := json.Unmarshal([]byte(s), &ids); err != nil {
			return nil, fmt.Errorf("node annotation %s: %w", NodeIDAnnotation, err)
		}
	}
	return ids, nil
}

// patchNode writes the annotation (removed when empty) and adds labels.
func (n *NodeInfo) patchNode(ctx context.Context, ids map[string]string, labels map[string]string) error {
	var ann any
	if len(ids) > 0 {
		b, err := json.Marshal(ids)
		if err != nil {
			return fmt.Errorf("encode node annotation: %w", err)
		}
		ann = string(b)
	}
	meta := map[string]any{"annotations": map[string]any{NodeIDAnnotation: ann}}
	if len(labels) > 0 {
		meta["labels"] = labels
	}
	patch, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		return fmt.Errorf("encode node patch: %w", err)
	}
	if _, err := n.kube.CoreV1().Nodes().Patch(ctx, n.nodeName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("patch node %s: %w", n.nodeName, err)
	}
	return nil
}

// updateCSINode applies change to the node's CSINode, creating it.
func (n *NodeInfo) updateCSINode(ctx context.Context, node *v1.Node, change func(*storagev1.CSINode)) error {
	api := n.kube.StorageV1().CSINodes()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cn, err := api.Get(ctx, n.nodeName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			cn = &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{
				Name: n.nodeName,
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID,
				}},
			}}
			change(cn)
			_, err = api.Create(ctx, cn, metav1.CreateOptions{})
			return err
		}
		if err != nil {
			return err
		}
		change(cn)
		_, err = api.Update(ctx, cn, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("update CSINode %s: %w", n.nodeName, err)
	}
	return nil
}
