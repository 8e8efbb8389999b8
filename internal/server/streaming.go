package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/heartlet/heartlet/internal/errdefs"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/proxy"
	"k8s.io/klog/v2"
	"k8s.io/streaming/pkg/httpstream/wsstream"
)

// StreamTarget names what a streaming request is for: a pod, optionally
// by UID too, and for exec, attach and run a container of it.
type StreamTarget struct {
	Namespace string
	Pod       string
	// UID is empty unless the request names it; then it must match.
	UID       types.UID
	Container string // empty for port forwarding
}

// StreamOptions are the streams of an exec or attach session.
type StreamOptions struct {
	Stdin, Stdout, Stderr, TTY bool
}

// Streamer prepares streaming sessions with the container runtime. The
// URLs it returns are the runtime's stream server's, which the kubelet API
// proxies the client's upgraded connection to. Errors wrapping errdefs.ErrNotFound
// are answered 404, ErrBadRequest 400, others 500.
type Streamer interface {
	Exec(ctx context.Context, t StreamTarget, cmd []string, o StreamOptions) (*url.URL, error)
	// Attach uses the container's own TTY setting, not o.TTY.
	Attach(ctx context.Context, t StreamTarget, o StreamOptions) (*url.URL, error)
	// PortForward gets ports only for the plain WebSocket protocol; SPDY
	// clients name them per stream.
	PortForward(ctx context.Context, t StreamTarget, ports []int32) (*url.URL, error)
	// Run runs cmd to completion and returns its combined stdout and
	// stderr; a command that exits non-zero is an error.
	Run(ctx context.Context, t StreamTarget, cmd []string) ([]byte, error)
}

// Query parameters of the streaming endpoints, as the API server sends
// them to the kubelet (k8s.io/api/core/v1 ExecStdinParam etc.; its own
// clients say stdin, stdout, stderr).
const (
	paramCommand = v1.ExecCommandParam // "command"
	paramStdin   = v1.ExecStdinParam   // "input"
	paramStdout  = v1.ExecStdoutParam  // "output"
	paramStderr  = v1.ExecStderrParam  // "error"
	paramTTY     = v1.ExecTTYParam     // "tty"
	paramPort    = v1.PortHeader       // "port"
	paramRunCmd  = "cmd"
)

// ParseStreamOptions reads the input, output, error and tty query
// parameters of exec and attach as the kubelet does: "1" is true, anything
// else false; stderr is dropped with a TTY (the terminal merges it into
// stdout); at least one stream is required.
func ParseStreamOptions(q url.Values) (StreamOptions, error) {
	o := StreamOptions{
		Stdin:  q.Get(paramStdin) == "1",
		Stdout: q.Get(paramStdout) == "1",
		Stderr: q.Get(paramStderr) == "1",
		TTY:    q.Get(paramTTY) == "1",
	}
	if o.TTY {
		o.Stderr = false
	}
	if !o.Stdin && !o.Stdout && !o.Stderr {
		return StreamOptions{}, errors.New("you must specify at least 1 of stdin, stdout, stderr")
	}
	return o, nil
}

// ParseExecCommand reads the command of exec: one "command" parameter
// per argument, at least one.
func ParseExecCommand(q url.Values) ([]string, error) {
	cmd := q[paramCommand]
	if len(cmd) == 0 {
		return nil, errors.New("query parameter \"command\" is required")
	}
	return cmd, nil
}

// ParseRunCommand reads the command of /run: for historical reasons one
// "cmd" parameter, split at spaces, as the kubelet does.
func ParseRunCommand(q url.Values) ([]string, error) {
	raw := q.Get(paramRunCmd)
	if strings.TrimSpace(raw) == "" {
		return nil, errors.New("query parameter \"cmd\" is required")
	}
	return strings.Split(raw, " "), nil
}

