package fakecri

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

const img = "localhost:5000/busybox:1.35"

type clients struct {
	rt runtimeapi.RuntimeServiceClient
	im runtimeapi.ImageServiceClient
}

func dial(t *testing.T, s *Server) clients {
	t.Helper()
	conn, err := grpc.NewClient(s.Endpoint(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dial %s: %v", s.Endpoint(), err)
	}
	t.Cleanup(func() { conn.Close() })
	return clients{rt: runtimeapi.NewRuntimeServiceClient(conn), im: runtimeapi.NewImageServiceClient(conn)}
}

func sbConfig(name string, attempt uint32, hostNet bool) *runtimeapi.PodSandboxConfig {
	mode := runtimeapi.NamespaceMode_POD
	if hostNet {
		mode = runtimeapi.NamespaceMode_NODE
	}
	return &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: "uid-" + name, Attempt: attempt},
		LogDirectory: "/var/log/pods/" + name,
		Labels:       map[string]string{"pod": name},
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: mode},
		}},
	}
}

func ctConfig(name string, attempt uint32) *runtimeapi.ContainerConfig {
	return &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name, Attempt: attempt},
		Image:    &runtimeapi.ImageSpec{Image: img},
		LogPath:  name + "/0.log",
		Labels:   map[string]string{"container": name},
	}
}

func runSandbox(t *testing.T, c clients, cfg *runtimeapi.PodSandboxConfig) string {
	t.Helper()
	resp, err := c.rt.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	return resp.GetPodSandboxId()
}

func createContainer(t *testing.T, c clients, sb string, cfg *runtimeapi.ContainerConfig) string {
	t.Helper()
	resp, err := c.rt.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: cfg})
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	return resp.GetContainerId()
}

func containerStatus(t *testing.T, c clients, id string) *runtimeapi.ContainerStatus {
	t.Helper()
	resp, err := c.rt.ContainerStatus(context.Background(), &runtimeapi.ContainerStatusRequest{ContainerId: id})
	if err != nil {
		t.Fatalf("ContainerStatus(%s): %v", id, err)
	}
	return resp.GetStatus()
}

func TestVersionAndUnimplemented(t *testing.T) {
	s := Start(t)
	c := dial(t, s)
	ctx := context.Background()
	v, err := c.rt.Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil {
		t.Fatalf("Version: %v", err)
	}
	if v.GetRuntimeName() != RuntimeName || v.GetRuntimeApiVersion() != "v1" || v.GetRuntimeVersion() == "" || v.GetVersion() == "" {
		t.Errorf("Version = %+v", v)
	}
	if _, err := c.rt.CheckpointContainer(ctx, &runtimeapi.CheckpointContainerRequest{ContainerId: "x"}); status.Code(err) != codes.Unimplemented {
		t.Errorf("CheckpointContainer = %v, want Unimplemented", err)
	}
	if fs, err := c.im.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{}); err != nil || len(fs.GetImageFilesystems()) != 1 {
		t.Errorf("ImageFsInfo = %v, %v; want one filesystem", fs, err)
	}
}

