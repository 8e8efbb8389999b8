package podlifecycle

import (
	"context"
	"fmt"
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/heartlet/heartlet/internal/podworker"
	"github.com/heartlet/heartlet/internal/runtime"
)

// Compile-time checks that the fakes keep the interfaces' shape.
var (
	_ Workers         = (*fakeWorkers)(nil)
	_ Desired         = (*fakeDesired)(nil)
	_ Statuses        = (*fakeStatuses)(nil)
	_ Probes          = (*fakeProbes)(nil)
	_ Startup         = (*fakeStartup)(nil)
	_ Recorder        = (*fakeRecorder)(nil)
	_ RuntimePods     = (*fakeRuntime)(nil)
	_ PodRemover      = (*fakeRemover)(nil)
	_ ResourceCleaner = (*fakeResources)(nil)
	_ MirrorSyncer    = (*fakeMirrors)(nil)
)

// fakeWorkers records updates; a pod is known in the state set for it, or
// in syncing (created, updated) or terminating (killed) after an update.
type fakeWorkers struct {
	mu      sync.Mutex
	states  map[types.UID]podworker.State
	updates []podworker.Update
}

func newFakeWorkers() *fakeWorkers {
	return &fakeWorkers{states: map[types.UID]podworker.State{}}
}

func (f *fakeWorkers) Update(u podworker.Update) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.updates = append(f.updates, u)
	switch u.Type {
	case podworker.UpdateCreate, podworker.UpdateUpdate:
		if _, ok := f.states[u.Pod.UID]; !ok {
			f.states[u.Pod.UID] = podworker.StateSyncing
		}
	case podworker.UpdateKill:
		if st, ok := f.states[u.Pod.UID]; !ok || st != podworker.StateTerminated {
			f.states[u.Pod.UID] = podworker.StateTerminating
		}
	}
}

func (f *fakeWorkers) Known(uid types.UID) bool {
	_, ok := f.State(uid)
	return ok
}

func (f *fakeWorkers) State(uid types.UID) (podworker.State, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, ok := f.states[uid]
	return st, ok
}

func (f *fakeWorkers) Pods() map[types.UID]podworker.State {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[types.UID]podworker.State, len(f.states))
	for k, v := range f.states {
		out[k] = v
	}
	return out
}

func (f *fakeWorkers) set(uid types.UID, st podworker.State) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.states[uid] = st
}

// forget drops a pod, as the workers do once a removed pod terminated.
func (f *fakeWorkers) forget(uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.states, uid)
}

// log is the updates as "type uid[/grace]" strings.
func (f *fakeWorkers) log() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, u := range f.updates {
		s := u.Type.String() + " " + string(u.Pod.UID)
		if u.GracePeriod != nil {
			s += fmt.Sprintf("/%d", *u.GracePeriod)
		}
		if u.Keep {
			s += " keep"
		}
		out = append(out, s)
	}
	return out
}

// fakeDesired is the desired set; seen are the sources that delivered.
type fakeDesired struct {
	pods []*v1.Pod
	seen []string
}

func (f *fakeDesired) Pods() []*v1.Pod { return f.pods }
func (f *fakeDesired) SeenAllSources(sources ...string) bool {
	for _, s := range sources {
		if !slices.Contains(f.seen, s) {
			return false
		}
	}
	return true
}

type fakeStatuses struct {
	statuses map[types.UID]v1.PodStatus
	pods     map[types.UID]*v1.Pod
	removed  []types.UID
}

func newFakeStatuses() *fakeStatuses {
	return &fakeStatuses{statuses: map[types.UID]v1.PodStatus{}, pods: map[types.UID]*v1.Pod{}}
}

func (f *fakeStatuses) SetPodStatus(pod *v1.Pod, st v1.PodStatus) {
	f.statuses[pod.UID] = st
	f.pods[pod.UID] = pod
}

func (f *fakeStatuses) UIDs() []types.UID {
	var out []types.UID
	for uid := range f.pods {
		out = append(out, uid)
	}
	return out
}

