package pluginwatcher

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	testingclock "k8s.io/utils/clock/testing"
)

// registrar is a plugin's side of the registration API, as
// node-driver-registrar serves it.
type registrar struct {
	registerapi.UnimplementedRegistrationServer
	info     *registerapi.PluginInfo
	statuses chan *registerapi.RegistrationStatus
}

func (r *registrar) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return r.info, nil
}

func (r *registrar) NotifyRegistrationStatus(_ context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	r.statuses <- s
	return &registerapi.RegistrationStatusResponse{}, nil
}

// serve serves a registrar on dir/name until the test ends.
func serve(t *testing.T, dir, name string, info *registerapi.PluginInfo) *registrar {
	t.Helper()
	r := &registrar{info: info, statuses: make(chan *registerapi.RegistrationStatus, 4)}
	l, err := net.Listen("unix", filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	registerapi.RegisterRegistrationServer(s, r)
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
	return r
}

type call struct{ op, name, endpoint string }

type fakeHandler struct {
	mu    sync.Mutex
	err   error
	calls []call
	seen  chan call
	// deregisterCtxErr is the error of each Deregister's context.
	deregisterCtxErr []error
}

func (h *fakeHandler) Register(_ context.Context, name, endpoint string, versions []string) error {
	h.record(call{"register", name, endpoint})
	return h.err
}

func (h *fakeHandler) Deregister(ctx context.Context, name, endpoint string) {
	h.mu.Lock()
	h.deregisterCtxErr = append(h.deregisterCtxErr, ctx.Err())
	h.mu.Unlock()
	h.record(call{"deregister", name, endpoint})
}

func (h *fakeHandler) record(c call) {
	h.mu.Lock()
	h.calls = append(h.calls, c)
	h.mu.Unlock()
	if h.seen != nil {
		h.seen <- c
	}
}

func (h *fakeHandler) got() []call {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.calls)
}

func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func TestSyncRegistration(t *testing.T) {
	csiInfo := func(name, endpoint string) *registerapi.PluginInfo {
		return &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: name, Endpoint: endpoint, SupportedVersions: []string{"1.0.0"}}
	}
	tests := []struct {
		name       string
		info       *registerapi.PluginInfo
		handlerErr error
		wantCalls  []call
		wantOK     bool
	}{
		{name: "csi driver", info: csiInfo("drv.example.com", "/csi/csi.sock"), wantOK: true,
			wantCalls: []call{{"register", "drv.example.com", "/csi/csi.sock"}}},
		{name: "endpoint defaults to the socket", info: csiInfo("drv.example.com", ""), wantOK: true,
			wantCalls: []call{{"register", "drv.example.com", "SOCKET"}}},
		{name: "unknown type refused", info: &registerapi.PluginInfo{Type: "Other", Name: "x", SupportedVersions: []string{"1"}}},
		{name: "no name refused", info: csiInfo("", "/csi/csi.sock")},
		{name: "no versions refused", info: &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: "x"}},
		{name: "handler refuses", info: csiInfo("drv", "/e"), handlerErr: errors.New("bad version"),
			wantCalls: []call{{"register", "drv", "/e"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := shortDir(t)
			r := serve(t, dir, "drv-reg.sock", tc.info)
			h := &fakeHandler{err: tc.handlerErr}
			w := New(Options{Dir: dir, Handlers: map[string]Handler{registerapi.CSIPlugin: h}, Clock: testingclock.NewFakeClock(time.Now())})
			w.Sync(context.Background())
			for i := range tc.wantCalls {
				if tc.wantCalls[i].endpoint == "SOCKET" {
					tc.wantCalls[i].endpoint = filepath.Join(dir, "drv-reg.sock")
				}
			}
			if got := h.got(); !slices.Equal(got, tc.wantCalls) {
				t.Errorf("handler calls %v, want %v", got, tc.wantCalls)
			}
			select {
			case s := <-r.statuses:
				if s.PluginRegistered != tc.wantOK || (s.Error == "") != tc.wantOK {
					t.Errorf("status %+v, want registered=%v with an error only when refused", s, tc.wantOK)
				}
			default:
				t.Fatal("the plugin was not told the registration status")
			}
			// A second pass registers nothing again.
			w.Sync(context.Background())
			if tc.wantOK && len(h.got()) != len(tc.wantCalls) {
				t.Errorf("second Sync called the handler again: %v", h.got())
			}
		})
	}
}

func TestSocketRemovedDeregisters(t *testing.T) {
	dir := shortDir(t)
	serve(t, dir, "drv-reg.sock", &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: "drv", Endpoint: "/e", SupportedVersions: []string{"1.0.0"}})
	if err := os.WriteFile(filepath.Join(dir, "not-a-socket"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := &fakeHandler{}
	w := New(Options{Dir: dir, Handlers: map[string]Handler{registerapi.CSIPlugin: h}, Clock: testingclock.NewFakeClock(time.Now())})
	w.Sync(context.Background())
	if err := os.Remove(filepath.Join(dir, "drv-reg.sock")); err != nil {
		t.Fatal(err)
	}
	w.Sync(context.Background())
	want := []call{{"register", "drv", "/e"}, {"deregister", "drv", "/e"}}
	if got := h.got(); !slices.Equal(got, want) {
		t.Fatalf("handler calls %v, want %v", got, want)
	}
}

// A plugin whose socket goes while the agent stops is still deregistered
// with a live context: its handler can still unpublish it (a cancelled
// context left a stale CSINode entry behind).
func TestDeregisterOutlivesStop(t *testing.T) {
	dir := shortDir(t)
	serve(t, dir, "drv-reg.sock", &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: "drv", Endpoint: "/e", SupportedVersions: []string{"1.0.0"}})
	h := &fakeHandler{}
	w := New(Options{Dir: dir, Handlers: map[string]Handler{registerapi.CSIPlugin: h}, Clock: testingclock.NewFakeClock(time.Now())})
	w.Sync(context.Background())
	if err := os.Remove(filepath.Join(dir, "drv-reg.sock")); err != nil {
		t.Fatal(err)
	}
	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	w.Sync(stopped)
	h.mu.Lock()
	errs := slices.Clone(h.deregisterCtxErr)
	h.mu.Unlock()
	if len(errs) != 1 || errs[0] != nil {
		t.Fatalf("Deregister contexts' errors %v, want one live context", errs)
	}
}

func TestRunWatchesDirectory(t *testing.T) {
	dir := shortDir(t)
	reg := filepath.Join(dir, "registry")
	h := &fakeHandler{seen: make(chan call, 4)}
	w := New(Options{Dir: reg, Handlers: map[string]Handler{registerapi.CSIPlugin: h}, Clock: testingclock.NewFakeClock(time.Now())})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	// Run creates the directory; wait for it, then a plugin appears.
	for {
		if _, err := os.Stat(reg); err == nil {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("Run ended: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	serve(t, reg, "drv-reg.sock", &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: "drv", Endpoint: "/e", SupportedVersions: []string{"1.0.0"}})
	select {
	case c := <-h.seen:
		if c != (call{"register", "drv", "/e"}) {
			t.Fatalf("first call %v, want a registration", c)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the new socket was not registered")
	}
}
