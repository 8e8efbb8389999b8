package server

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"log"
	"net/http"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/heartlet/heartlet/internal/metrics"
)

// RunningPodLister returns the pods as the runtime sees them.
type RunningPodLister func(ctx context.Context) ([]*v1.Pod, error)

// KubeletAPIOptions configure the kubelet API server (the HTTPS port).
type KubeletAPIOptions struct {
	// Addr is address:port.
	Addr string
	// TLS is the serving configuration (NewTLSConfig); nil serves plain
	// HTTP, for tests only.
	TLS *tls.Config
	// Auth wraps every handler with authentication and authorization
	// (auth.Auth.Filter); nil lets every request through.
	Auth func(http.Handler) http.Handler
	// Pods are the pods heartlet manages, with their statuses (/pods).
	Pods PodLister
	// RunningPods are the pods with running containers (/runningpods/).
	RunningPods RunningPodLister
	// Config is the effective configuration served by /configz.
	Config any
	// Metrics serves /metrics; nil leaves it out.
	Metrics http.Handler
	// ProbeMetrics serves /metrics/probes; nil leaves it out.
	ProbeMetrics http.Handler
	// Checks are the /healthz checks.
	Checks []HealthCheck
	// Logs finds container log files (/containerLogs); nil leaves it out.
	Logs LogLocator
	// Streaming prepares exec, attach, port-forward and run sessions
	// (/exec, /attach, /portForward, /run); nil leaves them out.
	Streaming Streamer
	// Clock is used by log following; nil is the real clock.
	Clock clock.WithTicker
	// Debug configures /logs/, /debug/pprof/ and /debug/flags/v, and
	// whether /runningpods/ and /containerLogs are served; nil installs no
	// debugging endpoint and serves those two.
	Debug *DebugOptions
	// Stats are /stats/summary, /metrics/resource and /metrics/cadvisor.
	Stats StatsHandlers
	// Journal serves the pods' journals (JournalPath, a debugging
	// endpoint); nil leaves it out.
	Journal JournalLookup
	// Extra are more handlers by pattern (e.g. the node page), behind the
	// same authentication and authorization.
	Extra map[string]http.Handler
}

// NewKubeletAPI returns the kubelet API server: /healthz, /pods,
// /runningpods/, /configz, /metrics, /containerLogs, the streaming
// endpoints (/exec, /attach, /portForward, /run) and the debugging
// endpoints (debug.go) behind authentication and authorization, over TLS.
func NewKubeletAPI(o KubeletAPIOptions) *Server {
	mux := http.NewServeMux()
	installHealthz(mux, o.Checks)
	mux.Handle("GET /pods", podsHandler(o.Pods))
	mux.Handle("GET /runningpods/", debugOnly(o.Debug, runningPodsHandler(o.RunningPods)))
	mux.Handle("GET /configz", configzHandler(o.Config))
	if o.Metrics != nil {
		mux.Handle("GET /metrics", o.Metrics)
	}
	if o.ProbeMetrics != nil {
		mux.Handle("GET /metrics/probes", o.ProbeMetrics)
	}
	installStats(mux, o.Stats)
	if o.Logs != nil {
		clk := o.Clock
		if clk == nil {
			clk = clock.RealClock{}
		}
		h := &logsHandler{locate: o.Logs, clock: clk}
		mux.Handle("/containerLogs/{namespace}/{pod}/{container}", debugOnly(o.Debug, h))
	}
	if o.Debug != nil {
		installDebug(mux, *o.Debug)
	}
	if o.Journal != nil {
		mux.Handle(JournalPath, debugOnly(o.Debug, JournalHandler(o.Journal)))
	}
	for pattern, h := range o.Extra {
		mux.Handle(pattern, h)
	}
	if o.Streaming != nil {
		installStreaming(mux, o.Streaming, func(h http.Handler) http.Handler { return debugOnly(o.Debug, h) })
	}
	var handler http.Handler = mux
	if o.Auth != nil {
		handler = o.Auth(mux)
	}
	handler = instrument(handler, metrics.ServerTypeReadWrite, clock.RealClock{})
	s := &Server{name: "kubelet API server", addr: o.Addr, handler: logRequests(handler, clock.RealClock{}), tls: o.TLS}
	return s
}

// runningPodsHandler serves the runtime's pods as a v1 PodList.
func runningPodsHandler(list RunningPodLister) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if list == nil {
			http.NotFound(w, r)
			return
		}
		pods, err := list(r.Context())
		if err != nil {
			klog.FromContext(r.Context()).Error(err, "Failed to list running pods")
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		podsHandler(func() []*v1.Pod { return pods }).ServeHTTP(w, r)
	})
}

// configzHandler serves the configuration wrapped as the kubelet does:
// {"kubeletconfig": {...}}.
func configzHandler(cfg any) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, err := json.Marshal(map[string]any{"kubeletconfig": cfg})
		if err != nil {
			http.Error(w, "internal server error: encode configuration", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(data)
	})
}

// serverErrorWriter sends net/http's own messages (TLS handshake errors
// of clients) to the log at verbosity 4.
type serverErrorWriter struct{ logger klog.Logger }

func (w serverErrorWriter) Write(p []byte) (int, error) {
	w.logger.V(4).Info("HTTP server error", "msg", strings.TrimSpace(string(p)))
	return len(p), nil
}

func newServerErrorLog(logger klog.Logger) *log.Logger {
	return log.New(serverErrorWriter{logger}, "", 0)
}
