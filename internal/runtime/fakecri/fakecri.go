// Package fakecri is an in-process fake CRI runtime for tests: a real gRPC
// server on a unix socket that keeps sandboxes, containers and images in
// memory and moves them through the same states a real runtime does.
// Timestamps come from a counter (or an injected clock), so tests are
// deterministic and never sleep.
package fakecri

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// RuntimeName and RuntimeVersion are what the fake's Version call reports.
const (
	RuntimeName    = "fakecri"
	RuntimeVersion = "0.1.0"
)

// epoch is the first timestamp the default counter clock hands out.
var epoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// Sandbox is a snapshot of one fake pod sandbox.
type Sandbox struct {
	ID             string
	Config         *runtimeapi.PodSandboxConfig
	RuntimeHandler string
	State          runtimeapi.PodSandboxState
	CreatedAt      time.Time
	IPs            []string // primary first; empty for host network
}

// Container is a snapshot of one fake container.
type Container struct {
	ID         string
	SandboxID  string
	Config     *runtimeapi.ContainerConfig
	State      runtimeapi.ContainerState
	CreatedAt  time.Time
	StartedAt  time.Time
	FinishedAt time.Time
	ExitCode   int32
	Reason     string
	Message    string
	ImageID    string
	ImageRef   string // repo digest, as containerd reports it
	LogPath    string
	// StopTimeout is the timeout (seconds) of the last StopContainer call.
	StopTimeout int64
}

// Image is a snapshot of one fake image.
type Image struct {
	ID          string // sha256:...
	RepoTags    []string
	RepoDigests []string
	Size        uint64
	// UID and Username are the user of the image's configuration
	// (SetImageUser); both unset means root.
	UID      *int64
	Username string
	// Pinned is the runtime's pinned flag (SetImagePinned).
	Pinned bool
}

// Option configures a Server.
type Option func(*Server)

// WithClock makes the server take timestamps from clk instead of its
// counter (which starts at 2024-01-01 and advances one second per event).
func WithClock(clk clock.PassiveClock) Option {
	return func(s *Server) { s.clock = clk }
}

// Server is the fake CRI runtime and image service.
type Server struct {
	tb       testing.TB
	endpoint string
	grpc     *grpc.Server
	clock    clock.PassiveClock

	mu           sync.Mutex
	tick         int64
	seq          int
	ipSeq        int
	sandboxes    map[string]*sandbox
	containers   map[string]*container
	images       map[string]*image // by ID
	calls        []string
	errs         map[string][]injected
	stopExit     map[string]int32
	auth         map[string]*runtimeapi.AuthConfig
	runtimeReady bool
	networkReady bool
	exec         ExecFunc
	stopped      []string // container IDs in StopContainer call order
	reopened     []string // container IDs in ReopenContainerLog call order
	streamBase   string   // base URL of the streaming URLs handed out
	streams      []StreamRequest

	stats       map[string]ContainerUsage // by container ID (SetContainerStats)
	sandboxPids map[string]int            // by sandbox ID (SetSandboxPid)

	pullHook func(ctx context.Context, image string) error // SetPullHook

	statusInfo map[string]string // SetStatusInfo

	watchers        []*watcher    // open GetContainerEvents streams
	watchersChanged chan struct{} // closed and replaced when a stream opens
}

type sandbox struct {
	Sandbox
	seq int
}

type container struct {
	Container
	seq int
}

type image struct {
	Image
	seq int
}

type injected struct {
	err    error
	sticky bool
}

