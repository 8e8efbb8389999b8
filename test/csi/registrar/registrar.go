// Package registrar is the node side of a CSI driver's registration with
// the kubelet, as node-driver-registrar does it: it serves the kubelet
// plugin registration API (pluginregistration.v1) on
// <kubelet root>/plugins_registry/<driver>-reg.sock, answers GetInfo with
// the driver's name, CSI endpoint and supported versions, and records what
// the kubelet reports through NotifyRegistrationStatus. The e2e tests use
// it (or the csi-registrar command built from it) to register
// test/csi/driver with heartlet.
package registrar

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"

	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// DefaultKubeletRootDir is the kubelet's default --root-dir.
const DefaultKubeletRootDir = "/var/lib/kubelet"

// Config says what to register.
type Config struct {
	// DriverName is the CSI driver's name (its GetPluginInfo name).
	DriverName string
	// Endpoint is the driver's CSI socket as the kubelet dials it (an
	// absolute path; node-driver-registrar's --kubelet-registration-path).
	Endpoint string
	// RegistrationDir is the kubelet's plugin registration directory;
	// empty means <KubeletRootDir>/plugins_registry.
	RegistrationDir string
	// KubeletRootDir is the kubelet's root directory (default
	// /var/lib/kubelet); only used when RegistrationDir is empty.
	KubeletRootDir string
	// SupportedVersions are the CSI versions announced; empty means
	// ["1.0.0"] as node-driver-registrar announces.
	SupportedVersions []string
}

// Result is one NotifyRegistrationStatus call of the kubelet.
type Result struct {
	Registered bool
	Error      string
}

// Registrar serves the registration socket until Stop or the end of the
// context given to Start.
type Registrar struct {
	cfg    Config
	socket string
	srv    *grpc.Server
	done   chan struct{}

	mu       sync.Mutex
	results  []Result
	infos    int
	changed  chan struct{} // closed and replaced on every call
	serveErr error
}

// SocketPath is <dir>/<driver>-reg.sock.
func SocketPath(dir, driver string) string {
	return filepath.Join(dir, driver+"-reg.sock")
}

// Start creates the registration socket (replacing a stale one) and serves
// it; the kubelet's plugin watcher finds it there.
func Start(ctx context.Context, cfg Config) (*Registrar, error) {
	if cfg.DriverName == "" || cfg.Endpoint == "" {
		return nil, errors.New("registrar: the driver name and endpoint are required")
	}
	if !filepath.IsAbs(cfg.Endpoint) {
		return nil, fmt.Errorf("registrar: the endpoint %q must be an absolute socket path", cfg.Endpoint)
	}
	if cfg.RegistrationDir == "" {
		root := cfg.KubeletRootDir
		if root == "" {
			root = DefaultKubeletRootDir
		}
		cfg.RegistrationDir = filepath.Join(root, "plugins_registry")
	}
	if len(cfg.SupportedVersions) == 0 {
		cfg.SupportedVersions = []string{"1.0.0"}
	}
	r := &Registrar{cfg: cfg, socket: SocketPath(cfg.RegistrationDir, cfg.DriverName), done: make(chan struct{}), changed: make(chan struct{})}
	if err := os.MkdirAll(cfg.RegistrationDir, 0o750); err != nil {
		return nil, fmt.Errorf("registrar: creating %s: %w", cfg.RegistrationDir, err)
	}
	if err := os.Remove(r.socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("registrar: removing the stale socket: %w", err)
	}
	l, err := net.Listen("unix", r.socket)
	if err != nil {
		return nil, fmt.Errorf("registrar: listening on %s: %w", r.socket, err)
	}
	r.srv = grpc.NewServer()
	registerapi.RegisterRegistrationServer(r.srv, &server{r: r})
	go func() {
		defer close(r.done)
		err := r.srv.Serve(l)
		r.mu.Lock()
		r.serveErr = err
		r.mu.Unlock()
	}()
	go func() {
		select {
		case <-ctx.Done():
			r.Stop()
		case <-r.done:
		}
	}()
	return r, nil
}

// SocketPath is the registration socket served.
func (r *Registrar) SocketPath() string { return r.socket }

// Stop stops serving and removes the socket, which is how a plugin
// deregisters itself from the kubelet. It is safe to call more than once.
func (r *Registrar) Stop() {
	r.srv.Stop()
	<-r.done
	_ = os.Remove(r.socket)
}

// Done is closed when the registrar has stopped serving.
func (r *Registrar) Done() <-chan struct{} { return r.done }

// Results returns every NotifyRegistrationStatus received so far.
func (r *Registrar) Results() []Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Result(nil), r.results...)
}

// InfoCalls is how many times the kubelet called GetInfo.
func (r *Registrar) InfoCalls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.infos
}

// WaitResult waits until the kubelet has reported at least n results and
// returns the n-th (1-based). It fails when ctx ends first or the
// registrar stops.
func (r *Registrar) WaitResult(ctx context.Context, n int) (Result, error) {
	for {
		r.mu.Lock()
		if len(r.results) >= n {
			res := r.results[n-1]
			r.mu.Unlock()
			return res, nil
		}
		changed := r.changed
		r.mu.Unlock()
		select {
		case <-changed:
		case <-r.done:
			return Result{}, errors.New("registrar: stopped before the kubelet reported the registration")
		case <-ctx.Done():
			return Result{}, fmt.Errorf("registrar: waiting for the kubelet's registration status of %s: %w", r.cfg.DriverName, ctx.Err())
		}
	}
}

// note records a call and wakes the waiters.
func (r *Registrar) note(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f()
	close(r.changed)
	r.changed = make(chan struct{})
}

// server implements pluginregistration.v1 Registration.
type server struct {
	registerapi.UnimplementedRegistrationServer
	r *Registrar
}

func (s *server) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	s.r.note(func() { s.r.infos++ })
	return &registerapi.PluginInfo{
		Type:              registerapi.CSIPlugin,
		Name:              s.r.cfg.DriverName,
		Endpoint:          s.r.cfg.Endpoint,
		SupportedVersions: s.r.cfg.SupportedVersions,
	}, nil
}

func (s *server) NotifyRegistrationStatus(_ context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	s.r.note(func() {
		s.r.results = append(s.r.results, Result{Registered: st.GetPluginRegistered(), Error: st.GetError()})
	})
	return &registerapi.RegistrationStatusResponse{}, nil
}
