package agent

import (
	"context"
	"fmt"
	"path/filepath"

	"k8s.io/klog/v2"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/heartlet/heartlet/internal/userns"
)

// The subordinate ID files the node's user namespace range is read from.
var subUIDFile, subGIDFile = "/etc/subuid", "/etc/subgid"

// newUserNamespaces is the node's allocator of pod user namespaces: its
// range from the "kubelet" user's subordinate IDs (else every ID from
// 65536 up), userNamespaces.idsPerPod IDs a pod, room for maxPods pods,
// and the runtime handlers that the runtime reports supporting them.
func newUserNamespaces(ctx context.Context, rt statuser, rootDir string, cfg *kubeletv1beta1.KubeletConfiguration) (*userns.Manager, error) {
	r, err := userns.NodeRange(subUIDFile, subGIDFile)
	if err != nil {
		return nil, fmt.Errorf("user namespaces: %w", err)
	}
	var perPod uint32
	if u := cfg.UserNamespaces; u != nil && u.IDsPerPod != nil {
		if *u.IDsPerPod <= 0 || *u.IDsPerPod >= 1<<32 {
			return nil, fmt.Errorf("user namespaces: userNamespaces.idsPerPod %d must be a positive multiple of %d below 2^32", *u.IDsPerPod, userns.Block)
		}
		perPod = uint32(*u.IDsPerPod)
	}
	m, err := userns.New(userns.Config{
		PodsDir:   filepath.Join(rootDir, "pods"),
		Range:     r,
		IDsPerPod: perPod,
		MaxPods:   int(cfg.MaxPods),
	})
	if err != nil {
		return nil, fmt.Errorf("user namespaces: %w", err)
	}
	handlers := map[string]bool{}
	if st, err := rt.Status(ctx); err != nil {
		klog.FromContext(ctx).Error(err, "Reading the runtime's handlers failed; no pod gets a user namespace")
	} else {
		for _, h := range st.GetRuntimeHandlers() {
			handlers[h.GetName()] = h.GetFeatures().GetUserNamespaces()
		}
	}
	m.SetHandlers(handlers)
	return m, nil
}