// Start serves a fresh fake runtime on a unix socket in a temporary
// directory until the test ends.
func Start(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	dir := tb.TempDir()
	// Unix socket paths are limited to 108 bytes; long test names make
	// TempDir paths too long.
	if len(dir) > 80 {
		d, err := os.MkdirTemp("", "fakecri")
		if err != nil {
			tb.Fatalf("fakecri: create socket dir: %v", err)
		}
		tb.Cleanup(func() { os.RemoveAll(d) })
		dir = d
	}
	sock := filepath.Join(dir, "cri.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		tb.Fatalf("fakecri: listen on %s: %v", sock, err)
	}
	s := &Server{
		tb:           tb,
		endpoint:     "unix://" + sock,
		grpc:         grpc.NewServer(),
		sandboxes:    map[string]*sandbox{},
		containers:   map[string]*container{},
		images:       map[string]*image{},
		errs:         map[string][]injected{},
		stopExit:     map[string]int32{},
		auth:         map[string]*runtimeapi.AuthConfig{},
		runtimeReady: true,
		networkReady: true,
		streamBase:   DefaultStreamBase,

		watchersChanged: make(chan struct{}),
	}
	for _, o := range opts {
		o(s)
	}
	runtimeapi.RegisterRuntimeServiceServer(s.grpc, &runtimeServer{s: s})
	runtimeapi.RegisterImageServiceServer(s.grpc, &imageServer{s: s})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.grpc.Serve(lis)
	}()
	tb.Cleanup(func() {
		s.grpc.Stop()
		<-done
	})
	return s
}

// StopCalls returns the IDs of the containers StopContainer was called
// for, in call order.
func (s *Server) StopCalls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.stopped...)
}

// Endpoint is the server's CRI endpoint, unix:///.../cri.sock.
func (s *Server) Endpoint() string { return s.endpoint }

// Calls returns the CRI method names called so far, in order, e.g.
// "RunPodSandbox", "ImageStatus".
func (s *Server) Calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.calls...)
}

// ResetCalls forgets the recorded calls.
func (s *Server) ResetCalls() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = nil
}

// InjectError makes the next call of method (a CRI method name such as
// "StartContainer") fail with err. Use a gRPC status error to choose the
// code; other errors arrive as codes.Unknown. Injections queue up.
func (s *Server) InjectError(method string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errs[method] = append(s.errs[method], injected{err: err})
}

// InjectStickyError makes every call of method fail with err until
// ClearErrors.
func (s *Server) InjectStickyError(method string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errs[method] = append(s.errs[method], injected{err: err, sticky: true})
}

// ClearErrors removes every injected error.
func (s *Server) ClearErrors() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errs = map[string][]injected{}
}

// SetExit makes a running container exit now with code and reason (e.g. 1,
// "Error" or 137, "OOMKilled"), as if its process ended.
func (s *Server) SetExit(id string, code int32, reason string) {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.containers[id]
	if c == nil || c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		s.tb.Errorf("fakecri: SetExit: container %q is not running", id)
		return
	}
	s.exit(c, code, reason)
}

// SetStopExitCode sets the exit code a later StopContainer of id reports
// (default 0).
func (s *Server) SetStopExitCode(id string, code int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopExit[id] = code
}

// SetSandboxIPs replaces a sandbox's pod IPs (primary first).
func (s *Server) SetSandboxIPs(id string, ips ...string) {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.sandboxes[id]
	if sb == nil {
		s.tb.Errorf("fakecri: SetSandboxIPs: no sandbox %q", id)
		return
	}
	sb.IPs = append([]string(nil), ips...)
}

// SetReady sets the RuntimeReady and NetworkReady conditions Status reports.
func (s *Server) SetReady(runtime, network bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runtimeReady, s.networkReady = runtime, network
}

// RequireAuth makes pulls of image fail with codes.Unknown "unauthorized"
// unless they carry this username and password.
func (s *Server) RequireAuth(image, username, password string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.auth[image] = &runtimeapi.AuthConfig{Username: username, Password: password}
}

// SetPullHook makes every later PullImage call run hook first, outside the
// server's lock, so it may block (until ctx is done, or the test lets it
// go); an error from it fails the pull. nil removes the hook.
func (s *Server) SetPullHook(hook func(ctx context.Context, image string) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pullHook = hook
}

// AddImage makes image present as if pulled and returns its ID.
func (s *Server) AddImage(ref string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addImage(ref).ID
}

