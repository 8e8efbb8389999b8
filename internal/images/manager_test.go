package images

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/heartlet/heartlet/internal/journal"
	"github.com/heartlet/heartlet/internal/metrics"
)

// memImages is an image service in memory: images present by name, pulls
// that succeed unless the image needs credentials it was not given.
type memImages struct {
	mu      sync.Mutex
	present map[string]bool
	auth    map[string]string // image -> "user:password" it needs
	pulls   []string          // image and the user of each pull
	statErr error
}

func newMemImages(present ...string) *memImages {
	m := &memImages{present: map[string]bool{}, auth: map[string]string{}}
	for _, p := range present {
		m.present[p] = true
	}
	return m
}

func (m *memImages) PullImage(_ context.Context, image string, auth *runtimeapi.AuthConfig, _ *runtimeapi.PodSandboxConfig) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	user := ""
	if auth != nil {
		user = auth.Username + ":" + auth.Password
	}
	m.pulls = append(m.pulls, image+" as "+user)
	if need, ok := m.auth[image]; ok && need != user {
		return "", fmt.Errorf("pull %s: unauthorized", image)
	}
	m.present[image] = true
	return "sha256:" + image, nil
}

func (m *memImages) ImageRef(_ context.Context, image string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.statErr != nil {
		return "", m.statErr
	}
	if m.present[image] {
		return "sha256:" + image, nil
	}
	return "", nil
}

func (m *memImages) ImageSize(context.Context, string) (uint64, error) { return 1 << 20, nil }

func (m *memImages) pulled() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.pulls)
}

type events struct {
	mu   sync.Mutex
	list []string
	// paths are the events' field paths ("" for one on the pod itself).
	paths []string
}

func (e *events) Eventf(obj k8sruntime.Object, _, reason, format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = append(e.list, reason+": "+fmt.Sprintf(format, args...))
	path := ""
	if ref, ok := obj.(*v1.ObjectReference); ok {
		path = ref.FieldPath
	}
	e.paths = append(e.paths, path)
}

func (e *events) has(prefix string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.ContainsFunc(e.list, func(s string) bool { return strings.HasPrefix(s, prefix) })
}

func testPod(uid, image string, policy v1.PullPolicy) (*v1.Pod, *v1.Container) {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: types.UID(uid)},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: image, ImagePullPolicy: policy}}},
	}
	return p, &p.Spec.Containers[0]
}

func newClock() *testingclock.FakeClock {
	return testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
}

func TestEnsureImagePolicies(t *testing.T) {
	tests := []struct {
		name     string
		image    string
		policy   v1.PullPolicy
		wantPull bool
		wantErr  error
		// wantEvent is the first event's start.
		wantEvent string
	}{
		{"present image with IfNotPresent is not pulled", "busybox:1.35", v1.PullIfNotPresent, false, nil, `Pulled: Container image "busybox:1.35" already present on machine`},
		{"missing image with IfNotPresent is pulled", "other:1", v1.PullIfNotPresent, true, nil, `Pulling: Pulling image "other:1"`},
		{"Always pulls a present image", "busybox:1.35", v1.PullAlways, true, nil, `Pulling: Pulling image "busybox:1.35"`},
		{"Never uses a present image", "busybox:1.35", v1.PullNever, false, nil, `Pulled: Container image "busybox:1.35" already present on machine`},
		{"Never refuses a missing image", "other:1", v1.PullNever, false, ErrImageNeverPull, `ErrImageNeverPull: Container image "other:1" is not present with pull policy of Never`},
		{"an upper-case repository is an invalid name", "Busybox:1.35", v1.PullIfNotPresent, false, ErrInvalidImageName, "InspectFailed: "},
		{"an empty image is an invalid name", "", v1.PullAlways, false, ErrInvalidImageName, "InspectFailed: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := newMemImages("busybox:1.35")
			ev := &events{}
			m := NewManager(is, ManagerOptions{Clock: newClock(), Recorder: ev})
			pod, c := testPod("u1", tt.image, tt.policy)
			ref, err := m.EnsureImage(t.Context(), pod, c, nil)
			if pulled := len(is.pulled()) > 0; pulled != tt.wantPull {
				t.Errorf("pulled = %v, want %v", pulled, tt.wantPull)
			}
			if len(ev.list) == 0 || !strings.HasPrefix(ev.list[0], tt.wantEvent) {
				t.Errorf("events %q, want the first to start with %q", ev.list, tt.wantEvent)
			}
			for i, p := range ev.paths {
				if p != "spec.containers{c}" {
					t.Errorf("event %q is about %q, want the container (spec.containers{c})", ev.list[i], p)
				}
			}
			if tt.wantErr == nil {
				if err != nil || ref != "sha256:"+tt.image {
					t.Fatalf("EnsureImage = %q, %v; want the image's ID", ref, err)
				}
				return
			}
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("EnsureImage = %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr == ErrInvalidImageName && (!strings.HasPrefix(err.Error(), "Failed to apply default image tag") || !ev.has("InspectFailed: ")) {
				t.Errorf("error %q, events %v: want upstream's message and an InspectFailed event", err, ev.list)
			}
		})
	}
}

