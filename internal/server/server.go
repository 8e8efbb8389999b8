// Package server serves heartlet's plain-HTTP endpoints: the healthz port
// and the read-only port (pods, metrics, healthz). It depends only on
// function types, never on the components that answer them.
package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	kubeletmetrics "github.com/heartlet/heartlet/internal/metrics"
)

// shutdownTimeout bounds the graceful shutdown once the context is done.
const shutdownTimeout = 5 * time.Second

// PodLister returns the pods to report, with their statuses.
type PodLister func() []*v1.Pod

// HealthCheck is one named health check; Check returns nil when healthy.
type HealthCheck struct {
	Name  string
	Check func() error
}

// Server is one HTTP server on one address.
type Server struct {
	name    string // "healthz server", "read-only server": prefixes errors
	addr    string
	handler http.Handler
	mux     *http.ServeMux
	tls     *tls.Config // serve HTTPS when set

	mu sync.Mutex
	ln net.Listener
}

// NewHealthz returns the healthz server: /healthz and /healthz/<name> over
// checks (a ping check when none is given). Nothing listens until Listen
// or Run.
func NewHealthz(addr string, checks ...HealthCheck) *Server {
	mux := http.NewServeMux()
	installHealthz(mux, checks)
	return newServer("healthz server", addr, mux)
}

// NewReadOnly returns the read-only server: /pods (a v1 PodList from
// pods), /metrics (the given handler, left out when nil) and the healthz
// endpoints over checks. Nothing listens until Listen or Run.
func NewReadOnly(addr string, pods PodLister, metrics http.Handler, checks ...HealthCheck) *Server {
	mux := http.NewServeMux()
	installHealthz(mux, checks)
	mux.Handle("GET /pods", podsHandler(pods))
	if metrics != nil {
		mux.Handle("GET /metrics", metrics)
	}
	s := newServer("read-only server", addr, mux)
	s.handler = logRequests(instrument(mux, kubeletmetrics.ServerTypeReadOnly, clock.RealClock{}), clock.RealClock{})
	return s
}

func newServer(name, addr string, mux *http.ServeMux) *Server {
	return &Server{name: name, addr: addr, handler: logRequests(mux, clock.RealClock{}), mux: mux}
}

// Handle adds a handler for pattern (as http.ServeMux patterns), e.g.
// "GET /metrics/probes".
func (s *Server) Handle(pattern string, h http.Handler) {
	s.mux.Handle(pattern, h)
}

// Handler returns the server's handler, for serving it elsewhere.
func (s *Server) Handler() http.Handler {
	return s.handler
}

// Listen binds the server's address. It is idempotent; Run calls it when
// it has not been called. The error names the server and the address.
func (s *Server) Listen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		return nil
	}
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("%s: %w", s.name, err)
	}
	s.ln = ln
	return nil
}

// Addr returns the bound address (useful with port 0), or "" before
// Listen.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Run listens if needed and serves until ctx is done, then shuts down
// gracefully, waiting up to 5 seconds for requests in flight. It returns
// nil after a clean shutdown.
func (s *Server) Run(ctx context.Context) error {
	if err := s.Listen(); err != nil {
		return err
	}
	s.mu.Lock()
	ln := s.ln
	s.mu.Unlock()
	if s.tls != nil {
		ln = tls.NewListener(ln, s.tls)
	}

	logger := klog.FromContext(ctx).WithValues("server", s.name)
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       90 * time.Second,
		MaxHeaderBytes:    1 << 20,
		BaseContext:       func(net.Listener) context.Context { return klog.NewContext(ctx, logger) },
		ErrorLog:          newServerErrorLog(logger),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	logger.Info("Serving HTTP", "address", ln.Addr().String())

	select {
	case err := <-errc:
		return fmt.Errorf("%s: serve %s: %w", s.name, ln.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		return fmt.Errorf("%s: serve %s: %w", s.name, ln.Addr(), serr)
	}
	if err != nil {
		srv.Close()
		return fmt.Errorf("%s: shutdown: %w", s.name, err)
	}
	logger.Info("Stopped serving HTTP")
	return nil
}

// podsHandler serves the pods as a v1 PodList.
func podsHandler(pods PodLister) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		list := v1.PodList{
			TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"},
			Items:    []v1.Pod{},
		}
		if pods != nil {
			for _, p := range pods() {
				if p != nil {
					list.Items = append(list.Items, *p)
				}
			}
		}
		data, err := json.Marshal(&list)
		if err != nil {
			klog.FromContext(r.Context()).Error(err, "Failed to encode pod list")
			http.Error(w, "internal server error: encode pod list", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(data)
	})
}

// logRequests logs every request at verbosity 4.
func logRequests(next http.Handler, clk clock.PassiveClock) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		logger := klog.FromContext(r.Context())
		if !logger.V(4).Enabled() {
			next.ServeHTTP(w, r)
			return
		}
		start := clk.Now()
		rw := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rw, r)
		logger.V(4).Info("HTTP request", "verb", r.Method, "URI", r.RequestURI,
			"status", rw.status, "latency", clk.Since(start), "userAgent", r.UserAgent(), "srcIP", r.RemoteAddr)
	})
}

// statusRecorder remembers the response status code.
type statusRecorder struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
}

func (r *statusRecorder) WriteHeader(code int) {
	if !r.wroteHeader {
		r.status, r.wroteHeader = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

// Hijack hands the connection over for upgraded (streaming) requests,
// which the proxies of the streaming endpoints need; the status is 101.
func (r *statusRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(r.ResponseWriter).Hijack()
	if err == nil && !r.wroteHeader {
		r.status, r.wroteHeader = http.StatusSwitchingProtocols, true
	}
	return conn, rw, err
}

// Flush sends buffered data to the client.
func (r *statusRecorder) Flush() {
	_ = http.NewResponseController(r.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter {
	return r.ResponseWriter
}