// Sandboxes returns a snapshot of every sandbox, oldest first.
func (s *Server) Sandboxes() []Sandbox {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Sandbox, 0, len(s.sandboxes))
	for _, sb := range s.sortedSandboxes() {
		c := sb.Sandbox
		c.Config = proto.Clone(sb.Config).(*runtimeapi.PodSandboxConfig)
		c.IPs = append([]string(nil), sb.IPs...)
		out = append(out, c)
	}
	return out
}

// Containers returns a snapshot of every container, oldest first.
func (s *Server) Containers() []Container {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Container, 0, len(s.containers))
	for _, c := range s.sortedContainers() {
		cc := c.Container
		cc.Config = proto.Clone(c.Config).(*runtimeapi.ContainerConfig)
		out = append(out, cc)
	}
	return out
}

// Images returns a snapshot of every image, oldest first.
func (s *Server) Images() []Image {
	s.mu.Lock()
	defer s.mu.Unlock()
	list := make([]*image, 0, len(s.images))
	for _, im := range s.images {
		list = append(list, im)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].seq < list[j].seq })
	out := make([]Image, 0, len(list))
	for _, im := range list {
		c := im.Image
		c.RepoTags = append([]string(nil), im.RepoTags...)
		c.RepoDigests = append([]string(nil), im.RepoDigests...)
		out = append(out, c)
	}
	return out
}

// begin records a call and returns the error injected for it, if any.
// Callers hold s.mu.
func (s *Server) begin(method string) error {
	s.calls = append(s.calls, method)
	q := s.errs[method]
	if len(q) == 0 {
		return nil
	}
	e := q[0]
	if !e.sticky {
		s.errs[method] = q[1:]
	}
	return e.err
}

// now returns the next timestamp. Callers hold s.mu.
func (s *Server) now() time.Time {
	if s.clock != nil {
		return s.clock.Now()
	}
	s.tick++
	return epoch.Add(time.Duration(s.tick) * time.Second)
}

// peek returns the current timestamp without advancing the counter.
// Callers hold s.mu.
func (s *Server) peek() time.Time {
	if s.clock != nil {
		return s.clock.Now()
	}
	return epoch.Add(time.Duration(s.tick) * time.Second)
}

// newID returns a fresh 64-hex-digit ID. Callers hold s.mu.
func (s *Server) newID(kind string) (string, int) {
	s.seq++
	sum := sha256.Sum256([]byte(fmt.Sprintf("fakecri/%s/%d", kind, s.seq)))
	return hex.EncodeToString(sum[:]), s.seq
}

func (s *Server) sortedSandboxes() []*sandbox {
	list := make([]*sandbox, 0, len(s.sandboxes))
	for _, sb := range s.sandboxes {
		list = append(list, sb)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].seq < list[j].seq })
	return list
}

func (s *Server) sortedContainers() []*container {
	list := make([]*container, 0, len(s.containers))
	for _, c := range s.containers {
		list = append(list, c)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].seq < list[j].seq })
	return list
}

// exit moves a container to EXITED. Callers hold s.mu.
func (s *Server) exit(c *container, code int32, reason string) {
	c.State = runtimeapi.ContainerState_CONTAINER_EXITED
	c.FinishedAt = s.now()
	c.ExitCode = code
	c.Reason = reason
	s.emit(c, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT)
}

// addImage adds (or returns) the image named ref. Callers hold s.mu.
func (s *Server) addImage(ref string) *image {
	if im := s.findImage(ref); im != nil {
		return im
	}
	name := normalize(ref)
	id := sha256.Sum256([]byte("fakecri/image/" + name))
	digest := sha256.Sum256([]byte("fakecri/manifest/" + name))
	repo := name
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo = repo[:i]
	}
	if i := strings.Index(repo, "@"); i >= 0 {
		repo = repo[:i]
	}
	im := &image{Image: Image{
		ID:          "sha256:" + hex.EncodeToString(id[:]),
		RepoDigests: []string{repo + "@sha256:" + hex.EncodeToString(digest[:])},
		Size:        1 << 20,
	}}
	if !strings.Contains(name, "@") {
		im.RepoTags = []string{name}
	}
	s.seq++
	im.seq = s.seq
	s.images[im.ID] = im
	return im
}