func TestSandboxStates(t *testing.T) {
	s := Start(t)
	c := dial(t, s)
	ctx := context.Background()

	if _, err := c.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{}}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("RunPodSandbox without metadata = %v, want InvalidArgument", err)
	}
	pod := runSandbox(t, c, sbConfig("web", 0, false))
	host := runSandbox(t, c, sbConfig("host", 0, true))
	if _, err := c.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sbConfig("web", 0, false)}); status.Code(err) != codes.AlreadyExists {
		t.Errorf("RunPodSandbox with a reserved name = %v, want AlreadyExists", err)
	}

	st, err := c.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: pod})
	if err != nil {
		t.Fatalf("PodSandboxStatus: %v", err)
	}
	if got := st.GetStatus(); got.GetState() != runtimeapi.PodSandboxState_SANDBOX_READY || got.GetNetwork().GetIp() != "10.99.0.1" ||
		got.GetMetadata().GetUid() != "uid-web" || got.GetCreatedAt() == 0 || got.GetLabels()["pod"] != "web" {
		t.Errorf("pod sandbox status = %+v", got)
	}
	st, err = c.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: host})
	if err != nil {
		t.Fatalf("PodSandboxStatus: %v", err)
	}
	if got := st.GetStatus(); got.GetNetwork().GetIp() != "" ||
		got.GetLinux().GetNamespaces().GetOptions().GetNetwork() != runtimeapi.NamespaceMode_NODE {
		t.Errorf("host sandbox status = %+v, want no IP and NODE network", got)
	}

	s.AddImage(img)
	ct := createContainer(t, c, pod, ctConfig("main", 0))
	if _, err := c.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: ct}); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
	created := createContainer(t, c, pod, ctConfig("side", 0))

	if _, err := c.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: pod}); err != nil {
		t.Fatalf("StopPodSandbox: %v", err)
	}
	if got := containerStatus(t, c, ct); got.GetState() != runtimeapi.ContainerState_CONTAINER_EXITED || got.GetExitCode() != 137 {
		t.Errorf("running container after sandbox stop = %v exit %d, want EXITED 137", got.GetState(), got.GetExitCode())
	}
	if got := containerStatus(t, c, created); got.GetState() != runtimeapi.ContainerState_CONTAINER_CREATED {
		t.Errorf("created container after sandbox stop = %v, want CREATED", got.GetState())
	}
	if _, err := c.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: pod, Config: ctConfig("late", 0)}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("CreateContainer in a stopped sandbox = %v, want FailedPrecondition", err)
	}

	list, err := c.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
	}})
	if err != nil || len(list.GetItems()) != 1 || list.GetItems()[0].GetId() != host {
		t.Errorf("ListPodSandbox(ready) = %v, %v; want only %s", list.GetItems(), err, host)
	}
	list, err = c.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{"pod": "web"},
	}})
	if err != nil || len(list.GetItems()) != 1 || list.GetItems()[0].GetId() != pod {
		t.Errorf("ListPodSandbox(pod=web) = %v, %v; want only %s", list.GetItems(), err, pod)
	}

	if _, err := c.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: host}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("RemovePodSandbox of a ready sandbox = %v, want FailedPrecondition", err)
	}
	if _, err := c.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: pod}); err != nil {
		t.Fatalf("RemovePodSandbox: %v", err)
	}
	if _, err := c.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: pod}); err != nil {
		t.Errorf("second RemovePodSandbox = %v, want nil", err)
	}
	if len(s.Containers()) != 0 {
		t.Errorf("RemovePodSandbox left containers %+v", s.Containers())
	}
	if _, err := c.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: pod}); status.Code(err) != codes.NotFound {
		t.Errorf("PodSandboxStatus of a removed sandbox = %v, want NotFound", err)
	}
	if _, err := c.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: pod}); status.Code(err) != codes.NotFound {
		t.Errorf("StopPodSandbox of a removed sandbox = %v, want NotFound", err)
	}
}

