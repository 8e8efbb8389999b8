package runtime

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/go-logr/logr"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/heartlet/heartlet/internal/errdefs"
	"github.com/heartlet/heartlet/internal/podconfig"
	"github.com/heartlet/heartlet/internal/runtime/fakecri"
)

// world is a small runtime state built through the Runtime API.
type world struct {
	r   *Runtime
	srv *fakecri.Server
}

func newWorld(t *testing.T) *world {
	r, srv := newTestRuntime(t)
	srv.AddImage(testImage)
	return &world{r: r, srv: srv}
}

func (w *world) sandbox(t *testing.T, pod *v1.Pod, attempt uint32, hostNetwork bool) string {
	t.Helper()
	id, err := w.r.RunPodSandbox(context.Background(), sandboxConfig(pod, attempt, hostNetwork), "")
	if err != nil {
		t.Fatalf("RunPodSandbox(%s attempt %d): %v", pod.Name, attempt, err)
	}
	return id
}

func (w *world) container(t *testing.T, pod *v1.Pod, sbID string, c *v1.Container, restart int, init, start bool) string {
	t.Helper()
	ctx := context.Background()
	id, err := w.r.CreateContainer(ctx, sbID, containerConfig(pod, c, restart, init), nil)
	if err != nil {
		t.Fatalf("CreateContainer(%s restart %d): %v", c.Name, restart, err)
	}
	if start {
		if err := w.r.StartContainer(ctx, id); err != nil {
			t.Fatalf("StartContainer(%s): %v", c.Name, err)
		}
	}
	return id
}

func TestListPodsGroupsByUID(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	web, db := testPod("web", "uid-web"), testPod("db", "uid-db")

	webOld := w.sandbox(t, web, 0, false)
	webMain0 := w.container(t, web, webOld, &web.Spec.Containers[0], 0, false, true)
	if err := w.r.StopPodSandbox(ctx, webOld); err != nil {
		t.Fatal(err)
	}
	webNew := w.sandbox(t, web, 1, false)
	webMain1 := w.container(t, web, webNew, &web.Spec.Containers[0], 1, false, true)
	dbSB := w.sandbox(t, db, 0, true)
	dbMain := w.container(t, db, dbSB, &db.Spec.Containers[0], 0, false, false)

	// Objects without the pod UID label are not heartlet's: ignored.
	foreign := sandboxConfig(web, 9, false)
	foreign.Metadata.Uid = "foreign"
	foreign.Labels = map[string]string{"app": "other"}
	foreignSB, err := w.r.RunPodSandbox(ctx, foreign, "")
	if err != nil {
		t.Fatal(err)
	}
	fc := containerConfig(web, &web.Spec.Containers[0], 0, false)
	fc.Labels = nil
	if _, err := w.r.CreateContainer(ctx, foreignSB, fc, nil); err != nil {
		t.Fatal(err)
	}

	sb, ct := snapshot(t, opListPodSandbox), snapshot(t, opListContainers)
	pods, err := w.r.ListPods(ctx)
	if err != nil {
		t.Fatalf("ListPods: %v", err)
	}
	sb.check(t, 1, 0)
	ct.check(t, 1, 0)

	if len(pods) != 2 {
		t.Fatalf("ListPods returned %d pods, want 2: %+v", len(pods), pods)
	}
	// Ordered by UID: uid-db < uid-web.
	gotDB, gotWeb := pods[0], pods[1]
	if gotDB.UID != "uid-db" || gotDB.Name != "db" || gotDB.Namespace != "default" {
		t.Errorf("first pod = %s %s/%s, want uid-db default/db", gotDB.UID, gotDB.Namespace, gotDB.Name)
	}
	if gotWeb.UID != "uid-web" || gotWeb.Name != "web" {
		t.Errorf("second pod = %s %s, want uid-web web", gotWeb.UID, gotWeb.Name)
	}
	if ids := sandboxIDs(gotWeb); !reflect.DeepEqual(ids, []string{webNew, webOld}) {
		t.Errorf("web sandboxes = %v, want newest first %v", ids, []string{webNew, webOld})
	}
	if s := gotWeb.Sandboxes; s[0].State != SandboxReady || s[1].State != SandboxNotReady || s[0].Attempt != 1 {
		t.Errorf("web sandbox states = %s (attempt %d), %s; want ready (1), notready", s[0].State, s[0].Attempt, s[1].State)
	}
	if ids := containerIDs(gotWeb); !reflect.DeepEqual(ids, []string{webMain1, webMain0}) {
		t.Errorf("web containers = %v, want newest first %v", ids, []string{webMain1, webMain0})
	}
	newest, oldest := gotWeb.Containers[0], gotWeb.Containers[1]
	wantHash := HashContainer(&web.Spec.Containers[0])
	if newest.Name != "main" || newest.State != ContainerRunning || newest.RestartCount != 1 || newest.Hash != wantHash || newest.SandboxID != webNew {
		t.Errorf("newest web container = %+v, want main running restart 1 hash %x in %s", newest, wantHash, webNew)
	}
	if oldest.State != ContainerExited || oldest.RestartCount != 0 || oldest.CreatedAt.IsZero() {
		t.Errorf("oldest web container = %+v, want exited restart 0 with a creation time", oldest)
	}
	if newest.ExitCode != 0 || !newest.StartedAt.IsZero() {
		t.Errorf("ListPods filled status-only fields: %+v", newest)
	}
	if got := containerIDs(gotDB); !reflect.DeepEqual(got, []string{dbMain}) || gotDB.Containers[0].State != ContainerCreated {
		t.Errorf("db containers = %v (%+v), want [%s] created", got, gotDB.Containers, dbMain)
	}
}