// findImage finds an image by ID, tag or digest reference. Callers hold
// s.mu.
func (s *Server) findImage(ref string) *image {
	if im := s.images[ref]; im != nil {
		return im
	}
	name := normalize(ref)
	for _, im := range s.images {
		if strings.TrimPrefix(im.ID, "sha256:") == ref {
			return im
		}
		for _, t := range im.RepoTags {
			if t == name {
				return im
			}
		}
		for _, d := range im.RepoDigests {
			if d == name {
				return im
			}
		}
	}
	return nil
}

// normalize adds the :latest tag to an untagged, undigested reference.
func normalize(ref string) string {
	if strings.HasPrefix(ref, "sha256:") || strings.Contains(ref, "@") {
		return ref
	}
	if strings.LastIndex(ref, ":") > strings.LastIndex(ref, "/") {
		return ref
	}
	return ref + ":latest"
}

func toNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func matchLabels(labels, selector map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func notFound(format string, args ...any) error {
	return status.Errorf(codes.NotFound, format, args...)
}

// runtimeServer implements runtimeapi.RuntimeServiceServer.
type runtimeServer struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	s *Server
}

func (r *runtimeServer) Version(_ context.Context, _ *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin("Version"); err != nil {
		return nil, err
	}
	return &runtimeapi.VersionResponse{
		Version:           "0.1.0",
		RuntimeName:       RuntimeName,
		RuntimeVersion:    RuntimeVersion,
		RuntimeApiVersion: "v1",
	}, nil
}

func (r *runtimeServer) Status(_ context.Context, req *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin("Status"); err != nil {
		return nil, err
	}
	cond := func(t string, ok bool) *runtimeapi.RuntimeCondition {
		c := &runtimeapi.RuntimeCondition{Type: t, Status: ok}
		if !ok {
			c.Reason, c.Message = "FakeNotReady", t+" set false by the test"
		}
		return c
	}
	resp := &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		cond(runtimeapi.RuntimeReady, s.runtimeReady),
		cond(runtimeapi.NetworkReady, s.networkReady),
	}}}
	if req.GetVerbose() {
		resp.Info = maps.Clone(s.statusInfo)
	}
	return resp, nil
}

func (r *runtimeServer) RunPodSandbox(_ context.Context, req *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin("RunPodSandbox"); err != nil {
		return nil, err
	}
	cfg := req.GetConfig()
	md := cfg.GetMetadata()
	if md.GetName() == "" || md.GetNamespace() == "" || md.GetUid() == "" {
		return nil, status.Error(codes.InvalidArgument, "sandbox config metadata needs name, namespace and uid")
	}
	for _, sb := range s.sandboxes {
		o := sb.Config.GetMetadata()
		if o.GetName() == md.GetName() && o.GetNamespace() == md.GetNamespace() && o.GetUid() == md.GetUid() && o.GetAttempt() == md.GetAttempt() {
			return nil, status.Errorf(codes.AlreadyExists, "sandbox name %s_%s_%s_%d is reserved for %s",
				md.GetName(), md.GetNamespace(), md.GetUid(), md.GetAttempt(), sb.ID)
		}
	}
	id, seq := s.newID("sandbox")
	sb := &sandbox{seq: seq, Sandbox: Sandbox{
		ID:             id,
		Config:         proto.Clone(cfg).(*runtimeapi.PodSandboxConfig),
		RuntimeHandler: req.GetRuntimeHandler(),
		State:          runtimeapi.PodSandboxState_SANDBOX_READY,
		CreatedAt:      s.now(),
	}}
	if cfg.GetLinux().GetSecurityContext().GetNamespaceOptions().GetNetwork() != runtimeapi.NamespaceMode_NODE {
		s.ipSeq++
		sb.IPs = []string{fmt.Sprintf("10.99.%d.%d", (s.ipSeq>>8)&0xff, s.ipSeq&0xff)}
	}
	s.sandboxes[id] = sb
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: id}, nil
}

