package agent

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/heartlet/heartlet/internal/cgroups"
)

// runNodeAllocatable reports the node allocatable enforcement on the Node
// (cluster mode) and retries a refused kubepods limit every minute until
// it holds. Without QoS cgroups there is nothing to enforce.
func (c *components) runNodeAllocatable(ctx context.Context) error {
	if c.cgroups == nil {
		return nil
	}
	var rec cgroups.Recorder
	if c.recorder != nil {
		rec = c.recorder
	}
	return cgroups.NewEnforcer(cgroups.EnforcerOptions{
		Cgroups:  c.cgroups,
		Recorder: rec,
		// As upstream, the node's events name its UID as its name.
		Node:  &v1.ObjectReference{Kind: "Node", Name: c.nodeName, UID: types.UID(c.nodeName)},
		Clock: clock.RealClock{},
	}).Run(ctx)
}