func TestContainerStates(t *testing.T) {
	s := Start(t)
	c := dial(t, s)
	ctx := context.Background()
	sb := runSandbox(t, c, sbConfig("web", 0, false))

	_, err := c.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: ctConfig("main", 0)})
	if status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), "image") || !strings.Contains(err.Error(), "not present") {
		t.Errorf("CreateContainer without the image = %v, want NotFound image not present", err)
	}
	if _, err := c.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: "nope", Config: ctConfig("main", 0)}); status.Code(err) != codes.NotFound {
		t.Errorf("CreateContainer in a missing sandbox = %v, want NotFound", err)
	}
	if _, err := c.im.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: img}}); err != nil {
		t.Fatalf("PullImage: %v", err)
	}
	id := createContainer(t, c, sb, ctConfig("main", 0))
	if _, err := c.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: ctConfig("main", 0)}); status.Code(err) != codes.AlreadyExists {
		t.Errorf("CreateContainer with a reserved name = %v, want AlreadyExists", err)
	}
	st := containerStatus(t, c, id)
	if st.GetState() != runtimeapi.ContainerState_CONTAINER_CREATED || st.GetLogPath() != "/var/log/pods/web/main/0.log" ||
		st.GetImage().GetImage() != img || !strings.HasPrefix(st.GetImageRef(), "localhost:5000/busybox@sha256:") || st.GetStartedAt() != 0 {
		t.Errorf("created container status = %+v", st)
	}

	if _, err := c.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: id}); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
	if _, err := c.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: id}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("second StartContainer = %v, want FailedPrecondition", err)
	}
	st = containerStatus(t, c, id)
	if st.GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING || st.GetStartedAt() <= st.GetCreatedAt() {
		t.Errorf("running container status = %+v", st)
	}

	s.SetExit(id, 137, "OOMKilled")
	st = containerStatus(t, c, id)
	if st.GetState() != runtimeapi.ContainerState_CONTAINER_EXITED || st.GetExitCode() != 137 || st.GetReason() != "OOMKilled" ||
		st.GetFinishedAt() <= st.GetStartedAt() {
		t.Errorf("exited container status = %+v", st)
	}

	id2 := createContainer(t, c, sb, ctConfig("main", 1))
	if _, err := c.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: id2}); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
	if _, err := c.rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id2, Timeout: 30}); err != nil {
		t.Fatalf("StopContainer: %v", err)
	}
	if st := containerStatus(t, c, id2); st.GetState() != runtimeapi.ContainerState_CONTAINER_EXITED || st.GetExitCode() != 0 || st.GetReason() != "Completed" {
		t.Errorf("stopped container status = %+v, want EXITED 0 Completed", st)
	}

	list, err := c.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil || len(list.GetContainers()) != 2 || list.GetContainers()[0].GetId() != id || list.GetContainers()[1].GetId() != id2 {
		t.Errorf("ListContainers = %v, %v; want [%s %s]", list.GetContainers(), err, id, id2)
	}
	list, err = c.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{Id: id2}})
	if err != nil || len(list.GetContainers()) != 1 {
		t.Errorf("ListContainers(id) = %v, %v; want one", list.GetContainers(), err)
	}

	snap := s.Containers()
	if len(snap) != 2 || snap[1].StopTimeout != 30 || snap[0].ExitCode != 137 {
		t.Errorf("Containers() = %+v", snap)
	}
	if _, err := c.rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id}); err != nil {
		t.Fatalf("RemoveContainer: %v", err)
	}
	if _, err := c.rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id}); err != nil {
		t.Errorf("second RemoveContainer = %v, want nil", err)
	}
	if _, err := c.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id}); status.Code(err) != codes.NotFound {
		t.Errorf("ContainerStatus of a removed container = %v, want NotFound", err)
	}
}

func TestSetExitOfUnknownContainerFailsTest(t *testing.T) {
	rec := &recordingTB{TB: t}
	s := Start(t)
	s.tb = rec
	s.SetExit("missing", 1, "Error")
	if !rec.failed {
		t.Error("SetExit of an unknown container did not report an error")
	}
}

// recordingTB records Errorf instead of failing the test.
type recordingTB struct {
	testing.TB
	failed bool
}

func (r *recordingTB) Errorf(string, ...any) { r.failed = true }
func (r *recordingTB) Helper()               {}

func TestImagesService(t *testing.T) {
	s := Start(t)
	c := dial(t, s)
	ctx := context.Background()

	st, err := c.im.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: img}})
	if err != nil || st.GetImage() != nil {
		t.Errorf("ImageStatus of an absent image = %v, %v; want no image", st, err)
	}
	s.RequireAuth(img, "u", "p")
	if _, err := c.im.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: img}}); err == nil ||
		!strings.Contains(err.Error(), "unauthorized") {
		t.Errorf("PullImage without credentials = %v, want unauthorized", err)
	}
	pr, err := c.im.PullImage(ctx, &runtimeapi.PullImageRequest{
		Image: &runtimeapi.ImageSpec{Image: img},
		Auth:  &runtimeapi.AuthConfig{Username: "u", Password: "p"},
	})
	if err != nil || !strings.HasPrefix(pr.GetImageRef(), "sha256:") {
		t.Fatalf("PullImage = %v, %v", pr, err)
	}
	// Untagged names mean :latest.
	latest := s.AddImage("busybox")

	for _, ref := range []string{img, pr.GetImageRef(), s.Images()[0].RepoDigests[0]} {
		st, err := c.im.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
		if err != nil || st.GetImage().GetId() != pr.GetImageRef() || st.GetImage().GetSize() == 0 {
			t.Errorf("ImageStatus(%s) = %v, %v; want %s", ref, st, err, pr.GetImageRef())
		}
	}
	st, err = c.im.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "busybox:latest"}})
	if err != nil || st.GetImage().GetId() != latest {
		t.Errorf("ImageStatus(busybox:latest) = %v, %v; want %s", st, err, latest)
	}
	list, err := c.im.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil || len(list.GetImages()) != 2 {
		t.Errorf("ListImages = %v, %v; want 2", list, err)
	}
	if _, err := c.im.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: img}}); err != nil {
		t.Fatalf("RemoveImage: %v", err)
	}
	if got := s.Images(); len(got) != 1 || got[0].ID != latest {
		t.Errorf("Images() after remove = %+v, want only %s", got, latest)
	}
}