func (r *runtimeServer) StopPodSandbox(_ context.Context, req *runtimeapi.StopPodSandboxRequest) (*runtimeapi.StopPodSandboxResponse, error) {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin("StopPodSandbox"); err != nil {
		return nil, err
	}
	sb := s.sandboxes[req.GetPodSandboxId()]
	if sb == nil {
		return nil, notFound("sandbox %q not found", req.GetPodSandboxId())
	}
	for _, c := range s.sortedContainers() {
		if c.SandboxID == sb.ID && c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			s.exit(c, 137, "Error")
		}
	}
	sb.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	return &runtimeapi.StopPodSandboxResponse{}, nil
}

// RemovePodSandbox refuses a ready sandbox, as containerd 1.6 does (2.x
// stops it first), and removes the sandbox's containers with it.
func (r *runtimeServer) RemovePodSandbox(_ context.Context, req *runtimeapi.RemovePodSandboxRequest) (*runtimeapi.RemovePodSandboxResponse, error) {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin("RemovePodSandbox"); err != nil {
		return nil, err
	}
	sb := s.sandboxes[req.GetPodSandboxId()]
	if sb == nil {
		return &runtimeapi.RemovePodSandboxResponse{}, nil
	}
	if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
		return nil, status.Errorf(codes.FailedPrecondition, "sandbox %s is not fully stopped", sb.ID)
	}
	for id, c := range s.containers {
		if c.SandboxID == sb.ID {
			delete(s.containers, id)
		}
	}
	delete(s.sandboxes, sb.ID)
	return &runtimeapi.RemovePodSandboxResponse{}, nil
}

func (r *runtimeServer) PodSandboxStatus(_ context.Context, req *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin("PodSandboxStatus"); err != nil {
		return nil, err
	}
	sb := s.sandboxes[req.GetPodSandboxId()]
	if sb == nil {
		return nil, notFound("sandbox %q not found", req.GetPodSandboxId())
	}
	st := &runtimeapi.PodSandboxStatus{
		Id:             sb.ID,
		Metadata:       proto.Clone(sb.Config.GetMetadata()).(*runtimeapi.PodSandboxMetadata),
		State:          sb.State,
		CreatedAt:      toNanos(sb.CreatedAt),
		Network:        &runtimeapi.PodSandboxNetworkStatus{},
		Labels:         sb.Config.GetLabels(),
		Annotations:    sb.Config.GetAnnotations(),
		RuntimeHandler: sb.RuntimeHandler,
	}
	if len(sb.IPs) > 0 {
		st.Network.Ip = sb.IPs[0]
		for _, ip := range sb.IPs[1:] {
			st.Network.AdditionalIps = append(st.Network.AdditionalIps, &runtimeapi.PodIP{Ip: ip})
		}
	}
	if ns := sb.Config.GetLinux().GetSecurityContext().GetNamespaceOptions(); ns != nil {
		st.Linux = &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{
			Options: proto.Clone(ns).(*runtimeapi.NamespaceOption),
		}}
	}
	resp := &runtimeapi.PodSandboxStatusResponse{Status: st}
	if req.GetVerbose() {
		resp.Info = s.sandboxInfo(sb.ID)
	}
	return resp, nil
}

func (r *runtimeServer) ListPodSandbox(_ context.Context, req *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin("ListPodSandbox"); err != nil {
		return nil, err
	}
	f := req.GetFilter()
	resp := &runtimeapi.ListPodSandboxResponse{}
	for _, sb := range s.sortedSandboxes() {
		if f.GetId() != "" && f.GetId() != sb.ID {
			continue
		}
		if f.GetState() != nil && f.GetState().GetState() != sb.State {
			continue
		}
		if !matchLabels(sb.Config.GetLabels(), f.GetLabelSelector()) {
			continue
		}
		resp.Items = append(resp.Items, &runtimeapi.PodSandbox{
			Id:             sb.ID,
			Metadata:       proto.Clone(sb.Config.GetMetadata()).(*runtimeapi.PodSandboxMetadata),
			State:          sb.State,
			CreatedAt:      toNanos(sb.CreatedAt),
			Labels:         sb.Config.GetLabels(),
			Annotations:    sb.Config.GetAnnotations(),
			RuntimeHandler: sb.RuntimeHandler,
		})
	}
	return resp, nil
}

