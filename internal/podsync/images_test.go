package podsync

import (
	"context"
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/heartlet/heartlet/internal/runtime/fakecri"
)

// fakeImages is the ImageManager of the tests: an image is present in the
// fake runtime once ensured, unless failWith names it.
type fakeImages struct {
	fake *fakecri.Server

	mu      sync.Mutex
	fail    map[string]error
	forgot  []types.UID
	ensured []v1.Container
}

var _ ImageManager = (*fakeImages)(nil)

func (f *fakeImages) failWith(image string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail == nil {
		f.fail = map[string]error{}
	}
	f.fail[image] = err
}

func (f *fakeImages) EnsureImage(_ context.Context, _ *v1.Pod, c *v1.Container, _ *runtimeapi.PodSandboxConfig) (string, error) {
	f.mu.Lock()
	err := f.fail[c.Image]
	f.ensured = append(f.ensured, *c)
	f.mu.Unlock()
	if err != nil {
		return "", err
	}
	return f.fake.AddImage(c.Image), nil
}

func (f *fakeImages) Forget(uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.forgot = append(f.forgot, uid)
}

func (f *fakeImages) forgotten(uid types.UID) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Contains(f.forgot, uid)
}
