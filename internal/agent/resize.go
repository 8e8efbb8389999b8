package agent

import (
	"fmt"
	"path/filepath"

	"k8s.io/apimachinery/pkg/types"

	"github.com/heartlet/heartlet/internal/metrics"
	"github.com/heartlet/heartlet/internal/podconfig"
	"github.com/heartlet/heartlet/internal/podsync"
	"github.com/heartlet/heartlet/internal/resize"
)

// buildResize builds in-place pod resize on the allocation record in
// <root-dir>/allocated_pods_state, where upstream keeps its own. A record
// that cannot be read stops heartlet: running pods at allocations it
// forgot could overcommit the node.
func (a *Agent) buildResize(c *components, conn *connection) error {
	store, err := resize.OpenStore(filepath.Join(a.opts.RootDir, resize.StateFileName))
	if err != nil {
		return fmt.Errorf("in-place pod resize: %w", err)
	}
	opts := resize.Options{
		Store:       store,
		Containers:  conn.rt,
		Allocatable: c.allocatable,
		Pods:        c.desired.SharedPods,
		IsStatic:    podconfig.IsStatic,
		// The workers are built after this; a retry runs only once
		// heartlet runs.
		Resync:  func(uid types.UID) { c.workers.Sync(uid) },
		Metrics: &metrics.Resize{},
		Clock:   a.clock,
	}
	if c.cgroups != nil {
		opts.Cgroups = c.cgroups
		opts.Memory = c.cgroups
	}
	if c.recorder != nil {
		opts.Recorder = c.recorder
	}
	c.resizer = resize.NewManager(opts)
	c.allocations = store
	return nil
}

// podsyncResizer keeps a nil manager a nil interface.
func podsyncResizer(m *resize.Manager) podsync.Resizer {
	if m == nil {
		return nil
	}
	return m
}
