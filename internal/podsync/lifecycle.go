package podsync

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
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2"

	"github.com/heartlet/heartlet/internal/errdefs"
	"github.com/heartlet/heartlet/internal/journal"
	"github.com/heartlet/heartlet/internal/version"
)

// Lifecycle hook events and the waiting reason of a container whose
// postStart hook failed, with the upstream kubelet's spelling.
const (
	EventFailedPostStartHook = "FailedPostStartHook"
	EventFailedPreStopHook   = "FailedPreStopHook"
	// ReasonPostStartHookError is the waiting reason of a container killed
	// because its postStart hook failed.
	ReasonPostStartHookError = "PostStartHookError"
)

// minimumGracePeriod is the least time a container gets between the stop
// signal and SIGKILL, whatever the grace period and a preStop hook left of
// it, as upstream (minimumGracePeriodInSeconds in kuberuntime).
const minimumGracePeriod = 2 * time.Second

// maxHookResponseBody is how much of an httpGet hook's response body is
// read (and discarded) so the connection can be reused, as upstream.
const maxHookResponseBody = 10 << 10

// maxHookRedirects bounds the redirects an httpGet hook follows.
const maxHookRedirects = 10

// HTTPDoer sends the HTTP requests of httpGet hooks.
type HTTPDoer interface {
	Do(req *http.Request) (*http.Response, error)
}

// lifecycleState is what the syncer keeps for hooks and termination
// messages.
type lifecycleState struct {
	// httpClient sends httpGet hook requests.
	httpClient HTTPDoer

	mu sync.Mutex
	// messages holds, by pod UID and container ID, the termination
	// message of containers that have exited: it is final, and its file
	// may be gone once the pod's directory is cleaned up.
	messages map[string]map[string]string
}

func newLifecycleState() *lifecycleState {
	return &lifecycleState{httpClient: newHookHTTPClient(), messages: map[string]map[string]string{}}
}

// newHookHTTPClient is the client of httpGet hooks, as upstream's: HTTPS
// without certificate verification (there is nothing to verify against),
// no credentials, and redirects followed only to the same host.
func newHookHTTPClient() *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:           nil,
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // as upstream: hook targets have no verifiable identity
		},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= maxHookRedirects {
				return fmt.Errorf("stopped after %d redirects", maxHookRedirects)
			}
			if req.URL.Hostname() != via[0].URL.Hostname() {
				return http.ErrUseLastResponse
			}
			return nil
		},
	}
}

// containerSpec finds the spec of the named container among the pod's app
// and init containers, or nil.
func containerSpec(pod *v1.Pod, name string) *v1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i]
		}
	}
	return nil
}

// killContainer stops one running container of pod: it records the
// Killing event (message, or "Stopping container <name>" when empty), runs
// the container's preStop hook within grace, then stops the container
// with what is left of grace, at least minimumGracePeriod. The spec (for
// the hook) is found by name in the pod; a container the pod does not
// name is stopped without a hook. A container that is already gone is
// not an error.
func (s *Syncer) killContainer(ctx context.Context, pod *v1.Pod, name, id string, grace time.Duration, message string) error {
	logger := klog.FromContext(ctx).WithValues("container", name, "containerID", id)
	spec := containerSpec(pod, name)
	if message == "" {
		message = "Stopping container " + name
	}
	logger.Info("Killing container", "gracePeriod", grace, "reason", message)
	if len(pod.Spec.Containers) > 0 { // not for orphans known only from the runtime
		s.containerEvent(pod, name, v1.EventTypeNormal, "Killing", "%s", message)
		s.note(pod, journal.Entry{Kind: journal.KindContainer, Container: name, Reason: "Killing", Message: fmt.Sprintf("killing container (grace period %s): %s", grace, message)})
	}
	if spec != nil && spec.Lifecycle != nil && spec.Lifecycle.PreStop != nil && grace > 0 {
		// A hook still running when the grace is used up goes on until
		// the container is stopped, as upstream; then it is cancelled.
		hookCtx, cancel := context.WithCancel(klog.NewContext(ctx, logger))
		defer cancel()
		grace -= s.runPreStop(hookCtx, pod, spec, id, grace)
	}
	if grace < minimumGracePeriod {
		grace = minimumGracePeriod
	}
	logger.V(2).Info("Stopping container", "gracePeriod", grace)
	if err := s.rt.StopContainer(ctx, id, grace); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		return fmt.Errorf("stop container %s: %w", name, err)
	}
	return nil
}