// ParsePorts reads the "port" parameters of a plain WebSocket port
// forward as the kubelet does: at least one parameter, each a
// comma-separated list of ports in 1..65535 (the API server joins the
// ports of a request into one).
func ParsePorts(q url.Values) ([]int32, error) {
	raw := q[paramPort]
	if len(raw) == 0 {
		return nil, fmt.Errorf("query parameter %q is required", paramPort)
	}
	var ports []int32
	for _, list := range raw {
		if list == "" {
			return nil, fmt.Errorf("query parameter %q cannot be empty", paramPort)
		}
		for _, s := range strings.Split(list, ",") {
			p, err := strconv.ParseUint(s, 10, 16)
			if err != nil {
				return nil, fmt.Errorf("unable to parse %q as a port: %w", s, err)
			}
			if p < 1 {
				return nil, fmt.Errorf("port %q must be > 0", s)
			}
			ports = append(ports, int32(p))
		}
	}
	return ports, nil
}

// streamTarget is the target named by the request's path.
func streamTarget(r *http.Request) StreamTarget {
	return StreamTarget{
		Namespace: r.PathValue("namespace"),
		Pod:       r.PathValue("pod"),
		UID:       types.UID(r.PathValue("uid")),
		Container: r.PathValue("container"),
	}
}

// installStreaming adds /exec, /attach, /portForward (GET and POST) and
// /run (POST) with and without the pod UID in the path, each handler
// wrapped by wrap (which turns them off with the debugging handlers).
func installStreaming(mux *http.ServeMux, s Streamer, wrap func(http.Handler) http.Handler) {
	h := &streamHandler{s: s}
	handle := func(pattern string, f http.HandlerFunc) { mux.Handle(pattern, wrap(f)) }
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		for _, p := range []string{"/{namespace}/{pod}/{container}", "/{namespace}/{pod}/{uid}/{container}"} {
			handle(method+" /exec"+p, h.exec)
			handle(method+" /attach"+p, h.attach)
		}
		for _, p := range []string{"/{namespace}/{pod}", "/{namespace}/{pod}/{uid}"} {
			handle(method+" /portForward"+p, h.portForward)
		}
	}
	handle("POST /run/{namespace}/{pod}/{container}", h.run)
	handle("POST /run/{namespace}/{pod}/{uid}/{container}", h.run)
}

type streamHandler struct{ s Streamer }

// streamLogger is the request's logger with the target's keys.
func streamLogger(r *http.Request, t StreamTarget) klog.Logger {
	logger := klog.FromContext(r.Context()).WithValues("pod", klog.KRef(t.Namespace, t.Pod))
	if t.UID != "" {
		logger = logger.WithValues("podUID", t.UID)
	}
	if t.Container != "" {
		logger = logger.WithValues("container", t.Container)
	}
	return logger
}

// streamProtocol names the protocol a client asks to upgrade to, for logs.
func streamProtocol(r *http.Request) (protocol string, subprotocols []string) {
	switch {
	case wsstream.IsWebSocketRequest(r):
		return "websocket", r.Header.Values("Sec-Websocket-Protocol")
	case r.Header.Get("Upgrade") != "":
		return r.Header.Get("Upgrade"), r.Header.Values("X-Stream-Protocol-Version")
	}
	return "none", nil
}

func (h *streamHandler) exec(w http.ResponseWriter, r *http.Request) {
	t := streamTarget(r)
	logger := streamLogger(r, t)
	opts, err := ParseStreamOptions(r.URL.Query())
	if err != nil {
		writeStreamError(logger, w, r, "exec", &paramError{err})
		return
	}
	cmd, err := ParseExecCommand(r.URL.Query())
	if err != nil {
		writeStreamError(logger, w, r, "exec", &paramError{err})
		return
	}
	logStream(logger, r, "exec", "stdin", opts.Stdin, "stdout", opts.Stdout, "stderr", opts.Stderr, "tty", opts.TTY)
	// Commands may carry secrets: only at a debugging verbosity.
	logger.V(4).Info("Exec command", "command", cmd)
	u, err := h.s.Exec(r.Context(), t, cmd, opts)
	if err != nil {
		writeStreamError(logger, w, r, "exec", err)
		return
	}
	proxyRemoteCommand(klog.NewContext(r.Context(), logger), w, r, "exec", u, opts)
}

