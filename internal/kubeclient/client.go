// Package kubeclient builds heartlet's clients for the Kubernetes API server
// from a kubeconfig file, checks at start that the server answers and
// accepts heartlet's credentials, and records events the way a kubelet does.
package kubeclient

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/connrotation"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/heartlet/heartlet/internal/version"
)

// Content types heartlet speaks with the API server.
const (
	// ContentTypeProtobuf is the Kubernetes protobuf encoding, the default.
	ContentTypeProtobuf = "application/vnd.kubernetes.protobuf"
	// ContentTypeJSON is plain JSON.
	ContentTypeJSON = "application/json"
)

// Defaults, as the upstream kubelet's configuration defaults.
const (
	// DefaultQPS is kubeAPIQPS's default.
	DefaultQPS = 50
	// DefaultBurst is kubeAPIBurst's default.
	DefaultBurst = 100
	// DefaultPreflightTimeout bounds the requests Load makes to check the
	// server.
	DefaultPreflightTimeout = 10 * time.Second
	// DefaultHeartbeatTimeout bounds every request of the heartbeat client.
	DefaultHeartbeatTimeout = 10 * time.Second
)

// HTTP/2 connection health checks: when a connection has received nothing
// for the read-idle timeout the client sends a PING, and when no answer
// comes within the ping timeout it closes the connection, so requests and
// watches move to a new one instead of hanging on a dead peer. client-go's
// transport turns them on for every TLS client with these values unless the
// environment variables below override them.
const (
	DefaultHTTP2ReadIdleTimeout = 30 * time.Second
	DefaultHTTP2PingTimeout     = 15 * time.Second

	envHTTP2ReadIdle = "HTTP2_READ_IDLE_TIMEOUT_SECONDS"
	envHTTP2Ping     = "HTTP2_PING_TIMEOUT_SECONDS"
	envDisableHTTP2  = "DISABLE_HTTP2"
)

// Options says how to reach the API server.
type Options struct {
	// Kubeconfig is the path of the kubeconfig file (required).
	Kubeconfig string
	// QPS and Burst limit the main client's request rate (kubeAPIQPS,
	// kubeAPIBurst); 0 means the default (50 and 100), a negative QPS
	// disables client-side rate limiting.
	QPS   float32
	Burst int
	// EventQPS and EventBurst limit the event client's request rate
	// (eventRecordQPS, eventBurst); EventQPS 0 means no limit, as the
	// kubelet configuration documents for eventRecordQPS. A positive
	// EventQPS with EventBurst 0 gets client-go's default burst.
	EventQPS   int32
	EventBurst int32
	// UserAgent is sent with every request; "" means heartlet's own.
	UserAgent string
	// ContentType is the encoding of request bodies (contentType in the
	// kubelet configuration); "" means protobuf.
	ContentType string
	// PreflightTimeout bounds Load's checks; 0 means 10 s.
	PreflightTimeout time.Duration
	// HeartbeatTimeout bounds each request of Client.Heartbeat; 0 means 10 s.
	HeartbeatTimeout time.Duration
	// ClientCertificate, when set, is asked for the client certificate at
	// every TLS handshake instead of the kubeconfig's (a rotating
	// certificate); nil or a nil result presents none. Call
	// Client.CloseAllConns when it changes so new connections use it.
	ClientCertificate func() *tls.Certificate
}

// Client holds heartlet's API clients and what Load learned about the
// server.
type Client struct {
	// Kube is the main clientset, rate-limited by QPS and Burst.
	Kube Interface
	// Events is the clientset events are written with, rate-limited by
	// EventQPS and EventBurst instead of QPS and Burst, as upstream's
	// separate event client.
	Events Interface
	// Heartbeat is a clientset without client-side rate limiting and with a
	// per-request timeout, for Node status and Lease renewals, so that a
	// burst of other requests never delays them.
	Heartbeat Interface
	// Rest is the configuration Kube was built from.
	Rest *rest.Config
	// Server is the API server's URL.
	Server string
	// Identity is the user the server authenticated heartlet as, e.g.
	// "system:node:worker-1".
	Identity string
	// ServerVersion is the server's gitVersion, e.g. "v1.37.2".
	ServerVersion string
	// Path is the kubeconfig file.
	Path string
	// Reach follows whether the API server accepts connections, from the
	// dials of all the clients above.
	Reach *Reachability

	dialer *connrotation.Dialer
}