// runPreStop runs the container's preStop hook and waits for it at most
// grace. It returns the time spent; the hook may go on until ctx ends. A failed hook is recorded as a
// FailedPreStopHook event; the stop goes on either way.
func (s *Syncer) runPreStop(ctx context.Context, pod *v1.Pod, spec *v1.Container, id string, grace time.Duration) time.Duration {
	logger := klog.FromContext(ctx)
	logger.V(3).Info("Running preStop hook")
	start := s.clock.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := s.runHook(ctx, pod, spec, id, spec.Lifecycle.PreStop); err != nil {
			logger.Error(err, "PreStop hook failed")
			// The hook's output is not put in the event: it may hold secrets.
			s.containerEvent(pod, spec.Name, v1.EventTypeWarning, EventFailedPreStopHook, "PreStopHook failed")
		}
	}()
	select {
	case <-done:
		logger.V(3).Info("PreStop hook completed")
	case <-s.clock.After(grace):
		logger.V(2).Info("PreStop hook not completed in grace period", "gracePeriod", grace)
	}
	return s.clock.Since(start)
}

// runPostStart runs the container's postStart hook, if any, right after
// the container started. When it fails, the container is killed (it
// restarts per the restart policy) and the returned message says why.
func (s *Syncer) runPostStart(ctx context.Context, pod *v1.Pod, c *v1.Container, id string) (string, error) {
	if c.Lifecycle == nil || c.Lifecycle.PostStart == nil {
		return "", nil
	}
	logger := klog.FromContext(ctx).WithValues("container", c.Name, "containerID", id)
	msg, err := s.runHook(ctx, pod, c, id, c.Lifecycle.PostStart)
	if err == nil {
		return "", nil
	}
	logger.Error(err, "Failed to execute PostStartHook")
	// The hook's output is not put in the event: it may hold secrets.
	s.containerEvent(pod, c.Name, v1.EventTypeWarning, EventFailedPostStartHook, "PostStartHook failed")
	if kerr := s.killContainer(ctx, pod, c.Name, id, gracePeriod(pod), EventFailedPostStartHook); kerr != nil {
		logger.Error(kerr, "Failed to kill container after its postStart hook failed")
	}
	return msg, fmt.Errorf("postStart hook of container %s: %w", c.Name, err)
}

// runHook runs one lifecycle handler against the container. On failure
// the message describes it as upstream's handler runner does.
func (s *Syncer) runHook(ctx context.Context, pod *v1.Pod, c *v1.Container, id string, h *v1.LifecycleHandler) (string, error) {
	podName := fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
	switch {
	case h.Exec != nil:
		res, err := s.rt.ExecSync(ctx, id, h.Exec.Command, 0)
		output := string(res.Stdout) + string(res.Stderr)
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("command '%s' exited with %d: %s", strings.Join(h.Exec.Command, " "), res.ExitCode, res.Stderr)
		}
		if err != nil {
			return fmt.Sprintf("Exec lifecycle hook (%v) for Container %q in Pod %q failed - error: %v, message: %q", h.Exec.Command, c.Name, podName, err, output), err
		}
		return "", nil
	case h.HTTPGet != nil:
		if err := s.runHTTPHook(ctx, pod, c, h.HTTPGet); err != nil {
			return fmt.Sprintf("HTTP lifecycle hook (%s) for Container %q in Pod %q failed - error: %v", h.HTTPGet.Path, c.Name, podName, err), err
		}
		return "", nil
	case h.Sleep != nil:
		if err := s.runSleepHook(ctx, h.Sleep.Seconds); err != nil {
			return fmt.Sprintf("Sleep lifecycle hook (%d) for Container %q in Pod %q failed - error: %v", h.Sleep.Seconds, c.Name, podName, err), err
		}
		return "", nil
	}
	err := fmt.Errorf("invalid handler: %v", h)
	return fmt.Sprintf("Cannot run handler: %v", err), err
}

// runSleepHook waits seconds on the syncer's clock, or fails when ctx ends
// first (the container is being stopped).
func (s *Syncer) runSleepHook(ctx context.Context, seconds int64) error {
	select {
	case <-s.clock.After(time.Duration(seconds) * time.Second):
		return nil
	case <-ctx.Done():
		return errors.New("container terminated before sleep hook finished")
	}
}

