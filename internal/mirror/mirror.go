// Package mirror keeps the API server's mirror pods in line with the
// node's static pods. A mirror pod is the read-only API copy of a static
// pod: same namespace, name, labels and spec, bound to this node, owned by
// the Node object, and marked with the kubernetes.io/config.mirror
// annotation that holds the static pod's config hash. The API server's
// NodeRestriction admission lets a node create exactly such pods.
package mirror

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"sync"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/heartlet/heartlet/internal/kubeapi"
	"github.com/heartlet/heartlet/internal/podconfig"
)

// KubeClient is the API group mirror pods are written with: a clientset (kubeclient's, or client-go's fake in
// tests).
type KubeClient interface {
	CoreV1() kubeapi.CoreV1Interface
}

// ErrNodeUnknown is returned by Sync when a mirror pod must be created but
// the node's API object (and so its UID, which the owner reference needs)
// is not known yet.
var ErrNodeUnknown = errors.New("node object not known yet")

// Manager creates and deletes mirror pods. It is safe for concurrent use;
// Sync calls are serialized.
type Manager struct {
	kube     KubeClient
	nodeName string
	node     func() *v1.Node

	mu sync.Mutex
	// refused holds, by namespace/name, the config hash of a static pod
	// whose mirror the API server refused; the refusal is logged once.
	refused map[string]string
}

// New returns a Manager for the node nodeName. node returns the node's
// last known API object (nil before it is registered); its UID goes into
// the owner reference of every mirror pod.
func New(kube KubeClient, nodeName string, node func() *v1.Node) *Manager {
	return &Manager{kube: kube, nodeName: nodeName, node: node, refused: map[string]string{}}
}

// IsMirror reports whether pod is a mirror pod.
func IsMirror(pod *v1.Pod) bool {
	_, ok := pod.Annotations[podconfig.AnnotationConfigMirror]
	return ok
}

// ConfigHash returns the config hash of a static pod: its
// kubernetes.io/config.hash annotation, or its UID without one.
func ConfigHash(static *v1.Pod) string {
	if h := static.Annotations[podconfig.AnnotationConfigHash]; h != "" {
		return h
	}
	return string(static.UID)
}

// MirrorFor returns the mirror pod of static among mirrors: the mirror pod
// with the same namespace and name whose mirror annotation matches the
// static pod's config hash and that is not being deleted. An outdated or
// terminating mirror is no mirror of this static pod.
func MirrorFor(static *v1.Pod, mirrors []*v1.Pod) (*v1.Pod, bool) {
	hash := ConfigHash(static)
	for _, mp := range mirrors {
		if mp.Namespace != static.Namespace || mp.Name != static.Name || mp.DeletionTimestamp != nil {
			continue
		}
		if h, ok := mp.Annotations[podconfig.AnnotationConfigMirror]; ok && h == hash {
			return mp, true
		}
	}
	return nil, false
}

// Sync makes the API's mirror pods match the static pods. static holds the
// static pods that need a mirror (running or still terminating; for one
// namespace/name the last one wins); mirrors holds the mirror pods the API
// currently has on this node. For each static pod:
//   - no mirror: it is created (AlreadyExists is fine);
//   - a mirror with another config hash, or being deleted: it is deleted
//     (with its UID as precondition); the next Sync creates the new one;
//   - an up-to-date mirror: nothing.
//
// Mirror pods without a static pod are deleted. A mirror pod the API
// server refuses (NodeRestriction admission refuses pods that reference
// service accounts, secrets, config maps or volume claims) is logged once
// per pod and otherwise ignored. Sync is idempotent; the caller runs it
// after every change of static or mirror pods and periodically. It
// returns the other errors, joined.
func (m *Manager) Sync(ctx context.Context, static []*v1.Pod, mirrors []*v1.Pod) error {
	m.mu.Lock()
	defer m.mu.Unlock()

	wanted := map[string]*v1.Pod{}
	for _, sp := range static {
		wanted[key(sp)] = sp
	}
	existing := map[string]*v1.Pod{}
	for _, mp := range mirrors {
		if !IsMirror(mp) || mp.Spec.NodeName != m.nodeName {
			continue
		}
		existing[key(mp)] = mp
	}

	var errs []error
	for _, k := range sortedKeys(existing) {
		mp := existing[k]
		sp, ok := wanted[k]
		switch {
		case !ok:
			errs = append(errs, m.delete(ctx, mp, "static pod removed"))
		case mp.DeletionTimestamp != nil:
			errs = append(errs, m.delete(ctx, mp, "mirror pod being deleted"))
		case mp.Annotations[podconfig.AnnotationConfigMirror] != ConfigHash(sp):
			errs = append(errs, m.delete(ctx, mp, "static pod changed"))
		}
	}
	for _, k := range sortedKeys(wanted) {
		if _, ok := existing[k]; ok {
			continue
		}
		errs = append(errs, m.create(ctx, wanted[k]))
	}
	for k := range m.refused {
		if sp, ok := wanted[k]; !ok || ConfigHash(sp) != m.refused[k] {
			delete(m.refused, k)
		}
	}
	return errors.Join(errs...)
}