// CloseAllConns closes every connection of Kube and Heartbeat; the next
// request dials a new one. Use it when heartbeats keep failing: a connection
// the peer silently dropped would otherwise linger until the HTTP/2 health
// check notices.
func (c *Client) CloseAllConns() {
	if c != nil && c.dialer != nil {
		c.dialer.CloseAll()
	}
}

// Load reads the kubeconfig, builds the clients, and checks that the server
// answers and accepts heartlet's credentials (GET /version and a
// SelfSubjectReview, which also tells heartlet who it is). Failures name the
// kubeconfig, the server and the identity and wrap one of ErrUnreachable,
// ErrTLS, ErrUnauthorized, ErrForbidden.
func Load(ctx context.Context, opts Options) (*Client, error) {
	logger := klog.FromContext(ctx)
	cfg, err := restConfig(opts)
	if err != nil {
		return nil, err
	}
	warnHTTP2Health(logger, os.Getenv)

	// A dialer of heartlet's own: every transport client-go builds for a
	// config with a custom dialer goes through its TLS transport cache and
	// gets the HTTP/2 health checks, including when the credentials come
	// from an exec plugin or from certificate files that rotate. It also
	// lets CloseAllConns drop every connection.
	reach := NewReachability(clock.RealClock{})
	dialer := connrotation.NewDialer(reach.wrapDial((&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext))
	identity := credentialIdentity(cfg)
	if opts.ClientCertificate != nil {
		if err := rotatingTransport(cfg, opts.ClientCertificate, dialer.DialContext); err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %w", opts.Kubeconfig, err)
		}
	} else {
		cfg.Dial = dialer.DialContext
	}

	kube, err := NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: building client for %s: %w", opts.Kubeconfig, cfg.Host, err)
	}
	hb := rest.CopyConfig(cfg)
	hb.QPS = -1
	hb.Timeout = opts.HeartbeatTimeout
	if hb.Timeout <= 0 {
		hb.Timeout = DefaultHeartbeatTimeout
	}
	heartbeat, err := NewForConfig(hb)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: building heartbeat client for %s: %w", opts.Kubeconfig, cfg.Host, err)
	}

	ev := rest.CopyConfig(cfg)
	ev.QPS, ev.Burst = -1, 0
	if opts.EventQPS > 0 {
		ev.QPS, ev.Burst = float32(opts.EventQPS), int(opts.EventBurst)
	}
	events, err := NewForConfig(ev)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: building event client for %s: %w", opts.Kubeconfig, cfg.Host, err)
	}

	c := &Client{
		Kube:      kube,
		Events:    events,
		Heartbeat: heartbeat,
		Rest:      cfg,
		Server:    cfg.Host,
		Identity:  identity,
		Path:      opts.Kubeconfig,
		Reach:     reach,
		dialer:    dialer,
	}
	timeout := opts.PreflightTimeout
	if timeout <= 0 {
		timeout = DefaultPreflightTimeout
	}
	if err := c.preflight(ctx, timeout); err != nil {
		return nil, err
	}
	logger.Info("Connected to the API server", "server", c.Server, "serverVersion", c.ServerVersion, "identity", c.Identity)
	return c, nil
}

// rotatingTransport gives cfg a transport of its own whose TLS handshakes
// present current's certificate, as upstream's kubelet does for a rotating
// client certificate; the server's CA and name stay the kubeconfig's.
func rotatingTransport(cfg *rest.Config, current func() *tls.Certificate, dial func(ctx context.Context, network, address string) (net.Conn, error)) error {
	tlsCfg, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return fmt.Errorf("TLS configuration: %w", err)
	}
	if tlsCfg == nil {
		return fmt.Errorf("a rotating client certificate needs a TLS server, not %s", cfg.Host)
	}
	tlsCfg.Certificates = nil
	tlsCfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		if c := current(); c != nil {
			return c, nil
		}
		// No certificate: the handshake goes on without one.
		return &tls.Certificate{}, nil
	}
	cfg.Transport = utilnet.SetTransportDefaults(&http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		TLSHandshakeTimeout: 10 * time.Second,
		TLSClientConfig:     tlsCfg,
		MaxIdleConnsPerHost: 25,
		DialContext:         dial,
	})
	// The transport holds the TLS settings; client-go refuses both.
	cfg.TLSClientConfig = rest.TLSClientConfig{}
	return nil
}