func (r *runtimeServer) CreateContainer(_ context.Context, req *runtimeapi.CreateContainerRequest) (*runtimeapi.CreateContainerResponse, error) {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin("CreateContainer"); err != nil {
		return nil, err
	}
	cfg := req.GetConfig()
	sb := s.sandboxes[req.GetPodSandboxId()]
	if sb == nil {
		return nil, notFound("sandbox %q not found", req.GetPodSandboxId())
	}
	if sb.State != runtimeapi.PodSandboxState_SANDBOX_READY {
		return nil, status.Errorf(codes.FailedPrecondition, "sandbox %s is not ready", sb.ID)
	}
	if cfg.GetMetadata().GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "container config metadata needs a name")
	}
	for _, c := range s.containers {
		if c.SandboxID == sb.ID && c.Config.GetMetadata().GetName() == cfg.GetMetadata().GetName() &&
			c.Config.GetMetadata().GetAttempt() == cfg.GetMetadata().GetAttempt() {
			return nil, status.Errorf(codes.AlreadyExists, "container name %s attempt %d in sandbox %s is reserved for %s",
				cfg.GetMetadata().GetName(), cfg.GetMetadata().GetAttempt(), sb.ID, c.ID)
		}
	}
	im := s.findImage(cfg.GetImage().GetImage())
	if im == nil {
		return nil, notFound("image %q not present", cfg.GetImage().GetImage())
	}
	id, seq := s.newID("container")
	c := &container{seq: seq, Container: Container{
		ID:        id,
		SandboxID: sb.ID,
		Config:    proto.Clone(cfg).(*runtimeapi.ContainerConfig),
		State:     runtimeapi.ContainerState_CONTAINER_CREATED,
		CreatedAt: s.now(),
		ImageID:   im.ID,
		ImageRef:  im.RepoDigests[0],
	}}
	if dir, p := sb.Config.GetLogDirectory(), cfg.GetLogPath(); dir != "" && p != "" {
		c.LogPath = filepath.Join(dir, p)
	}
	s.containers[id] = c
	s.emit(c, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT)
	return &runtimeapi.CreateContainerResponse{ContainerId: id}, nil
}

func (r *runtimeServer) StartContainer(_ context.Context, req *runtimeapi.StartContainerRequest) (*runtimeapi.StartContainerResponse, error) {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin("StartContainer"); err != nil {
		return nil, err
	}
	c := s.containers[req.GetContainerId()]
	if c == nil {
		return nil, notFound("container %q not found", req.GetContainerId())
	}
	if c.State != runtimeapi.ContainerState_CONTAINER_CREATED {
		return nil, status.Errorf(codes.FailedPrecondition, "container %s is in %s state", c.ID, c.State)
	}
	if sb := s.sandboxes[c.SandboxID]; sb == nil || sb.State != runtimeapi.PodSandboxState_SANDBOX_READY {
		return nil, status.Errorf(codes.FailedPrecondition, "sandbox %s of container %s is not ready", c.SandboxID, c.ID)
	}
	c.State = runtimeapi.ContainerState_CONTAINER_RUNNING
	c.StartedAt = s.now()
	s.emit(c, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT)
	return &runtimeapi.StartContainerResponse{}, nil
}

func (r *runtimeServer) StopContainer(_ context.Context, req *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin("StopContainer"); err != nil {
		return nil, err
	}
	c := s.containers[req.GetContainerId()]
	if c == nil {
		return nil, notFound("container %q not found", req.GetContainerId())
	}
	c.StopTimeout = req.GetTimeout()
	s.stopped = append(s.stopped, c.ID)
	if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
		code := s.stopExit[c.ID]
		reason := "Completed"
		if code != 0 {
			reason = "Error"
		}
		s.exit(c, code, reason)
	}
	return &runtimeapi.StopContainerResponse{}, nil
}