// runHTTPHook sends the hook's GET request. As upstream, only a failed
// request fails the hook, not the response's status code; an HTTPS
// request answered in plain HTTP is retried over HTTP.
func (s *Syncer) runHTTPHook(ctx context.Context, pod *v1.Pod, c *v1.Container, get *v1.HTTPGetAction) error {
	host := get.Host
	if host == "" {
		ip, err := s.podIP(ctx, pod)
		if err != nil {
			return err
		}
		host = ip
	}
	req, err := hookRequest(ctx, get, c, host)
	if err != nil {
		return err
	}
	resp, err := s.lc.httpClient.Do(req)
	discardBody(resp)
	if err != nil && isHTTPResponseToHTTPS(err) {
		klog.FromContext(ctx).V(1).Info("HTTPS request to lifecycle hook got HTTP response, retrying with HTTP", "host", req.URL.Host)
		plain := req.Clone(ctx)
		plain.URL.Scheme = "http"
		plain.Header.Del("Authorization")
		resp, herr := s.lc.httpClient.Do(plain)
		discardBody(resp)
		if herr == nil {
			s.event(pod, v1.EventTypeWarning, "LifecycleHTTPFallback", "request to HTTPS lifecycle hook %s got HTTP response, retry with HTTP succeeded", req.URL.Host)
			err = nil
		}
	}
	return err
}

// podIP is the address an httpGet hook without a host goes to: the pod's
// first IP, or the node's for a host-network pod.
func (s *Syncer) podIP(ctx context.Context, pod *v1.Pod) (string, error) {
	if pod.Spec.HostNetwork {
		if len(s.opts.NodeIPs) == 0 {
			return "", errors.New("failed to find the node IP of a host-network pod")
		}
		return s.opts.NodeIPs[0], nil
	}
	rs, err := s.rt.GetPodStatus(ctx, pod.UID)
	if err != nil {
		return "", fmt.Errorf("get pod IP: %w", err)
	}
	ips := rs.IPs()
	if len(ips) == 0 {
		return "", errors.New("failed to find networking container: the pod has no IP")
	}
	return ips[0], nil
}

// hookRequest builds the request of an httpGet hook as upstream builds
// HTTP probe and hook requests: scheme (default http), host:port with the
// port resolved by number or name, path as given, the headers, a
// kube-lifecycle User-Agent and Accept */* unless set.
func hookRequest(ctx context.Context, get *v1.HTTPGetAction, c *v1.Container, host string) (*http.Request, error) {
	scheme := strings.ToLower(string(get.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	port, err := resolvePort(get.Port, c)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(get.Path)
	if err != nil {
		u = &url.URL{Path: get.Path}
	}
	u.Scheme = scheme
	u.Host = net.JoinHostPort(host, strconv.Itoa(port))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	headers := http.Header{}
	for _, h := range get.HTTPHeaders {
		headers.Add(h.Name, h.Value)
	}
	if _, ok := headers["User-Agent"]; !ok {
		headers.Set("User-Agent", "kube-lifecycle/"+version.KubernetesMinor())
	}
	if _, ok := headers["Accept"]; !ok {
		headers.Set("Accept", "*/*")
	} else if headers.Get("Accept") == "" {
		headers.Del("Accept")
	}
	req.Header = headers
	req.Host = headers.Get("Host")
	return req, nil
}

// resolvePort turns a hook's port into a number: an integer, a named port
// of the container, or a number written as a string.
func resolvePort(p intstr.IntOrString, c *v1.Container) (int, error) {
	port := -1
	switch p.Type {
	case intstr.Int:
		port = p.IntValue()
	case intstr.String:
		found := false
		for _, cp := range c.Ports {
			if cp.Name == p.StrVal {
				port, found = int(cp.ContainerPort), true
				break
			}
		}
		if !found {
			n, err := strconv.Atoi(p.StrVal)
			if err != nil {
				return -1, fmt.Errorf("port %s not found in container %s", p.StrVal, c.Name)
			}
			port = n
		}
	}
	if port > 0 && port < 65536 {
		return port, nil
	}
	return port, fmt.Errorf("invalid port number: %v", port)
}

func discardBody(resp *http.Response) {
	if resp == nil {
		return
	}
	defer resp.Body.Close()
	if resp.ContentLength <= maxHookResponseBody {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxHookResponseBody))
	}
}

// isHTTPResponseToHTTPS reports whether err is an HTTPS request answered
// by a plain HTTP server.
func isHTTPResponseToHTTPS(err error) bool {
	var uerr *url.Error
	return errors.As(err, &uerr) && strings.Contains(uerr.Err.Error(), "server gave HTTP response to HTTPS client")
}
