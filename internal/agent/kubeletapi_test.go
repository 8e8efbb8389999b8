package agent

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/heartlet/heartlet/internal/errdefs"
	"github.com/heartlet/heartlet/internal/runtime"
	"github.com/heartlet/heartlet/internal/server"
)

type fakeStatuses struct {
	pods map[types.UID]*runtime.PodStatus
	// down makes GetPodStatus fail, as an unreachable runtime.
	down atomic.Bool
}

var errRuntimeDown = errors.New("runtime unreachable")

func (f *fakeStatuses) GetPodStatus(_ context.Context, uid types.UID) (*runtime.PodStatus, error) {
	if f.down.Load() {
		return nil, errRuntimeDown
	}
	if p, ok := f.pods[uid]; ok {
		return p, nil
	}
	return &runtime.PodStatus{UID: uid}, nil
}

func (f *fakeStatuses) ListPods(context.Context) ([]*runtime.PodStatus, error) {
	var out []*runtime.PodStatus
	for _, p := range f.pods {
		out = append(out, p)
	}
	return out, nil
}

func TestRunningPodsFrom(t *testing.T) {
	// As upstream's /runningpods/: pods with running containers only, each
	// container with its name and image (kubecontainer ConvertToAPIPod).
	statuses := []*runtime.PodStatus{
		{UID: "u1", Name: "a", Namespace: "ns", Containers: []*runtime.ContainerStatus{
			{Name: "web", Image: "img:1", State: runtime.ContainerRunning},
			{Name: "old", Image: "img:0", State: runtime.ContainerExited},
		}},
		{UID: "u2", Name: "b", Namespace: "ns", Containers: []*runtime.ContainerStatus{
			{Name: "done", State: runtime.ContainerExited},
		}},
		{UID: "u3", Name: "c", Namespace: "ns"},
	}
	got := runningPodsFrom(statuses)
	if len(got) != 1 {
		t.Fatalf("got %d pods, want 1", len(got))
	}
	p := got[0]
	if p.Name != "a" || p.Namespace != "ns" || p.UID != "u1" || len(p.Spec.Containers) != 1 ||
		p.Spec.Containers[0].Name != "web" || p.Spec.Containers[0].Image != "img:1" {
		t.Errorf("pod = %+v", p)
	}
}

func TestLogLocator(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "u1"},
		Spec: v1.PodSpec{
			InitContainers: []v1.Container{{Name: "init"}},
			Containers:     []v1.Container{{Name: "main"}, {Name: "new"}},
		}}
	rt := &fakeStatuses{pods: map[types.UID]*runtime.PodStatus{"u1": {UID: "u1", Containers: []*runtime.ContainerStatus{
		{ID: "c2", Name: "main", State: runtime.ContainerRunning, LogPath: "/logs/ns_web_u1/main/1.log"},
		{ID: "i1", Name: "init", State: runtime.ContainerExited, LogPath: "init/0.log"},
		{ID: "c1", Name: "main", State: runtime.ContainerExited, LogPath: "/logs/ns_web_u1/main/0.log"},
	}}}}
	locate := logLocator(rt, func() []*v1.Pod { return []*v1.Pod{pod} }, "/logs")
	tests := []struct {
		name, pod, ctr string
		previous       bool
		wantPath       string
		wantRunning    bool
		wantErr        error
		wantMsg        string
	}{
		{name: "current", pod: "web", ctr: "main", wantPath: "/logs/ns_web_u1/main/1.log", wantRunning: true},
		{name: "previous", pod: "web", ctr: "main", previous: true, wantPath: "/logs/ns_web_u1/main/0.log"},
		{name: "relative path joins the pod log dir", pod: "web", ctr: "init", wantPath: filepath.Join("/logs", "ns_web_u1", "init", "0.log")},
		{name: "no previous", pod: "web", ctr: "init", previous: true, wantErr: server.ErrBadRequest, wantMsg: `previous terminated container "init" in pod "web" not found`},
		{name: "not started", pod: "web", ctr: "new", wantErr: server.ErrBadRequest, wantMsg: "waiting to start"},
		{name: "unknown container", pod: "web", ctr: "nope", wantErr: errdefs.ErrNotFound, wantMsg: `container "nope" not found in pod "web"`},
		{name: "unknown pod", pod: "x", ctr: "main", wantErr: errdefs.ErrNotFound, wantMsg: `pod "x" does not exist`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := locate(context.Background(), "ns", tt.pod, tt.ctr, tt.previous)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.wantMsg) {
					t.Errorf("error %v, want %v with %q", err, tt.wantErr, tt.wantMsg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			running, err := f.Running(context.Background())
			if f.Path != tt.wantPath || running != tt.wantRunning || err != nil {
				t.Errorf("got %s running=%v (err %v), want %s running=%v", f.Path, running, err, tt.wantPath, tt.wantRunning)
			}
		})
	}
}

// TestFollowEndsWhileRuntimeFails: following the log of a running
// container ends, with the runtime's error, once the runtime keeps failing
// to say whether the container still runs; it used to be taken as running
// for ever, so the request polled until the client went away.
func TestFollowEndsWhileRuntimeFails(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "0.log")
	if err := os.WriteFile(path, []byte("2026-01-02T03:04:00Z stdout F hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "u1"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "main"}}}}
	rt := &fakeStatuses{pods: map[types.UID]*runtime.PodStatus{"u1": {UID: "u1", Containers: []*runtime.ContainerStatus{
		{ID: "c1", Name: "main", State: runtime.ContainerRunning, LogPath: path},
	}}}}
	f, err := logLocator(rt, func() []*v1.Pod { return []*v1.Pod{pod} }, dir)(t.Context(), "ns", "web", "main", false)
	if err != nil {
		t.Fatal(err)
	}
	rt.down.Store(true)
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 2, 3, 5, 0, 0, time.UTC))
	done := make(chan error, 1)
	go func() { done <- server.ReadLog(t.Context(), f, &server.LogOptions{Follow: true}, io.Discard, clk) }()
	// Up to an hour of clock time, one poll at a time.
	for steps := 0; ; {
		select {
		case err := <-done:
			if !errors.Is(err, errRuntimeDown) {
				t.Fatalf("follow ended with %v, want the runtime's error", err)
			}
			return
		default:
		}
		if !clk.HasWaiters() {
			<-time.After(time.Millisecond)
			continue
		}
		if steps++; steps > 4*3600 {
			t.Fatal("following still polls after an hour of an unreachable runtime")
		}
		clk.Step(250 * time.Millisecond)
	}
}