// UpdateContainerResources replaces the Linux resources of a created or
// running container's configuration, which ContainerStatus then reports.
func (r *runtimeServer) UpdateContainerResources(_ context.Context, req *runtimeapi.UpdateContainerResourcesRequest) (*runtimeapi.UpdateContainerResourcesResponse, error) {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin("UpdateContainerResources"); err != nil {
		return nil, err
	}
	c := s.containers[req.GetContainerId()]
	if c == nil {
		return nil, notFound("container %q not found", req.GetContainerId())
	}
	if c.State == runtimeapi.ContainerState_CONTAINER_EXITED {
		return nil, status.Errorf(codes.FailedPrecondition, "container %q is not running", c.ID)
	}
	if c.Config.Linux == nil {
		c.Config.Linux = &runtimeapi.LinuxContainerConfig{}
	}
	if l := req.GetLinux(); l != nil {
		c.Config.Linux.Resources = proto.Clone(l).(*runtimeapi.LinuxContainerResources)
	}
	return &runtimeapi.UpdateContainerResourcesResponse{}, nil
}

func (r *runtimeServer) RemoveContainer(_ context.Context, req *runtimeapi.RemoveContainerRequest) (*runtimeapi.RemoveContainerResponse, error) {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin("RemoveContainer"); err != nil {
		return nil, err
	}
	if c := s.containers[req.GetContainerId()]; c != nil {
		delete(s.containers, c.ID)
		s.emit(c, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT)
	}
	return &runtimeapi.RemoveContainerResponse{}, nil
}

func (r *runtimeServer) ListContainers(_ context.Context, req *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin("ListContainers"); err != nil {
		return nil, err
	}
	f := req.GetFilter()
	resp := &runtimeapi.ListContainersResponse{}
	for _, c := range s.sortedContainers() {
		if f.GetId() != "" && f.GetId() != c.ID {
			continue
		}
		if f.GetPodSandboxId() != "" && f.GetPodSandboxId() != c.SandboxID {
			continue
		}
		if f.GetState() != nil && f.GetState().GetState() != c.State {
			continue
		}
		if !matchLabels(c.Config.GetLabels(), f.GetLabelSelector()) {
			continue
		}
		resp.Containers = append(resp.Containers, &runtimeapi.Container{
			Id:           c.ID,
			PodSandboxId: c.SandboxID,
			Metadata:     proto.Clone(c.Config.GetMetadata()).(*runtimeapi.ContainerMetadata),
			Image:        &runtimeapi.ImageSpec{Image: c.Config.GetImage().GetImage()},
			ImageRef:     c.ImageRef,
			ImageId:      c.ImageID,
			State:        c.State,
			CreatedAt:    toNanos(c.CreatedAt),
			Labels:       c.Config.GetLabels(),
			Annotations:  c.Config.GetAnnotations(),
		})
	}
	return resp, nil
}

func (r *runtimeServer) ContainerStatus(_ context.Context, req *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin("ContainerStatus"); err != nil {
		return nil, err
	}
	c := s.containers[req.GetContainerId()]
	if c == nil {
		return nil, notFound("container %q not found", req.GetContainerId())
	}
	return &runtimeapi.ContainerStatusResponse{Status: c.status()}, nil
}

// status returns the container's CRI status. Callers hold s.mu.
func (c *container) status() *runtimeapi.ContainerStatus {
	return &runtimeapi.ContainerStatus{
		Id:          c.ID,
		Metadata:    proto.Clone(c.Config.GetMetadata()).(*runtimeapi.ContainerMetadata),
		State:       c.State,
		CreatedAt:   toNanos(c.CreatedAt),
		StartedAt:   toNanos(c.StartedAt),
		FinishedAt:  toNanos(c.FinishedAt),
		ExitCode:    c.ExitCode,
		Image:       &runtimeapi.ImageSpec{Image: c.Config.GetImage().GetImage()},
		ImageRef:    c.ImageRef,
		ImageId:     c.ImageID,
		Reason:      c.Reason,
		Message:     c.Message,
		Labels:      c.Config.GetLabels(),
		Annotations: c.Config.GetAnnotations(),
		LogPath:     c.LogPath,
		Mounts:      c.Config.GetMounts(),
		Resources:   containerResources(c.Config),
	}
}

