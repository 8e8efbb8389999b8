package agent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/utils/ptr"

	"github.com/heartlet/heartlet/internal/config"
	"github.com/heartlet/heartlet/internal/errdefs"
	"github.com/heartlet/heartlet/internal/kubeclient"
	"github.com/heartlet/heartlet/internal/runtime"
	"github.com/heartlet/heartlet/internal/server"
	"github.com/heartlet/heartlet/internal/server/auth"
)

// podStatusGetter is the part of the runtime the kubelet API reads.
type podStatusGetter interface {
	GetPodStatus(ctx context.Context, uid types.UID) (*runtime.PodStatus, error)
	ListPods(ctx context.Context) ([]*runtime.PodStatus, error)
}

// kubeletAPIDeps are what the kubelet API server answers from.
type kubeletAPIDeps struct {
	opts     *config.Options
	kube     kubeclient.Interface // nil in standalone mode
	rt       podStatusGetter
	streams  streamingRuntime // nil leaves out exec, attach, portForward and run
	pods     server.PodLister
	metrics  http.Handler
	probes   http.Handler // /metrics/probes
	checks   []server.HealthCheck
	hostname string
	nodeIPs  []string
	stats    server.StatsHandlers
	journal  server.JournalLookup
	extra    map[string]http.Handler // more handlers behind authn/authz (the node page)
	// servingCert gives the serving certificate at each handshake; nil
	// loads or makes it once.
	servingCert func(*tls.ClientHelloInfo) (*tls.Certificate, error)
}

