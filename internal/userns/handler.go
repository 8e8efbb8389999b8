package userns

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/heartlet/heartlet/internal/podresources"
)

// NameUserNamespace is the handler's name in errors and logs.
const NameUserNamespace = "user namespace IDs"

// Handler is the pod resource of the pod's user namespace IDs. Prepare
// gives a pod that asks for a user namespace its range (the pod directory,
// made by the volumes handler before it, holds the record); Reconstruct
// reads the range of a pod that survived a restart; Cleanup gives the
// range back once nothing of the pod runs, also for pods nobody knows any
// more after a restart (it is a Lister).
func (m *Manager) Handler() podresources.Handler { return handler{m} }

type handler struct{ m *Manager }

var _ podresources.Lister = handler{}

func (handler) Name() string { return NameUserNamespace }

func (h handler) Prepare(_ context.Context, pod *v1.Pod) error {
	if !Wants(pod) {
		return nil
	}
	_, err := h.m.Allocate(pod)
	return err
}

func (h handler) Reconstruct(_ context.Context, pod *v1.Pod) error {
	_, err := h.m.recorded(pod.UID)
	return err
}

func (h handler) Cleanup(_ context.Context, uid types.UID) error { return h.m.Release(uid) }

func (h handler) List(ctx context.Context) ([]types.UID, error) { return h.m.List(ctx) }