func TestGetPodStatus(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	pod := testPod("web", "uid-web")
	pod.Spec.InitContainers = []v1.Container{{Name: "setup", Image: testImage, Command: []string{"true"}}}
	other := testPod("other", "uid-other")

	sbOld := w.sandbox(t, pod, 0, false)
	if err := w.r.StopPodSandbox(ctx, sbOld); err != nil {
		t.Fatal(err)
	}
	sb := w.sandbox(t, pod, 1, false)
	w.srv.SetSandboxIPs(sb, "10.99.0.42", "fd00::42")
	initID := w.container(t, pod, sb, &pod.Spec.InitContainers[0], 0, true, true)
	w.srv.SetExit(initID, 0, "Completed")
	crash0 := w.container(t, pod, sb, &pod.Spec.Containers[0], 0, false, true)
	w.srv.SetExit(crash0, 137, "OOMKilled")
	crash1 := w.container(t, pod, sb, &pod.Spec.Containers[0], 1, false, true)
	w.srv.SetExit(crash1, 2, "Error")
	running := w.container(t, pod, sb, &pod.Spec.Containers[0], 2, false, true)
	otherSB := w.sandbox(t, other, 0, false)
	w.container(t, other, otherSB, &other.Spec.Containers[0], 0, false, true)

	ps, cs := snapshot(t, opPodSandboxStatus), snapshot(t, opContainerStatus)
	st, err := w.r.GetPodStatus(ctx, pod.UID)
	if err != nil {
		t.Fatalf("GetPodStatus: %v", err)
	}
	ps.check(t, 2, 0)
	cs.check(t, 4, 0)

	if st.UID != pod.UID || st.Name != "web" || st.Namespace != "default" {
		t.Errorf("pod = %s %s/%s, want %s default/web", st.UID, st.Namespace, st.Name, pod.UID)
	}
	if ids := sandboxIDs(st); !reflect.DeepEqual(ids, []string{sb, sbOld}) {
		t.Fatalf("sandboxes = %v, want %v", ids, []string{sb, sbOld})
	}
	if got := st.IPs(); !reflect.DeepEqual(got, []string{"10.99.0.42", "fd00::42"}) {
		t.Errorf("IPs = %v, want primary then additional", got)
	}
	if s := st.Sandboxes[0]; s.State != SandboxReady || s.HostNetwork || s.Attempt != 1 || s.Labels[LabelPodUID] != "uid-web" ||
		s.Annotations[podconfig.AnnotationConfigSource] != "file" {
		t.Errorf("newest sandbox = %+v", s)
	}
	if s := st.Sandboxes[1]; s.State != SandboxNotReady {
		t.Errorf("old sandbox state = %s, want notready", s.State)
	}
	if ids := containerIDs(st); !reflect.DeepEqual(ids, []string{running, crash1, crash0, initID}) {
		t.Fatalf("containers = %v, want newest first %v", ids, []string{running, crash1, crash0, initID})
	}
	hash := HashContainer(&pod.Spec.Containers[0])
	tests := []struct {
		id       string
		name     string
		state    ContainerState
		exit     int32
		reason   string
		restarts int
		init     bool
		hash     uint64
		finished bool
	}{
		{running, "main", ContainerRunning, 0, "", 2, false, hash, false},
		{crash1, "main", ContainerExited, 2, "Error", 1, false, hash, true},
		{crash0, "main", ContainerExited, 137, "OOMKilled", 0, false, hash, true},
		{initID, "setup", ContainerExited, 0, "Completed", 0, true, HashContainer(&pod.Spec.InitContainers[0]), true},
	}
	for i, tt := range tests {
		c := st.Containers[i]
		if c.ID != tt.id || c.Name != tt.name || c.State != tt.state || c.ExitCode != tt.exit || c.Reason != tt.reason ||
			c.RestartCount != tt.restarts || c.Init != tt.init || c.Hash != tt.hash || c.SandboxID != sb {
			t.Errorf("container %d = %+v, want %+v", i, c, tt)
		}
		if c.CreatedAt.IsZero() || c.StartedAt.IsZero() || c.FinishedAt.IsZero() != !tt.finished {
			t.Errorf("container %s timestamps created %v started %v finished %v", c.Name, c.CreatedAt, c.StartedAt, c.FinishedAt)
		}
		if tt.finished && !c.FinishedAt.After(c.StartedAt) {
			t.Errorf("container %s finished %v not after started %v", c.Name, c.FinishedAt, c.StartedAt)
		}
		if c.Image != testImage || c.ImageRef == "" || c.LogPath == "" || c.Attempt != uint32(tt.restarts) {
			t.Errorf("container %s image %q ref %q log %q attempt %d", c.Name, c.Image, c.ImageRef, c.LogPath, c.Attempt)
		}
	}
	if got := st.FindContainer("main"); got == nil || got.ID != running {
		t.Errorf("FindContainer(main) = %+v, want %s", got, running)
	}
}