// newKubeletAPI builds the authenticated HTTPS server on address:port and
// its authenticator (whose Run reloads the client CA file).
func newKubeletAPI(d kubeletAPIDeps) (*server.Server, *auth.Auth, error) {
	cfg := d.opts.Config
	ao := auth.Options{
		NodeName:       d.opts.NodeName,
		Authentication: cfg.Authentication,
		Authorization:  cfg.Authorization,
	}
	if d.kube != nil { // standalone mode leaves both nil interfaces
		ao.TokenReviews = d.kube.AuthenticationV1().TokenReviews()
		ao.SubjectAccessReviews = d.kube.AuthorizationV1().SubjectAccessReviews()
	}
	a, err := auth.Build(ao)
	if err != nil {
		return nil, nil, fmt.Errorf("kubelet API server: %w", err)
	}
	var clientCAs *x509.CertPool
	if f := cfg.Authentication.X509.ClientCAFile; f != "" {
		if clientCAs, err = certutil.NewPool(f); err != nil {
			return nil, nil, fmt.Errorf("kubelet API server: authentication.x509.clientCAFile: %w", err)
		}
	}
	var ips []net.IP
	for _, s := range d.nodeIPs {
		if ip := net.ParseIP(s); ip != nil {
			ips = append(ips, ip)
		}
	}
	host := d.opts.NodeName // the kubelet names its certificate after --hostname-override
	if host == "" {
		host = d.hostname
	}
	tlsCfg, err := server.NewTLSConfig(server.TLSOptions{
		CertFile:       cfg.TLSCertFile,
		KeyFile:        cfg.TLSPrivateKeyFile,
		CertDir:        d.opts.CertDir,
		Hostname:       host,
		IPs:            ips,
		CipherSuites:   cfg.TLSCipherSuites,
		MinVersion:     cfg.TLSMinVersion,
		ClientCAs:      clientCAs,
		GetCertificate: d.servingCert,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("kubelet API server: %w", err)
	}
	var streaming server.Streamer
	if d.streams != nil {
		streaming = &streamer{rt: d.streams, pods: d.pods}
	}
	s := server.NewKubeletAPI(server.KubeletAPIOptions{
		Addr:         net.JoinHostPort(cfg.Address, strconv.Itoa(int(cfg.Port))),
		TLS:          tlsCfg,
		Auth:         a.Filter,
		Pods:         d.pods,
		RunningPods:  func(ctx context.Context) ([]*v1.Pod, error) { return runningPods(ctx, d.rt) },
		Config:       cfg,
		Metrics:      d.metrics,
		ProbeMetrics: d.probes,
		Checks:       d.checks,
		Logs:         logLocator(d.rt, d.pods, cfg.PodLogsDir),
		Streaming:    streaming,
		Debug:        ptr.To(debugOptions(cfg)),
		Stats:        d.stats,
		Journal:      d.journal,
		Extra:        d.extra,
	})
	return s, a, nil
}

// runningPods are the runtime's pods with at least one running container,
// each with its running containers' names and images only, as the
// kubelet's /runningpods/ reports them.
func runningPods(ctx context.Context, rt podStatusGetter) ([]*v1.Pod, error) {
	statuses, err := rt.ListPods(ctx)
	if err != nil {
		return nil, fmt.Errorf("list runtime pods: %w", err)
	}
	return runningPodsFrom(statuses), nil
}

func runningPodsFrom(statuses []*runtime.PodStatus) []*v1.Pod {
	var pods []*v1.Pod
	for _, st := range statuses {
		var ctrs []v1.Container
		for _, c := range st.Containers {
			if c.State == runtime.ContainerRunning {
				ctrs = append(ctrs, v1.Container{Name: c.Name, Image: c.Image})
			}
		}
		if len(ctrs) == 0 {
			continue
		}
		p := &v1.Pod{Spec: v1.PodSpec{Containers: ctrs}}
		p.Name, p.Namespace, p.UID = st.Name, st.Namespace, st.UID
		pods = append(pods, p)
	}
	return pods
}

// logLocator finds container logs: the pod among those heartlet manages,
// the container in its spec, then the newest (or, for previous, the second
// newest) instance of that container in the runtime.
func logLocator(rt podStatusGetter, pods server.PodLister, podLogsDir string) server.LogLocator {
	return func(ctx context.Context, namespace, name, container string, previous bool) (server.LogFile, error) {
		var pod *v1.Pod
		for _, p := range pods() {
			if p.Namespace == namespace && p.Name == name {
				pod = p
				break
			}
		}
		if pod == nil {
			return server.LogFile{}, fmt.Errorf("pod %q does not exist: %w", name, errdefs.ErrNotFound)
		}
		if !hasContainer(pod, container) {
			return server.LogFile{}, fmt.Errorf("container %q not found in pod %q: %w", container, name, errdefs.ErrNotFound)
		}
		st, err := rt.GetPodStatus(ctx, pod.UID)
		if err != nil {
			return server.LogFile{}, fmt.Errorf("pod %q: runtime status: %w", name, err)
		}
		var instances []*runtime.ContainerStatus
		for _, c := range st.Containers {
			if c.Name == container {
				instances = append(instances, c)
			}
		}
		want := 0
		if previous {
			want = 1
		}
		if len(instances) <= want {
			if previous {
				return server.LogFile{}, fmt.Errorf("previous terminated container %q in pod %q not found: %w", container, name, server.ErrBadRequest)
			}
			return server.LogFile{}, fmt.Errorf("container %q in pod %q is waiting to start: %w", container, name, server.ErrBadRequest)
		}
		c := instances[want]
		path := c.LogPath
		if path != "" && !filepath.IsAbs(path) {
			path = filepath.Join(podLogsDir, fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, pod.UID), path)
		}
		if path == "" {
			return server.LogFile{}, fmt.Errorf("container %q in pod %q has no log file: %w", container, name, server.ErrBadRequest)
		}
		id, uid := c.ID, pod.UID
		return server.LogFile{Path: path, Running: func(ctx context.Context) (bool, error) {
			st, err := rt.GetPodStatus(ctx, uid)
			if err != nil {
				return false, fmt.Errorf("runtime status of pod %q: %w", name, err)
			}
			for _, c := range st.Containers {
				if c.ID == id {
					return c.State == runtime.ContainerRunning, nil
				}
			}
			return false, nil // removed
		}}, nil
	}
}

func hasContainer(pod *v1.Pod, name string) bool {
	return containerSpec(pod, name) != nil
}