func (h *streamHandler) attach(w http.ResponseWriter, r *http.Request) {
	t := streamTarget(r)
	logger := streamLogger(r, t)
	opts, err := ParseStreamOptions(r.URL.Query())
	if err != nil {
		writeStreamError(logger, w, r, "attach", &paramError{err})
		return
	}
	logStream(logger, r, "attach", "stdin", opts.Stdin, "stdout", opts.Stdout, "stderr", opts.Stderr, "tty", opts.TTY)
	u, err := h.s.Attach(r.Context(), t, opts)
	if err != nil {
		writeStreamError(logger, w, r, "attach", err)
		return
	}
	proxyRemoteCommand(klog.NewContext(r.Context(), logger), w, r, "attach", u, opts)
}

func (h *streamHandler) portForward(w http.ResponseWriter, r *http.Request) {
	t := streamTarget(r)
	logger := streamLogger(r, t)
	// WebSocket tunneling carries SPDY inside WebSocket: ports come per
	// stream as with SPDY. The plain WebSocket protocol names them in the
	// query.
	tunnel := wsstream.IsWebSocketRequestWithTunnelingProtocol(r)
	var ports []int32
	if !tunnel && wsstream.IsWebSocketRequest(r) {
		var err error
		if ports, err = ParsePorts(r.URL.Query()); err != nil {
			writeStreamError(logger, w, r, "portForward", &paramError{err})
			return
		}
	}
	logStream(logger, r, "portForward", "ports", ports)
	u, err := h.s.PortForward(r.Context(), t, ports)
	if err != nil {
		writeStreamError(logger, w, r, "portForward", err)
		return
	}
	ctx := klog.NewContext(r.Context(), logger)
	if tunnel {
		logger.V(4).Info("Tunneling WebSocket to the runtime's SPDY stream server", "url", u.Redacted())
		tunnelPortForward(ctx, w, r, u)
		return
	}
	logger.V(4).Info("Proxying to the runtime's stream server", "url", u.Redacted())
	upgradeProxy(u).ServeHTTP(w, r.WithContext(ctx))
}

func (h *streamHandler) run(w http.ResponseWriter, r *http.Request) {
	t := streamTarget(r)
	logger := streamLogger(r, t)
	cmd, err := ParseRunCommand(r.URL.Query())
	if err != nil {
		writeStreamError(logger, w, r, "run", &paramError{err})
		return
	}
	logger.V(2).Info("Run in container")
	logger.V(4).Info("Run command", "command", cmd)
	out, err := h.s.Run(r.Context(), t, cmd)
	if err != nil {
		writeStreamError(logger, w, r, "run", err)
		return
	}
	// The kubelet labels the raw output JSON.
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(out); err != nil {
		logger.V(4).Info("Failed to write the run output", "err", err)
	}
}

// logStream logs a streaming request at V(2) with its protocol.
func logStream(logger klog.Logger, r *http.Request, verb string, kv ...any) {
	proto, sub := streamProtocol(r)
	logger.V(2).Info("Streaming request", append([]any{"verb", verb, "protocol", proto, "subprotocols", sub}, kv...)...)
}

