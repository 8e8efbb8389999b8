package agent

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/heartlet/heartlet/internal/mirror"
	"github.com/heartlet/heartlet/internal/podconfig"
	"github.com/heartlet/heartlet/internal/podlifecycle"
	"github.com/heartlet/heartlet/internal/podsource/apiserver"
)

// mirrorPods keeps the API's mirror pods in step with the desired static
// pods.
type mirrorPods struct {
	mirrors *mirror.Manager
	desired *podconfig.Config
	api     *apiserver.Source
}

var _ podlifecycle.MirrorSyncer = (*mirrorPods)(nil)

func (m *mirrorPods) SyncMirrors(ctx context.Context) error {
	var static []*v1.Pod
	// The mirror manager copies what it sends; the pods are only read.
	for _, p := range m.desired.SharedPods() {
		if podconfig.IsStatic(p) {
			static = append(static, p)
		}
	}
	if err := m.mirrors.Sync(ctx, static, m.api.MirrorPods()); err != nil {
		return fmt.Errorf("sync mirror pods: %w", err)
	}
	return nil
}

func (m *mirrorPods) MirrorCount() int { return len(m.api.MirrorPods()) }
