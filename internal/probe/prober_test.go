package probe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/heartlet/heartlet/internal/runtime"
	"github.com/heartlet/heartlet/internal/version"
)

// fakeExec answers ExecSync with a fixed result and records the calls.
type fakeExec struct {
	mu    sync.Mutex
	res   runtime.ExecResult
	err   error
	calls []execCall
}

type execCall struct {
	id      string
	cmd     []string
	timeout time.Duration
}

func (f *fakeExec) ExecSync(_ context.Context, id string, cmd []string, timeout time.Duration) (runtime.ExecResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, execCall{id, cmd, timeout})
	return f.res, f.err
}

func (f *fakeExec) set(res runtime.ExecResult, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.res, f.err = res, err
}

func (f *fakeExec) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

func TestExecProbe(t *testing.T) {
	timeoutErr := fmt.Errorf("exec in container c1: %w", errors.Join(runtime.ErrExecTimeout, context.DeadlineExceeded))
	tests := []struct {
		name     string
		res      runtime.ExecResult
		err      error
		want     outcome
		wantOut  string
		wantErr  bool
		wantCmd  []string
		timeoutS int32
	}{
		{name: "exit 0 succeeds", res: runtime.ExecResult{Stdout: []byte("ok\n")}, want: outcomeSuccess, wantOut: "ok\n", wantCmd: []string{"cat", "/tmp/healthy"}, timeoutS: 1},
		{name: "non-zero exit fails with the output", res: runtime.ExecResult{Stdout: []byte("out "), Stderr: []byte("no such file"), ExitCode: 1}, want: outcomeFailure, wantOut: "out no such file", wantCmd: []string{"cat", "/tmp/healthy"}, timeoutS: 1},
		// Upstream pkg/probe/exec: a timed-out command is a failure, not an error.
		{name: "timeout fails", err: timeoutErr, want: outcomeFailure, wantOut: `command "cat /tmp/healthy" timed out after 3s`, wantCmd: []string{"cat", "/tmp/healthy"}, timeoutS: 3},
		{name: "runtime error is an error", err: errors.New("container not found"), wantErr: true, want: outcomeFailure, wantCmd: []string{"cat", "/tmp/healthy"}, timeoutS: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fe := &fakeExec{res: tt.res, err: tt.err}
			p := newProber(fe)
			spec := &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"cat", "$(FILE)"}}}, TimeoutSeconds: tt.timeoutS}
			c := &v1.Container{Name: "app", Env: []v1.EnvVar{{Name: "FILE", Value: "/tmp/healthy"}}}
			got, out, err := p.run(context.Background(), spec, target{container: c, containerID: "c1"})
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if got != tt.want || out != tt.wantOut {
				t.Errorf("run = %v %q, want %v %q", got, out, tt.want, tt.wantOut)
			}
			if len(fe.calls) != 1 || fe.calls[0].id != "c1" || strings.Join(fe.calls[0].cmd, " ") != strings.Join(tt.wantCmd, " ") ||
				fe.calls[0].timeout != time.Duration(tt.timeoutS)*time.Second {
				t.Errorf("calls = %+v", fe.calls)
			}
		})
	}
}

func TestExecProbeOutputLimited(t *testing.T) {
	fe := &fakeExec{res: runtime.ExecResult{Stdout: []byte(strings.Repeat("x", 3*maxOutput)), ExitCode: 2}}
	_, out, err := newProber(fe).run(context.Background(), &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"x"}}}}, target{container: &v1.Container{}, containerID: "c"})
	if err != nil || len(out) != maxOutput {
		t.Fatalf("len(out) = %d err %v, want %d", len(out), err, maxOutput)
	}
}

// hostPort splits a test server's URL.
func hostPort(t *testing.T, raw string) (string, int) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(u.Port())
	return u.Hostname(), port
}

