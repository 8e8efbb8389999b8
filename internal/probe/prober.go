package probe

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	grpcstatus "google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/heartlet/heartlet/internal/expansion"
	"github.com/heartlet/heartlet/internal/runtime"
	"github.com/heartlet/heartlet/internal/version"
)

// maxOutput bounds the output kept from an exec probe and the body read
// from an HTTP probe (10 KiB, as upstream).
const maxOutput = 10 << 10

// maxRedirects is how many redirects an HTTP probe follows.
const maxRedirects = 10

// outcome is what one run of a probe found.
type outcome int

const (
	outcomeSuccess outcome = iota
	// outcomeWarning is a success that deserves a ProbeWarning event: an
	// HTTP probe that stopped at a redirect to another host.
	outcomeWarning
	outcomeFailure
)

// target is what a probe runs against.
type target struct {
	pod         *v1.Pod
	container   *v1.Container
	containerID string
	podIP       string
}

// prober runs single probes.
type prober struct {
	exec      ExecRunner
	transport *http.Transport
	userAgent string
}

func newProber(exec ExecRunner) *prober {
	return &prober{
		exec: exec,
		transport: &http.Transport{
			// Probes check the container, not a certificate; no proxy of
			// the node stands between the node and its pods.
			TLSClientConfig:    &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // as upstream
			DisableKeepAlives:  true,
			DisableCompression: true,
			Proxy:              nil,
			DialContext:        probeDialer(0).DialContext,
		},
		userAgent: "kube-probe/" + version.KubernetesMinor(),
	}
}

// run runs spec once against t with the probe's timeout. An error means
// the probe could not be run at all (an unknown port name, a runtime
// error): its result says nothing about the container.
func (p *prober) run(ctx context.Context, spec *v1.Probe, t target) (outcome, string, error) {
	timeout := time.Duration(spec.TimeoutSeconds) * time.Second
	if timeout <= 0 {
		timeout = time.Second
	}
	switch {
	case spec.Exec != nil:
		return p.runExec(ctx, spec.Exec, t, timeout)
	case spec.HTTPGet != nil:
		return p.runHTTP(ctx, spec.HTTPGet, t, timeout)
	case spec.TCPSocket != nil:
		return p.runTCP(ctx, spec.TCPSocket, t, timeout)
	case spec.GRPC != nil:
		return p.runGRPC(ctx, spec.GRPC, t, timeout)
	}
	return outcomeFailure, "", errors.New("probe has no handler (exec, httpGet, tcpSocket or grpc)")
}

func (p *prober) runExec(ctx context.Context, a *v1.ExecAction, t target, timeout time.Duration) (outcome, string, error) {
	if p.exec == nil {
		return outcomeFailure, "", errors.New("exec probes are not available")
	}
	// Only the container's literal env values expand in the command, as
	// upstream: the probe runs without the pod's resolved environment.
	env := map[string]string{}
	for _, e := range t.container.Env {
		if e.ValueFrom == nil {
			env[e.Name] = e.Value
		}
	}
	cmd := make([]string, len(a.Command))
	for i, s := range a.Command {
		cmd[i] = expansion.Expand(s, expansion.MapLookup(env))
	}
	res, err := p.exec.ExecSync(ctx, t.containerID, cmd, timeout)
	if err != nil {
		if errors.Is(err, runtime.ErrExecTimeout) {
			return outcomeFailure, fmt.Sprintf("command %q timed out after %s", strings.Join(cmd, " "), timeout), nil
		}
		return outcomeFailure, "", fmt.Errorf("exec probe: %w", err)
	}
	out := append(append([]byte{}, res.Stdout...), res.Stderr...)
	if len(out) > maxOutput {
		out = out[:maxOutput]
	}
	if res.ExitCode != 0 {
		return outcomeFailure, string(out), nil
	}
	return outcomeSuccess, string(out), nil
}

