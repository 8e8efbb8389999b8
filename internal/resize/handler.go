package resize

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/heartlet/heartlet/internal/podresources"
)

// NameAllocation is the allocation record's handler name.
const NameAllocation = "allocation record"

// Handler is the pod's allocation record as a per-pod resource: the
// Manager records it on the pod's first sync; the Set removes it with the
// pod's other resources, also for pods nobody knows any more after a
// restart (it is a Lister). Prepare and Reconstruct do nothing.
func (s *Store) Handler() podresources.Handler { return allocationHandler{s} }

type allocationHandler struct{ s *Store }

var _ podresources.Lister = allocationHandler{}

func (allocationHandler) Name() string                               { return NameAllocation }
func (allocationHandler) Prepare(context.Context, *v1.Pod) error     { return nil }
func (allocationHandler) Reconstruct(context.Context, *v1.Pod) error { return nil }

func (h allocationHandler) Cleanup(_ context.Context, uid types.UID) error { return h.s.Remove(uid) }

func (h allocationHandler) List(context.Context) ([]types.UID, error) { return h.s.UIDs(), nil }