// restConfig loads and checks the kubeconfig and applies opts.
func restConfig(opts Options) (*rest.Config, error) {
	path := opts.Kubeconfig
	if path == "" {
		return nil, errors.New("kubeconfig: no path given")
	}
	raw, err := clientcmd.LoadFromFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, os.ErrPermission) {
			return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
		}
		return nil, fmt.Errorf("kubeconfig %s: parsing: %w", path, err)
	}
	if err := checkKubeconfig(raw); err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	if err := clientcmd.ResolveLocalPaths(raw); err != nil {
		return nil, fmt.Errorf("kubeconfig %s: resolving relative paths: %w", path, err)
	}
	cfg, err := clientcmd.NewNonInteractiveClientConfig(*raw, raw.CurrentContext, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}

	cfg.QPS = opts.QPS
	if cfg.QPS == 0 {
		cfg.QPS = DefaultQPS
	}
	cfg.Burst = opts.Burst
	if cfg.Burst <= 0 {
		cfg.Burst = DefaultBurst
	}
	cfg.UserAgent = opts.UserAgent
	if cfg.UserAgent == "" {
		cfg.UserAgent = version.UserAgent()
	}
	switch opts.ContentType {
	case "", ContentTypeProtobuf:
		cfg.ContentType = ContentTypeProtobuf
		cfg.AcceptContentTypes = ContentTypeProtobuf + "," + ContentTypeJSON
	case ContentTypeJSON:
		cfg.ContentType = ContentTypeJSON
		cfg.AcceptContentTypes = ContentTypeJSON
	default:
		return nil, fmt.Errorf("kubeconfig %s: content type %q: want %q or %q", path, opts.ContentType, ContentTypeProtobuf, ContentTypeJSON)
	}
	return cfg, nil
}

// checkKubeconfig reports what clientcmd would otherwise turn into a vague
// "no configuration has been provided".
func checkKubeconfig(c *clientcmdapi.Config) error {
	if c.CurrentContext == "" {
		return errors.New("no current-context set")
	}
	kctx, ok := c.Contexts[c.CurrentContext]
	if !ok || kctx == nil {
		return fmt.Errorf("current-context %q is not defined in contexts", c.CurrentContext)
	}
	if kctx.Cluster == "" {
		return fmt.Errorf("context %q names no cluster", c.CurrentContext)
	}
	cl, ok := c.Clusters[kctx.Cluster]
	if !ok || cl == nil {
		return fmt.Errorf("context %q names cluster %q, which is not defined in clusters", c.CurrentContext, kctx.Cluster)
	}
	if cl.Server == "" {
		return fmt.Errorf("cluster %q has no server", kctx.Cluster)
	}
	if kctx.AuthInfo != "" {
		if u, ok := c.AuthInfos[kctx.AuthInfo]; !ok || u == nil {
			return fmt.Errorf("context %q names user %q, which is not defined in users", c.CurrentContext, kctx.AuthInfo)
		}
	}
	return nil
}

// HTTP2Health returns the HTTP/2 health check timeouts client-go's
// transport uses given the environment; zero means the check is off.
// disabled is true when HTTP/2 itself is turned off.
func HTTP2Health(getenv func(string) string) (readIdle, ping time.Duration, disabled bool) {
	if getenv(envDisableHTTP2) != "" {
		return 0, 0, true
	}
	readIdle = envSeconds(getenv, envHTTP2ReadIdle, DefaultHTTP2ReadIdleTimeout)
	ping = envSeconds(getenv, envHTTP2Ping, DefaultHTTP2PingTimeout)
	if ping == 0 {
		// The HTTP/2 transport replaces a zero ping timeout with its own
		// default, which is the same 15 s.
		ping = DefaultHTTP2PingTimeout
	}
	return readIdle, ping, false
}

func envSeconds(getenv func(string) string, name string, def time.Duration) time.Duration {
	s := getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return def
	}
	if n < 0 {
		n = 0
	}
	return time.Duration(n) * time.Second
}

// warnHTTP2Health says so when the environment turned the health checks
// off: a connection to a vanished server then hangs until TCP gives up.
func warnHTTP2Health(logger klog.Logger, getenv func(string) string) {
	readIdle, ping, disabled := HTTP2Health(getenv)
	switch {
	case disabled:
		logger.Info("Warning: HTTP/2 is disabled by the environment; dead API server connections are noticed only by TCP", "variable", envDisableHTTP2)
	case readIdle == 0:
		logger.Info("Warning: HTTP/2 connection health checks are disabled by the environment", "variable", envHTTP2ReadIdle)
	default:
		logger.V(4).Info("HTTP/2 connection health checks", "readIdleTimeout", readIdle, "pingTimeout", ping)
	}
}