func TestHTTPProbe(t *testing.T) {
	var mu sync.Mutex
	var lastHeaders http.Header
	var lastHost string
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		lastHeaders, lastHost = r.Header.Clone(), r.Host
		mu.Unlock()
		fmt.Fprint(w, "fine")
	})
	mux.HandleFunc("/status/", func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/status/"))
		w.WriteHeader(code)
		fmt.Fprint(w, "secret body")
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	host, port := hostPort(t, srv.URL)
	mux.HandleFunc("/same", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ok", http.StatusFound)
	})
	mux.HandleFunc("/other", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, fmt.Sprintf("http://localhost:%d/ok", port), http.StatusFound)
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/loop", http.StatusFound)
	})
	tlsSrv := httptest.NewTLSServer(mux)
	defer tlsSrv.Close()
	_, tlsPort := hostPort(t, tlsSrv.URL)

	named := &v1.Container{Name: "app", Ports: []v1.ContainerPort{{Name: "http", ContainerPort: int32(port)}}}
	tests := []struct {
		name    string
		action  v1.HTTPGetAction
		timeout int32
		want    outcome
		wantOut string
		wantErr bool
	}{
		{name: "200 succeeds", action: v1.HTTPGetAction{Path: "/ok", Port: intstr.FromInt32(int32(port))}, want: outcomeSuccess, wantOut: "fine"},
		{name: "named port", action: v1.HTTPGetAction{Path: "/ok", Port: intstr.FromString("http")}, want: outcomeSuccess, wantOut: "fine"},
		{name: "unknown port name errors", action: v1.HTTPGetAction{Path: "/ok", Port: intstr.FromString("nope")}, wantErr: true, want: outcomeFailure},
		// Upstream pkg/probe/http: 200 <= code < 400 succeeds; the failure
		// message names the code and leaves the body out.
		{name: "399 succeeds", action: v1.HTTPGetAction{Path: "/status/399", Port: intstr.FromInt32(int32(port))}, want: outcomeWarning, wantOut: "Probe terminated redirects, Response body: secret body"},
		{name: "400 fails", action: v1.HTTPGetAction{Path: "/status/400", Port: intstr.FromInt32(int32(port))}, want: outcomeFailure, wantOut: "HTTP probe failed with statuscode: 400"},
		{name: "500 fails", action: v1.HTTPGetAction{Path: "/status/500", Port: intstr.FromInt32(int32(port))}, want: outcomeFailure, wantOut: "HTTP probe failed with statuscode: 500"},
		{name: "same-host redirect followed", action: v1.HTTPGetAction{Path: "/same", Port: intstr.FromInt32(int32(port))}, want: outcomeSuccess, wantOut: "fine"},
		{name: "other-host redirect is a warning", action: v1.HTTPGetAction{Path: "/other", Port: intstr.FromInt32(int32(port))}, want: outcomeWarning, wantOut: "Probe terminated redirects, Response body: "},
		{name: "redirect loop fails", action: v1.HTTPGetAction{Path: "/loop", Port: intstr.FromInt32(int32(port))}, want: outcomeFailure},
		{name: "https without verification", action: v1.HTTPGetAction{Path: "/ok", Scheme: v1.URISchemeHTTPS, Port: intstr.FromInt32(int32(tlsPort))}, want: outcomeSuccess, wantOut: "fine"},
		{name: "timeout fails", action: v1.HTTPGetAction{Path: "/slow", Port: intstr.FromInt32(int32(port))}, timeout: 1, want: outcomeFailure},
		{name: "refused fails", action: v1.HTTPGetAction{Path: "/ok", Port: intstr.FromInt32(int32(closedPort(t)))}, want: outcomeFailure},
	}
	p := newProber(nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &tt.action}, TimeoutSeconds: tt.timeout}
			got, out, err := p.run(context.Background(), spec, target{container: named, podIP: host})
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("outcome = %v (%q), want %v", got, out, tt.want)
			}
			if !strings.HasPrefix(out, tt.wantOut) {
				t.Errorf("output = %q, want it to start with %q", out, tt.wantOut)
			}
		})
	}

	t.Run("headers and user agent", func(t *testing.T) {
		spec := &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/ok", Port: intstr.FromInt32(int32(port)),
			HTTPHeaders: []v1.HTTPHeader{{Name: "X-Probe", Value: "a"}, {Name: "X-Probe", Value: "b"}, {Name: "Host", Value: "example.test"}}}}}
		if got, _, err := p.run(context.Background(), spec, target{container: named, podIP: host}); err != nil || got != outcomeSuccess {
			t.Fatalf("run = %v %v", got, err)
		}
		mu.Lock()
		defer mu.Unlock()
		// Upstream pkg/probe/http/request.go: User-Agent kube-probe/<major>.<minor>, Accept */*.
		if ua := lastHeaders.Get("User-Agent"); ua != "kube-probe/"+version.KubernetesMinor() || !strings.HasPrefix(ua, "kube-probe/1.") {
			t.Errorf("User-Agent = %q", ua)
		}
		if got := lastHeaders.Values("X-Probe"); strings.Join(got, ",") != "a,b" {
			t.Errorf("X-Probe = %q", got)
		}
		if lastHeaders.Get("Accept") != "*/*" || lastHost != "example.test" {
			t.Errorf("Accept = %q, Host = %q", lastHeaders.Get("Accept"), lastHost)
		}
	})
	t.Run("user agent set by the probe", func(t *testing.T) {
		spec := &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/ok", Port: intstr.FromInt32(int32(port)),
			HTTPHeaders: []v1.HTTPHeader{{Name: "User-Agent", Value: "mine"}}}}}
		if got, _, err := p.run(context.Background(), spec, target{container: named, podIP: host}); err != nil || got != outcomeSuccess {
			t.Fatalf("run = %v %v", got, err)
		}
		mu.Lock()
		defer mu.Unlock()
		if ua := lastHeaders.Get("User-Agent"); ua != "mine" {
			t.Errorf("User-Agent = %q", ua)
		}
	})
	t.Run("body read is limited", func(t *testing.T) {
		mux.HandleFunc("/big", func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprint(w, strings.Repeat("y", 5*maxOutput))
		})
		spec := &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/big", Port: intstr.FromInt32(int32(port))}}}
		got, out, err := p.run(context.Background(), spec, target{container: named, podIP: host})
		if err != nil || got != outcomeSuccess || len(out) != maxOutput {
			t.Fatalf("run = %v len %d %v", got, len(out), err)
		}
	})
}