func TestGetPodStatusHostNetwork(t *testing.T) {
	w := newWorld(t)
	pod := testPod("host", "uid-host")
	w.sandbox(t, pod, 0, true)
	st, err := w.r.GetPodStatus(context.Background(), pod.UID)
	if err != nil {
		t.Fatalf("GetPodStatus: %v", err)
	}
	if len(st.Sandboxes) != 1 || !st.Sandboxes[0].HostNetwork || len(st.IPs()) != 0 {
		t.Errorf("host-network sandbox = %+v, want HostNetwork and no IPs", st.Sandboxes)
	}
}

func TestGetPodStatusEmpty(t *testing.T) {
	w := newWorld(t)
	st, err := w.r.GetPodStatus(context.Background(), "nobody")
	if err != nil {
		t.Fatalf("GetPodStatus: %v", err)
	}
	want := &PodStatus{UID: "nobody"}
	if !reflect.DeepEqual(st, want) {
		t.Errorf("GetPodStatus(unknown) = %+v, want %+v", st, want)
	}
}

func TestGetPodStatusVanishing(t *testing.T) {
	tests := []struct {
		name       string
		method     string
		err        error
		wantErr    bool
		sandboxes  int
		containers int
	}{
		{"container removed after list", "ContainerStatus", status.Error(codes.NotFound, "gone"), false, 1, 1},
		{"sandbox removed after list", "PodSandboxStatus", status.Error(codes.NotFound, "gone"), false, 0, 2},
		{"container status fails", "ContainerStatus", status.Error(codes.Internal, "broken"), true, 0, 0},
		{"sandbox status fails", "PodSandboxStatus", status.Error(codes.Internal, "broken"), true, 0, 0},
		{"list fails", "ListPodSandbox", status.Error(codes.Unavailable, "down"), true, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			pod := testPod("web", "uid-web")
			sb := w.sandbox(t, pod, 0, false)
			w.container(t, pod, sb, &pod.Spec.Containers[0], 0, false, true)
			w.container(t, pod, sb, &pod.Spec.Containers[0], 1, false, false)
			w.srv.InjectError(tt.method, tt.err)
			st, err := w.r.GetPodStatus(context.Background(), pod.UID)
			if tt.wantErr {
				if err == nil || errors.Is(err, errdefs.ErrNotFound) {
					t.Fatalf("GetPodStatus = %v, want a non-NotFound error", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("GetPodStatus: %v", err)
			}
			if len(st.Sandboxes) != tt.sandboxes || len(st.Containers) != tt.containers {
				t.Errorf("got %d sandboxes, %d containers; want %d, %d", len(st.Sandboxes), len(st.Containers), tt.sandboxes, tt.containers)
			}
		})
	}
}

func TestDecodeMalformedAnnotations(t *testing.T) {
	st := decodeContainerStatus(&runtimeapi.ContainerStatus{
		Id:          "c1",
		Metadata:    &runtimeapi.ContainerMetadata{Name: "meta-name", Attempt: 3},
		State:       runtimeapi.ContainerState_CONTAINER_UNKNOWN,
		Annotations: map[string]string{AnnotationHash: "not-hex", AnnotationRestart: "4"},
	}, &runtimeapi.Container{PodSandboxId: "sb1", Image: &runtimeapi.ImageSpec{Image: "img"}, ImageRef: "ref"})
	applyAnnotations(logr.Discard(), st)
	if st.Name != "meta-name" || st.State != ContainerUnknown || st.Hash != 0 || st.RestartCount != 4 ||
		st.SandboxID != "sb1" || st.Image != "img" || st.ImageRef != "ref" || st.Attempt != 3 {
		t.Errorf("decoded = %+v", st)
	}
}

func sandboxIDs(p *PodStatus) []string {
	var ids []string
	for _, s := range p.Sandboxes {
		ids = append(ids, s.ID)
	}
	return ids
}

func containerIDs(p *PodStatus) []string {
	var ids []string
	for _, c := range p.Containers {
		ids = append(ids, c.ID)
	}
	return ids
}