// writeStreamError answers a request that failed before any upgrade:
// parse errors and ErrBadRequest 400, errdefs.ErrNotFound 404, the
// runtime's stream server refusing to upgrade its status code (see
// runtimeUpgradeError), others 500. Server errors are logged as errors.
func writeStreamError(logger klog.Logger, w http.ResponseWriter, r *http.Request, verb string, err error) {
	code := http.StatusInternalServerError
	var perr *paramError
	var uerr *runtimeUpgradeError
	switch {
	case errors.As(err, &perr), errors.Is(err, ErrBadRequest):
		code = http.StatusBadRequest
	case errors.Is(err, errdefs.ErrNotFound):
		code = http.StatusNotFound
	case errors.As(err, &uerr):
		code = uerr.code()
	}
	if code >= http.StatusInternalServerError {
		logger.Error(err, "Streaming request failed", "verb", verb)
	} else {
		logger.V(2).Info("Streaming request rejected", "verb", verb, "status", code, "err", err)
	}
	logger.V(4).Info("Failed streaming request", "verb", verb, "method", r.Method, "URI", r.RequestURI)
	if wsstream.IsWebSocketRequest(r) {
		writeStatusError(logger, w, code, err)
		return
	}
	http.Error(w, err.Error(), code)
}

// writeStatusError answers a failed WebSocket handshake with err as a
// JSON Status, as client-go's WebSocket clients read the body of a failed
// handshake (plain text that parses as YAML, such as "a: b", would reach
// them as an empty Status).
func writeStatusError(logger klog.Logger, w http.ResponseWriter, code int, err error) {
	status := metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure,
		Message:  err.Error(),
		Code:     int32(code),
	}
	switch code {
	case http.StatusBadRequest:
		status.Reason = metav1.StatusReasonBadRequest
	case http.StatusNotFound:
		status.Reason = metav1.StatusReasonNotFound
	case http.StatusInternalServerError:
		status.Reason = metav1.StatusReasonInternalError
	}
	body, merr := json.Marshal(status)
	if merr != nil {
		http.Error(w, err.Error(), code)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	if _, werr := w.Write(body); werr != nil {
		logger.V(4).Info("Failed to write the error", "err", werr)
	}
}

// proxyRemoteCommand proxies an exec or attach session to the runtime's
// stream server at u. A WebSocket client of the v5 protocol
// (v5.channel.k8s.io) is served here and its session run as a SPDY
// client of the runtime (translateRemoteCommand), as every CRI stream
// server speaks SPDY; SPDY and older WebSocket protocols pass through as
// they are.
func proxyRemoteCommand(ctx context.Context, w http.ResponseWriter, r *http.Request, verb string, u *url.URL, o StreamOptions) {
	logger := klog.FromContext(ctx)
	r = r.WithContext(ctx)
	if wsstream.IsWebSocketRequestWithStreamCloseProtocol(r) {
		logger.V(4).Info("Translating WebSocket to the runtime's SPDY stream server", "url", u.Redacted())
		translateRemoteCommand(ctx, w, r, verb, u, o)
		return
	}
	logger.V(4).Info("Proxying to the runtime's stream server", "url", u.Redacted())
	upgradeProxy(u).ServeHTTP(w, r)
}

// upgradeProxy proxies an upgrade request to u without following
// redirects; a request that does not ask for an upgrade is refused (400).
func upgradeProxy(u *url.URL) *proxy.UpgradeAwareHandler {
	return proxy.NewUpgradeAwareHandler(u, nil, false, true, proxyResponder{})
}

// proxyResponder answers errors of the proxy to the stream server.
type proxyResponder struct{}

// API status errors keep their code: a request that does not ask for an
// upgrade is a bad request.
func (proxyResponder) Error(w http.ResponseWriter, r *http.Request, err error) {
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Code >= 400 && status.Status().Code < 500 {
		klog.FromContext(r.Context()).V(2).Info("Streaming request rejected", "err", err)
		http.Error(w, err.Error(), int(status.Status().Code))
		return
	}
	klog.FromContext(r.Context()).Error(err, "Error while proxying to the runtime's stream server")
	http.Error(w, err.Error(), http.StatusInternalServerError)
}

// paramError marks an invalid query parameter.
type paramError struct{ err error }

func (e *paramError) Error() string { return e.err.Error() }
func (e *paramError) Unwrap() error { return e.err }