// closedPort returns a port nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}

func TestTCPProbe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	c := &v1.Container{Name: "app", Ports: []v1.ContainerPort{{Name: "tcp", ContainerPort: int32(port)}}}
	tests := []struct {
		name    string
		action  v1.TCPSocketAction
		podIP   string
		want    outcome
		wantErr bool
	}{
		{name: "open port by number", action: v1.TCPSocketAction{Port: intstr.FromInt32(int32(port))}, podIP: "127.0.0.1", want: outcomeSuccess},
		{name: "open port by name", action: v1.TCPSocketAction{Port: intstr.FromString("tcp")}, podIP: "127.0.0.1", want: outcomeSuccess},
		{name: "host overrides pod IP", action: v1.TCPSocketAction{Port: intstr.FromInt32(int32(port)), Host: "127.0.0.1"}, podIP: "192.0.2.1", want: outcomeSuccess},
		{name: "closed port fails", action: v1.TCPSocketAction{Port: intstr.FromInt32(int32(closedPort(t)))}, podIP: "127.0.0.1", want: outcomeFailure},
		{name: "port out of range errors", action: v1.TCPSocketAction{Port: intstr.FromInt32(70000)}, podIP: "127.0.0.1", want: outcomeFailure, wantErr: true},
		{name: "no pod IP errors", action: v1.TCPSocketAction{Port: intstr.FromInt32(int32(port))}, want: outcomeFailure, wantErr: true},
	}
	p := newProber(nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &tt.action}, TimeoutSeconds: 1}
			got, out, err := p.run(context.Background(), spec, target{container: c, podIP: tt.podIP})
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("run = %v %q %v, want %v (error %v)", got, out, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestGRPCProbe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus("down", healthpb.HealthCheckResponse_NOT_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()
	port := int32(ln.Addr().(*net.TCPAddr).Port)

	// A gRPC server without the health service.
	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	bare := grpc.NewServer()
	go func() { _ = bare.Serve(ln2) }()
	defer bare.Stop()
	barePort := int32(ln2.Addr().(*net.TCPAddr).Port)

	svc := func(s string) *string { return &s }
	tests := []struct {
		name    string
		action  v1.GRPCAction
		want    outcome
		wantOut string
	}{
		// Upstream pkg/probe/grpc: SERVING succeeds, anything else fails.
		{name: "serving", action: v1.GRPCAction{Port: port}, want: outcomeSuccess},
		{name: "not serving", action: v1.GRPCAction{Port: port, Service: svc("down")}, want: outcomeFailure, wantOut: `service unhealthy (responded with "NOT_SERVING")`},
		{name: "unknown service", action: v1.GRPCAction{Port: port, Service: svc("nope")}, want: outcomeFailure},
		{name: "no health service", action: v1.GRPCAction{Port: barePort}, want: outcomeFailure},
		{name: "nothing listening", action: v1.GRPCAction{Port: int32(closedPort(t))}, want: outcomeFailure},
	}
	p := newProber(nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := &v1.Probe{ProbeHandler: v1.ProbeHandler{GRPC: &tt.action}, TimeoutSeconds: 2}
			got, out, err := p.run(context.Background(), spec, target{container: &v1.Container{}, podIP: "127.0.0.1"})
			if err != nil || got != tt.want {
				t.Errorf("run = %v %q %v, want %v", got, out, err, tt.want)
			}
			if tt.wantOut != "" && out != tt.wantOut {
				t.Errorf("output = %q, want %q", out, tt.wantOut)
			}
		})
	}
}