// imageServer implements runtimeapi.ImageServiceServer.
type imageServer struct {
	runtimeapi.UnimplementedImageServiceServer
	s *Server
}

func (im *image) toCRI() *runtimeapi.Image {
	return &runtimeapi.Image{
		Id:          im.ID,
		RepoTags:    append([]string(nil), im.RepoTags...),
		RepoDigests: append([]string(nil), im.RepoDigests...),
		Size:        im.Size,
		Uid:         imageUID(im.UID),
		Username:    im.Username,
		Pinned:      im.Pinned,
	}
}

func (i *imageServer) ListImages(_ context.Context, req *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	s := i.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin("ListImages"); err != nil {
		return nil, err
	}
	var want *image
	if ref := req.GetFilter().GetImage().GetImage(); ref != "" {
		if want = s.findImage(ref); want == nil {
			return &runtimeapi.ListImagesResponse{}, nil
		}
	}
	list := make([]*image, 0, len(s.images))
	for _, im := range s.images {
		if want == nil || want == im {
			list = append(list, im)
		}
	}
	sort.Slice(list, func(a, b int) bool { return list[a].seq < list[b].seq })
	resp := &runtimeapi.ListImagesResponse{}
	for _, im := range list {
		resp.Images = append(resp.Images, im.toCRI())
	}
	return resp, nil
}

func (i *imageServer) ImageStatus(_ context.Context, req *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	s := i.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin("ImageStatus"); err != nil {
		return nil, err
	}
	im := s.findImage(req.GetImage().GetImage())
	if im == nil {
		return &runtimeapi.ImageStatusResponse{}, nil
	}
	return &runtimeapi.ImageStatusResponse{Image: im.toCRI()}, nil
}

func (i *imageServer) PullImage(ctx context.Context, req *runtimeapi.PullImageRequest) (*runtimeapi.PullImageResponse, error) {
	s := i.s
	s.mu.Lock()
	hook := s.pullHook
	s.mu.Unlock()
	if hook != nil {
		if err := hook(ctx, req.GetImage().GetImage()); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin("PullImage"); err != nil {
		return nil, err
	}
	ref := req.GetImage().GetImage()
	if ref == "" {
		return nil, status.Error(codes.InvalidArgument, "image reference is empty")
	}
	if want := s.auth[ref]; want != nil {
		got := req.GetAuth()
		if got.GetUsername() != want.GetUsername() || got.GetPassword() != want.GetPassword() {
			return nil, status.Errorf(codes.Unknown, "pull %s: unauthorized", ref)
		}
	}
	return &runtimeapi.PullImageResponse{ImageRef: s.addImage(ref).ID}, nil
}

func (i *imageServer) RemoveImage(_ context.Context, req *runtimeapi.RemoveImageRequest) (*runtimeapi.RemoveImageResponse, error) {
	s := i.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin("RemoveImage"); err != nil {
		return nil, err
	}
	if im := s.findImage(req.GetImage().GetImage()); im != nil {
		delete(s.images, im.ID)
	}
	return &runtimeapi.RemoveImageResponse{}, nil
}

func (i *imageServer) ImageFsInfo(_ context.Context, _ *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	s := i.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin("ImageFsInfo"); err != nil {
		return nil, err
	}
	var used uint64
	for _, im := range s.images {
		used += im.Size
	}
	return &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{{
		Timestamp:  toNanos(s.peek()),
		FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: ImageFsMountpoint},
		UsedBytes:  &runtimeapi.UInt64Value{Value: used},
		InodesUsed: &runtimeapi.UInt64Value{Value: uint64(len(s.images))},
	}}}, nil
}

// containerResources is what ContainerStatus reports of the container's
// resources: its configuration's Linux resources, nil without any.
func containerResources(cfg *runtimeapi.ContainerConfig) *runtimeapi.ContainerResources {
	l := cfg.GetLinux().GetResources()
	if l == nil {
		return nil
	}
	return &runtimeapi.ContainerResources{Linux: proto.Clone(l).(*runtimeapi.LinuxContainerResources)}
}