func TestInjectErrorAndCalls(t *testing.T) {
	s := Start(t)
	c := dial(t, s)
	ctx := context.Background()
	boom := status.Error(codes.Internal, "boom")

	s.InjectError("Version", boom)
	if _, err := c.rt.Version(ctx, &runtimeapi.VersionRequest{}); status.Code(err) != codes.Internal {
		t.Errorf("Version with a one-shot error = %v, want Internal", err)
	}
	if _, err := c.rt.Version(ctx, &runtimeapi.VersionRequest{}); err != nil {
		t.Errorf("Version after the one-shot error = %v, want nil", err)
	}

	s.InjectStickyError("Status", errors.New("plain error"))
	for i := 0; i < 2; i++ {
		if _, err := c.rt.Status(ctx, &runtimeapi.StatusRequest{}); status.Code(err) != codes.Unknown {
			t.Errorf("Status call %d with a sticky error = %v, want Unknown", i, err)
		}
	}
	s.ClearErrors()
	if _, err := c.rt.Status(ctx, &runtimeapi.StatusRequest{}); err != nil {
		t.Errorf("Status after ClearErrors = %v", err)
	}

	want := []string{"Version", "Version", "Status", "Status", "Status"}
	if got := s.Calls(); !reflect.DeepEqual(got, want) {
		t.Errorf("Calls() = %v, want %v", got, want)
	}
	s.ResetCalls()
	if got := s.Calls(); len(got) != 0 {
		t.Errorf("Calls() after ResetCalls = %v", got)
	}
}

func TestTimestamps(t *testing.T) {
	t.Run("counter", func(t *testing.T) {
		s := Start(t)
		c := dial(t, s)
		a := runSandbox(t, c, sbConfig("a", 0, false))
		b := runSandbox(t, c, sbConfig("b", 0, false))
		sbs := s.Sandboxes()
		if sbs[0].ID != a || sbs[1].ID != b {
			t.Fatalf("Sandboxes() = %+v, want [%s %s]", sbs, a, b)
		}
		if !sbs[0].CreatedAt.Equal(epoch.Add(time.Second)) || !sbs[1].CreatedAt.Equal(epoch.Add(2*time.Second)) {
			t.Errorf("created at %v, %v; want epoch+1s, epoch+2s", sbs[0].CreatedAt, sbs[1].CreatedAt)
		}
	})
	t.Run("injected clock", func(t *testing.T) {
		at := time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC)
		clk := clocktesting.NewFakeClock(at)
		s := Start(t, WithClock(clk))
		c := dial(t, s)
		runSandbox(t, c, sbConfig("a", 0, false))
		clk.Step(time.Minute)
		runSandbox(t, c, sbConfig("b", 0, false))
		sbs := s.Sandboxes()
		if !sbs[0].CreatedAt.Equal(at) || !sbs[1].CreatedAt.Equal(at.Add(time.Minute)) {
			t.Errorf("created at %v, %v; want %v, %v", sbs[0].CreatedAt, sbs[1].CreatedAt, at, at.Add(time.Minute))
		}
	})
}

func TestSnapshotsAreCopies(t *testing.T) {
	s := Start(t)
	c := dial(t, s)
	id := runSandbox(t, c, sbConfig("a", 0, false))
	snap := s.Sandboxes()
	snap[0].Config.Metadata.Name = "changed"
	snap[0].IPs[0] = "1.2.3.4"
	s.SetSandboxIPs(id, "10.0.0.1", "fd00::1")
	got := s.Sandboxes()[0]
	if got.Config.GetMetadata().GetName() != "a" || !reflect.DeepEqual(got.IPs, []string{"10.0.0.1", "fd00::1"}) {
		t.Errorf("sandbox after editing a snapshot = %+v", got)
	}
	st, err := c.rt.PodSandboxStatus(context.Background(), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
	if err != nil {
		t.Fatal(err)
	}
	if n := st.GetStatus().GetNetwork(); n.GetIp() != "10.0.0.1" || len(n.GetAdditionalIps()) != 1 || n.GetAdditionalIps()[0].GetIp() != "fd00::1" {
		t.Errorf("network status = %+v", n)
	}
}
