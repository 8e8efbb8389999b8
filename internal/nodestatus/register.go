package nodestatus

import (
	"context"
	"errors"
	"fmt"
	"maps"
	goruntime "runtime"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// Registration is retried with a doubling delay between these bounds.
const (
	registerBackoffStart = 100 * time.Millisecond
	registerBackoffMax   = 7 * time.Second
)

// Deprecated OS and architecture labels the upstream kubelet still sets.
const (
	labelBetaOS   = "beta.kubernetes.io/os"
	labelBetaArch = "beta.kubernetes.io/arch"
)

// AnnotationControllerManagedAttach tells the attach-detach controller
// that it attaches and detaches this node's volumes, as upstream's default
// (enableControllerAttachDetach): heartlet attaches none itself.
const AnnotationControllerManagedAttach = "volumes.kubernetes.io/controller-managed-attach-detach"

// errNotRegistered: the Node does not exist (yet) and registration failed
// or is not allowed.
var errNotRegistered = errors.New("node is not registered")

// defaultLabels are the labels heartlet owns on its Node: set at
// registration and put back when they differ.
func (m *Manager) defaultLabels() map[string]string {
	return map[string]string{
		v1.LabelHostname:   m.opts.Hostname,
		v1.LabelOSStable:   goruntime.GOOS,
		v1.LabelArchStable: goruntime.GOARCH,
		labelBetaOS:        goruntime.GOOS,
		labelBetaArch:      goruntime.GOARCH,
	}
}

// initialNode is the Node heartlet creates: default labels, nodeLabels,
// registerWithTaints, providerID, and a full status.
func (m *Manager) initialNode(ctx context.Context) *v1.Node {
	logger := klog.FromContext(ctx)
	labels := m.defaultLabels()
	for k, v := range m.opts.Labels {
		if def, ok := labels[k]; ok && def != v {
			logger.Info("Node label overrides a default label", "label", k, "value", v, "default", def)
		}
		labels[k] = v
	}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: m.opts.NodeName, Labels: labels,
		Annotations: map[string]string{AnnotationControllerManagedAttach: "true"}}}
	if len(m.opts.Taints) > 0 {
		node.Spec.Taints = slices.Clone(m.opts.Taints)
	}
	node.Spec.ProviderID = m.opts.ProviderID
	m.setStatus(ctx, node)
	return node
}

// register creates the Node, or adopts the existing one and puts back the
// default labels. created says whether the Node was created with its full
// status.
func (m *Manager) register(ctx context.Context) (created bool, err error) {
	logger := klog.FromContext(ctx)
	node := m.initialNode(ctx)
	logger.Info("Registering node", "node", m.opts.NodeName)
	n, err := m.kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err == nil {
		logger.Info("Registered node", "node", m.opts.NodeName, "uid", n.UID)
		m.setLast(n)
		m.lastReport = m.clk.Now()
		m.noteStatus(node)
		return true, nil
	}
	if !apierrors.IsAlreadyExists(err) && !apierrors.IsForbidden(err) {
		return false, fmt.Errorf("creating node %s: %w", m.opts.NodeName, err)
	}
	// A node may be forbidden to create a Node that exists already (or
	// that is not its own); look whether it exists.
	existing, getErr := m.kube.CoreV1().Nodes().Get(ctx, m.opts.NodeName, metav1.GetOptions{})
	if getErr != nil {
		return false, fmt.Errorf("creating node %s: %w; getting it: %w", m.opts.NodeName, err, getErr)
	}
	logger.Info("Node was registered before", "node", m.opts.NodeName, "uid", existing.UID)
	updated := existing.DeepCopy()
	if updated.Labels == nil {
		updated.Labels = map[string]string{}
	}
	changed := false
	for k, v := range m.defaultLabels() {
		if updated.Labels[k] != v {
			updated.Labels[k] = v
			changed = true
		}
	}
	if updated.Annotations[AnnotationControllerManagedAttach] != "true" {
		if updated.Annotations == nil {
			updated.Annotations = map[string]string{}
		}
		updated.Annotations[AnnotationControllerManagedAttach] = "true"
		changed = true
	}
	if !changed {
		m.setLast(existing)
		return false, nil
	}
	n, err = m.patchStatus(ctx, existing, updated)
	if err != nil {
		return false, fmt.Errorf("reconciling labels of node %s: %w", m.opts.NodeName, err)
	}
	m.setLast(n)
	return false, nil
}

// labelsNeedFix says whether the OS and architecture labels are missing or
// wrong on node, and fixes them.
func labelsNeedFix(node *v1.Node) bool {
	want := map[string]string{v1.LabelOSStable: goruntime.GOOS, v1.LabelArchStable: goruntime.GOARCH}
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	fix := false
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if node.Labels[k] != want[k] {
			node.Labels[k] = want[k]
			fix = true
		}
	}
	return fix
}