func (f *fakeStatuses) RemovePod(uid types.UID) {
	delete(f.statuses, uid)
	delete(f.pods, uid)
	f.removed = append(f.removed, uid)
}

// fakeProbes records "add uid" and "remove uid".
type fakeProbes struct{ calls []string }

func (f *fakeProbes) AddPod(pod *v1.Pod)      { f.calls = append(f.calls, "add "+string(pod.UID)) }
func (f *fakeProbes) RemovePod(uid types.UID) { f.calls = append(f.calls, "remove "+string(uid)) }

// fakeStartup records "seen uid" and "forget uid".
type fakeStartup struct{ calls []string }

func (f *fakeStartup) Seen(pod *v1.Pod)     { f.calls = append(f.calls, "seen "+string(pod.UID)) }
func (f *fakeStartup) Forget(uid types.UID) { f.calls = append(f.calls, "forget "+string(uid)) }

// fakeRecorder records "type reason message".
type fakeRecorder struct{ events []string }

func (f *fakeRecorder) Eventf(_ k8sruntime.Object, eventtype, reason, messageFmt string, args ...any) {
	f.events = append(f.events, eventtype+" "+reason+" "+fmt.Sprintf(messageFmt, args...))
}

// fakeRuntime is the last relist; ok false means no successful one.
type fakeRuntime struct {
	pods []*runtime.PodStatus
	ok   bool
}

func (f *fakeRuntime) Relisted() ([]*runtime.PodStatus, bool) { return f.pods, f.ok }

// fakeRemover records the pods removed from the runtime.
type fakeRemover struct{ removed []types.UID }

func (f *fakeRemover) RemovePod(_ context.Context, uid types.UID) error {
	f.removed = append(f.removed, uid)
	return nil
}

// fakeResources are pods holding resources; CleanupPod records what it
// cleans and fails for the UIDs in fail.
type fakeResources struct {
	uids    []types.UID
	listErr error
	fail    map[types.UID]error
	cleaned []types.UID
}

func (f *fakeResources) PodsWithResources(context.Context) ([]types.UID, error) {
	return f.uids, f.listErr
}

func (f *fakeResources) CleanupPod(_ context.Context, uid types.UID) error {
	if err := f.fail[uid]; err != nil {
		return err
	}
	f.cleaned = append(f.cleaned, uid)
	return nil
}

type fakeMirrors struct {
	synced int
	err    error
	count  int
}

func (f *fakeMirrors) SyncMirrors(context.Context) error { f.synced++; return f.err }
func (f *fakeMirrors) MirrorCount() int                  { return f.count }

func pod(uid string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p-" + uid, Namespace: "default", UID: types.UID(uid)},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "img"}}},
	}
}

func runningPod(uid types.UID) *runtime.PodStatus {
	return &runtime.PodStatus{UID: uid, Name: string(uid), Namespace: "default",
		Sandboxes: []*runtime.SandboxStatus{{ID: "sb-" + string(uid), State: runtime.SandboxReady}}}
}

func runningContainerPod(uid types.UID) *runtime.PodStatus {
	return &runtime.PodStatus{UID: uid, Name: string(uid), Namespace: "default",
		Sandboxes:  []*runtime.SandboxStatus{{ID: "sb-" + string(uid), State: runtime.SandboxNotReady}},
		Containers: []*runtime.ContainerStatus{{ID: "c-" + string(uid), Name: "c", State: runtime.ContainerRunning}}}
}

func stoppedPod(uid types.UID) *runtime.PodStatus {
	return &runtime.PodStatus{UID: uid, Name: string(uid), Namespace: "default",
		Sandboxes:  []*runtime.SandboxStatus{{ID: "sb-" + string(uid), State: runtime.SandboxNotReady}},
		Containers: []*runtime.ContainerStatus{{ID: "c-" + string(uid), Name: "c", State: runtime.ContainerExited}}}
}
