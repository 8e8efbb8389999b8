package agent

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/heartlet/heartlet/internal/runtime"
	"github.com/heartlet/heartlet/internal/server"
)

type fakeStatuses struct {
	pods map[types.UID]*runtime.PodStatus
}

func (f *fakeStatuses) GetPodStatus(_ context.Context, uid types.UID) (*runtime.PodStatus, error) {
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
		{name: "unknown container", pod: "web", ctr: "nope", wantErr: server.ErrNotFound, wantMsg: `container "nope" not found in pod "web"`},
		{name: "unknown pod", pod: "x", ctr: "main", wantErr: server.ErrNotFound, wantMsg: `pod "x" does not exist`},
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
			if f.Path != tt.wantPath || f.Running(context.Background()) != tt.wantRunning {
				t.Errorf("got %s running=%v, want %s running=%v", f.Path, f.Running(context.Background()), tt.wantPath, tt.wantRunning)
			}
		})
	}
}