func TestNormalizeImage(t *testing.T) {
	tests := []struct{ in, want, repo string }{
		{"busybox", "busybox:latest", "docker.io/library/busybox"},
		{"busybox:1.35", "busybox:1.35", "docker.io/library/busybox"},
		{"127.0.0.1:5000/a/b", "127.0.0.1:5000/a/b:latest", "127.0.0.1:5000/a/b"},
		{"registry.test/img@sha256:" + strings.Repeat("a", 64), "registry.test/img@sha256:" + strings.Repeat("a", 64), "registry.test/img"},
		{"user/app:v1", "user/app:v1", "docker.io/user/app"},
	}
	for _, tt := range tests {
		got, err := NormalizeImage(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("NormalizeImage(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
		repo, err := Repository(tt.in)
		if err != nil || repo != tt.repo {
			t.Errorf("Repository(%q) = %q, %v; want %q", tt.in, repo, err, tt.repo)
		}
	}
	for _, bad := range []string{"", "lower/Upper", "a b", "x@sha256:short", "host:port:what/x"} {
		if got, err := NormalizeImage(bad); err == nil {
			t.Errorf("NormalizeImage(%q) = %q, want an error", bad, got)
		}
	}
}

// A failed pull is ErrImagePull, then ImagePullBackOff with the last error
// while the backoff (10 s, doubling) holds, without reaching the runtime;
// after it, the next pull happens.
func TestEnsureImagePullBackoff(t *testing.T) {
	is := newMemImages()
	is.auth["private:1"] = "u:p"
	clk := newClock()
	ev := &events{}
	m := NewManager(is, ManagerOptions{Clock: clk, Recorder: ev})
	pod, c := testPod("u1", "private:1", v1.PullIfNotPresent)

	_, err := m.EnsureImage(t.Context(), pod, c, nil)
	if !errors.Is(err, ErrImagePull) || !strings.Contains(err.Error(), "unauthorized") {
		t.Fatalf("first pull = %v, want ErrImagePull naming the cause", err)
	}
	if !ev.has(`Failed: Failed to pull image "private:1"`) {
		t.Errorf("events %v: no Failed", ev.list)
	}
	clk.Step(9 * time.Second)
	_, err = m.EnsureImage(t.Context(), pod, c, nil)
	if !errors.Is(err, ErrImagePullBackOff) || !strings.Contains(err.Error(), "unauthorized") {
		t.Fatalf("pull during the backoff = %v, want ImagePullBackOff with the last error", err)
	}
	if n := len(is.pulled()); n != 1 {
		t.Errorf("%d pulls reached the runtime, want 1", n)
	}
	clk.Step(time.Second)
	if _, err = m.EnsureImage(t.Context(), pod, c, nil); !errors.Is(err, ErrImagePull) {
		t.Fatalf("pull after 10 s = %v, want a new ErrImagePull", err)
	}
	// The second failure doubles the backoff to 20 s.
	clk.Step(19 * time.Second)
	if _, err = m.EnsureImage(t.Context(), pod, c, nil); !errors.Is(err, ErrImagePullBackOff) {
		t.Fatalf("pull 19 s after the second failure = %v, want ImagePullBackOff", err)
	}
	// Another pod with the same image has its own backoff.
	other, oc := testPod("u2", "private:1", v1.PullIfNotPresent)
	if _, err = m.EnsureImage(t.Context(), other, oc, nil); !errors.Is(err, ErrImagePull) {
		t.Fatalf("another pod's pull = %v, want its own ErrImagePull", err)
	}
	if got := m.held(); got != 2 {
		t.Errorf("pods with pull errors = %d, want 2", got)
	}
	m.Forget("u1")
	m.Forget("u2")
	m.Forget("u2")
	if got := m.held(); got != 0 {
		t.Errorf("pods with pull errors after Forget = %d, want 0", got)
	}
	if d := m.pulls.Get("u1_private:1"); d != 0 {
		t.Errorf("backoff of a forgotten pod = %v, want none", d)
	}
	// A forgotten pod pulls at once.
	if _, err = m.EnsureImage(t.Context(), pod, c, nil); !errors.Is(err, ErrImagePull) {
		t.Fatalf("pull after Forget = %v, want ErrImagePull", err)
	}
}

func TestEnsureImageStatusError(t *testing.T) {
	is := newMemImages()
	is.statErr = errors.New("runtime down")
	m := NewManager(is, ManagerOptions{Clock: newClock()})
	pod, c := testPod("u1", "busybox:1.35", v1.PullIfNotPresent)
	_, err := m.EnsureImage(t.Context(), pod, c, nil)
	if !errors.Is(err, ErrImagePull) || !errors.Is(err, is.statErr) {
		t.Fatalf("EnsureImage = %v, want ErrImagePull wrapping the runtime's error", err)
	}
}

// Pulls go through the node's limits: a pull the registry rate limit
// refuses is ErrImagePull with upstream's "pull QPS exceeded", goes to
// the pull backoff and never reaches the runtime; once the backoff and
// the bucket allow, the pull happens.
func TestEnsureImageWithinPullLimits(t *testing.T) {
	is := newMemImages()
	clk := newClock()
	m := NewManager(is, ManagerOptions{Clock: clk, Limits: Options{Serialize: true, QPS: 1, Burst: 1}})
	first, fc := testPod("u1", "one:1", v1.PullIfNotPresent)
	if _, err := m.EnsureImage(t.Context(), first, fc, nil); err != nil {
		t.Fatalf("first pull: %v", err)
	}
	second, sc := testPod("u2", "two:1", v1.PullIfNotPresent)
	_, err := m.EnsureImage(t.Context(), second, sc, nil)
	if !errors.Is(err, ErrImagePull) || !errors.Is(err, ErrPullQPSExceeded) || !strings.Contains(err.Error(), "pull QPS exceeded") {
		t.Fatalf("pull over the rate = %v, want ErrImagePull with \"pull QPS exceeded\"", err)
	}
	if n := len(is.pulled()); n != 1 {
		t.Fatalf("%d pulls reached the runtime, want 1", n)
	}
	clk.Step(time.Second)
	if _, err := m.EnsureImage(t.Context(), second, sc, nil); !errors.Is(err, ErrImagePullBackOff) {
		t.Fatalf("pull during the backoff = %v, want ImagePullBackOff", err)
	}
	clk.Step(10 * time.Second)
	if _, err := m.EnsureImage(t.Context(), second, sc, nil); err != nil {
		t.Fatalf("pull after the backoff: %v", err)
	}
}

type pullRecorder struct {
	mu                sync.Mutex
	started, finished []types.UID
}

func (p *pullRecorder) PullStarted(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.started = append(p.started, uid)
}

func (p *pullRecorder) PullFinished(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.finished = append(p.finished, uid)
}

func sampleCount(o prometheus.Observer) uint64 {
	var m dto.Metric
	_ = o.(prometheus.Metric).Write(&m)
	return m.GetHistogram().GetSampleCount()
}

// A pull is timed in the image pull histogram by size, told to the pull
// recorder, and announced by Pulling and Pulled events; a present image
// is none of these.
func TestEnsureImageRecordsPulls(t *testing.T) {
	is := newMemImages("present:1")
	rec := &pullRecorder{}
	ev := &events{}
	m := NewManager(is, ManagerOptions{Clock: newClock(), Pulls: rec, Recorder: ev})
	hist := metrics.ImagePullDuration.WithLabelValues(metrics.ImageSizeBucket(1 << 20))
	before := sampleCount(hist)
	pod, c := testPod("u1", "new:1", v1.PullIfNotPresent)
	if _, err := m.EnsureImage(t.Context(), pod, c, nil); err != nil {
		t.Fatal(err)
	}
	_, pc := testPod("u1", "present:1", v1.PullIfNotPresent)
	if _, err := m.EnsureImage(t.Context(), pod, pc, nil); err != nil {
		t.Fatal(err)
	}
	if got := sampleCount(hist) - before; got != 1 {
		t.Errorf("image pull histogram grew by %d, want 1", got)
	}
	if len(rec.started) != 1 || len(rec.finished) != 1 || rec.started[0] != "u1" {
		t.Errorf("pull recorder: started %v, finished %v; want one pull of u1", rec.started, rec.finished)
	}
	if !ev.has(`Pulling: Pulling image "new:1"`) || !ev.has(`Pulled: Successfully pulled image "new:1"`) || ev.has(`Pulling: Pulling image "present:1"`) {
		t.Errorf("events %v", ev.list)
	}
}

type staticCreds map[string][]*runtimeapi.AuthConfig

func (s staticCreds) Lookup(_ context.Context, _ *v1.Pod, repo string) []*runtimeapi.AuthConfig {
	return s[repo]
}

// Each credential found for the image's repository is tried in turn until
// one works, as upstream; an image without any is pulled without.
func TestEnsureImageTriesEachCredential(t *testing.T) {
	is := newMemImages()
	is.auth["registry.test:5001/app:1"] = "right:pw"
	creds := staticCreds{"registry.test:5001/app": {
		{Username: "wrong", Password: "pw"},
		{Username: "right", Password: "pw"},
		{Username: "never", Password: "tried"},
	}}
	m := NewManager(is, ManagerOptions{Clock: newClock(), Credentials: creds})
	pod, c := testPod("u1", "registry.test:5001/app:1", v1.PullIfNotPresent)
	if _, err := m.EnsureImage(t.Context(), pod, c, nil); err != nil {
		t.Fatal(err)
	}
	want := []string{"registry.test:5001/app:1 as wrong:pw", "registry.test:5001/app:1 as right:pw"}
	if got := is.pulled(); !slices.Equal(got, want) {
		t.Errorf("pulls %v, want %v", got, want)
	}

	is.auth["registry.test:5001/app:2"] = "nobody:has"
	_, c2 := testPod("u1", "registry.test:5001/app:2", v1.PullIfNotPresent)
	_, err := m.EnsureImage(t.Context(), pod, c2, nil)
	if !errors.Is(err, ErrImagePull) || strings.Count(err.Error(), "unauthorized") != 3 {
		t.Errorf("pull no credential opens = %v, want ErrImagePull naming each of the 3 failures", err)
	}

	_, c3 := testPod("u1", "public:1", v1.PullIfNotPresent)
	if _, err := m.EnsureImage(t.Context(), pod, c3, nil); err != nil {
		t.Fatal(err)
	}
	if got := is.pulled(); got[len(got)-1] != "public:1 as " {
		t.Errorf("last pull %q, want public:1 without credentials", got[len(got)-1])
	}
}

// A failed pull records its error, how long it took and when it is tried
// again; the next attempt records the pull backoff; a pull that works
// records its size.
func TestEnsureImageJournal(t *testing.T) {
	is := newMemImages()
	is.auth["private:1"] = "u:p"
	clk := newClock()
	j := journal.New(16, clk)
	m := NewManager(is, ManagerOptions{Clock: clk, Journal: j})
	pod, c := testPod("u1", "private:1", v1.PullIfNotPresent)
	for range 2 {
		if _, err := m.EnsureImage(t.Context(), pod, c, nil); err == nil {
			t.Fatal("pull of an image needing credentials succeeded")
		}
	}
	es := j.Entries(pod.UID)
	if len(es) != 2 {
		t.Fatalf("entries = %+v, want a failure and a backoff", es)
	}
	if e := es[0]; e.Kind != journal.KindImage || e.Reason != "ErrImagePull" || !strings.Contains(e.Message, `pull of "private:1" failed`) || !e.NextRetry.After(clk.Now()) {
		t.Errorf("first entry = %+v, want the failure with a next retry", e)
	}
	if e := es[1]; e.Kind != journal.KindBackoff || e.Reason != "ImagePullBackOff" || !strings.Contains(e.Message, "back-off pulling image") {
		t.Errorf("second entry = %+v, want ImagePullBackOff", e)
	}

	pod2, c2 := testPod("u2", "public:1", v1.PullIfNotPresent)
	if _, err := m.EnsureImage(t.Context(), pod2, c2, nil); err != nil {
		t.Fatal(err)
	}
	if es := j.Entries(pod2.UID); len(es) != 1 || es[0].Kind != journal.KindImage || !strings.HasPrefix(es[0].Message, `pulled "public:1" (1048576 bytes`) {
		t.Errorf("entries of the pulled image = %+v", es)
	}
}