// create creates the mirror pod of sp.
func (m *Manager) create(ctx context.Context, sp *v1.Pod) error {
	logger := klog.FromContext(ctx).WithValues("pod", klog.KObj(sp), "podUID", sp.UID)
	node := m.node()
	if node == nil || node.UID == "" {
		return fmt.Errorf("create mirror pod %s/%s: %w", sp.Namespace, sp.Name, ErrNodeUnknown)
	}
	mp := m.build(sp, node.UID)
	created, err := m.kube.CoreV1().Pods(mp.Namespace).Create(ctx, mp, metav1.CreateOptions{})
	switch {
	case err == nil:
		logger.V(2).Info("Mirror pod created", "mirrorUID", created.UID)
		return nil
	case apierrors.IsAlreadyExists(err):
		logger.V(4).Info("Mirror pod already exists")
		return nil
	case apierrors.IsForbidden(err) || apierrors.IsInvalid(err):
		hash := ConfigHash(sp)
		if m.refused[key(sp)] != hash {
			m.refused[key(sp)] = hash
			logger.Error(err, "API server refused the mirror pod, the static pod runs without one")
		} else {
			logger.V(4).Info("API server refused the mirror pod again", "err", err)
		}
		return nil
	default:
		return fmt.Errorf("create mirror pod %s/%s: %w", sp.Namespace, sp.Name, err)
	}
}

// delete deletes a mirror pod at once, only if it still has its UID.
func (m *Manager) delete(ctx context.Context, mp *v1.Pod, why string) error {
	logger := klog.FromContext(ctx).WithValues("pod", klog.KObj(mp), "podUID", mp.UID)
	uid := mp.UID
	err := m.kube.CoreV1().Pods(mp.Namespace).Delete(ctx, mp.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      &metav1.Preconditions{UID: &uid},
	})
	switch {
	case err == nil:
		logger.V(2).Info("Mirror pod deleted", "reason", why)
		return nil
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		logger.V(4).Info("Mirror pod already gone", "reason", why)
		return nil
	default:
		return fmt.Errorf("delete mirror pod %s/%s: %w", mp.Namespace, mp.Name, err)
	}
}

// build returns the mirror pod of sp: its metadata (name, namespace,
// labels, annotations plus the mirror annotation) and spec, bound to this
// node and owned by the Node object with UID nodeUID.
func (m *Manager) build(sp *v1.Pod, nodeUID types.UID) *v1.Pod {
	annotations := maps.Clone(sp.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[podconfig.AnnotationConfigMirror] = ConfigHash(sp)
	mp := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        sp.Name,
			Namespace:   sp.Namespace,
			Labels:      maps.Clone(sp.Labels),
			Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1",
				Kind:       "Node",
				Name:       m.nodeName,
				UID:        nodeUID,
				Controller: ptr.To(true),
			}},
		},
		Spec: *sp.Spec.DeepCopy(),
	}
	mp.Spec.NodeName = m.nodeName
	return mp
}

// key is a pod's namespace/name.
func key(p *v1.Pod) string {
	return p.Namespace + "/" + p.Name
}

// sortedKeys returns m's keys in order, so that API calls happen in a
// stable order.
func sortedKeys(m map[string]*v1.Pod) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