func (p *prober) runHTTP(ctx context.Context, a *v1.HTTPGetAction, t target, timeout time.Duration) (outcome, string, error) {
	port, err := resolvePort(a.Port, t.container)
	if err != nil {
		return outcomeFailure, "", err
	}
	scheme := strings.ToLower(string(a.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	host := a.Host
	if host == "" {
		host = t.podIP
	}
	if host == "" {
		return outcomeFailure, "", errors.New("the pod has no IP to probe")
	}
	u, err := url.Parse(a.Path)
	if err != nil {
		u = &url.URL{Path: a.Path}
	}
	u.Scheme = scheme
	u.Host = net.JoinHostPort(host, strconv.Itoa(port))

	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return outcomeFailure, "", fmt.Errorf("http probe request: %w", err)
	}
	for _, h := range a.HTTPHeaders {
		req.Header.Add(h.Name, h.Value)
	}
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header.Set("User-Agent", p.userAgent)
	}
	if _, ok := req.Header["Accept"]; !ok {
		req.Header.Set("Accept", "*/*")
	} else if req.Header.Get("Accept") == "" {
		req.Header.Del("Accept")
	}
	req.Host = req.Header.Get("Host")

	client := &http.Client{Transport: p.transport, Timeout: timeout, CheckRedirect: checkRedirect}
	resp, err := client.Do(req)
	if err != nil {
		// Unreachable, refused, timed out: the container is not healthy.
		return outcomeFailure, err.Error(), nil
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxOutput))
	if err != nil {
		return outcomeFailure, err.Error(), nil
	}
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return outcomeSuccess, string(body), nil
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		// Only a redirect that was not followed ends here: one to another
		// host. It counts as success, with a warning.
		return outcomeWarning, fmt.Sprintf("Probe terminated redirects, Response body: %s", body), nil
	}
	// The body stays out of the message: it may hold anything.
	return outcomeFailure, fmt.Sprintf("HTTP probe failed with statuscode: %d", resp.StatusCode), nil
}

// checkRedirect follows redirects on the same host only, at most
// maxRedirects of them.
func checkRedirect(req *http.Request, via []*http.Request) error {
	if req.URL.Hostname() != via[0].URL.Hostname() {
		return http.ErrUseLastResponse
	}
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	return nil
}

func (p *prober) runTCP(ctx context.Context, a *v1.TCPSocketAction, t target, timeout time.Duration) (outcome, string, error) {
	port, err := resolvePort(a.Port, t.container)
	if err != nil {
		return outcomeFailure, "", err
	}
	host := a.Host
	if host == "" {
		host = t.podIP
	}
	if host == "" {
		return outcomeFailure, "", errors.New("the pod has no IP to probe")
	}
	conn, err := probeDialer(timeout).DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return outcomeFailure, err.Error(), nil
	}
	_ = conn.Close()
	return outcomeSuccess, "", nil
}

func (p *prober) runGRPC(ctx context.Context, a *v1.GRPCAction, t target, timeout time.Duration) (outcome, string, error) {
	if a.Port <= 0 || a.Port > 65535 {
		return outcomeFailure, "", fmt.Errorf("invalid grpc port %d", a.Port)
	}
	if t.podIP == "" {
		return outcomeFailure, "", errors.New("the pod has no IP to probe")
	}
	service := ""
	if a.Service != nil {
		service = *a.Service
	}
	addr := net.JoinHostPort(t.podIP, strconv.Itoa(int(a.Port)))
	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return probeDialer(0).DialContext(ctx, "tcp", addr)
		}),
		grpc.WithUserAgent(p.userAgent))
	if err != nil {
		return outcomeFailure, fmt.Sprintf("failed to connect service %q: %v", addr, err), nil
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		switch grpcstatus.Code(err) {
		case codes.Unimplemented:
			return outcomeFailure, fmt.Sprintf("this server does not implement the grpc health protocol (grpc.health.v1.Health): %s", grpcstatus.Convert(err).Message()), nil
		case codes.DeadlineExceeded:
			return outcomeFailure, fmt.Sprintf("timeout: health rpc did not complete within %s", timeout), nil
		}
		return outcomeFailure, fmt.Sprintf("error: health rpc probe failed: %v", err), nil
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return outcomeFailure, fmt.Sprintf("service unhealthy (responded with %q)", resp.GetStatus().String()), nil
	}
	return outcomeSuccess, "service healthy", nil
}

// probeDialer dials with SO_LINGER set to one second, as upstream's
// probes do: a node probing many containers often would otherwise pile
// up sockets in TIME_WAIT.
func probeDialer(timeout time.Duration) *net.Dialer {
	return &net.Dialer{
		Timeout: timeout,
		Control: func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) {
				serr = unix.SetsockoptLinger(int(fd), unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 1})
			})
			if err != nil {
				return err
			}
			return serr
		},
	}
}

// resolvePort turns a probe port, a number or the name of one of the
// container's ports, into a port number.
func resolvePort(port intstr.IntOrString, c *v1.Container) (int, error) {
	n := 0
	switch port.Type {
	case intstr.Int:
		n = port.IntValue()
	case intstr.String:
		found := false
		for _, cp := range c.Ports {
			if cp.Name == port.StrVal {
				n, found = int(cp.ContainerPort), true
				break
			}
		}
		if !found {
			return 0, fmt.Errorf("container %s has no port named %q", c.Name, port.StrVal)
		}
	}
	if n <= 0 || n > 65535 {
		return 0, fmt.Errorf("invalid port number %d", n)
	}
	return n, nil
}
