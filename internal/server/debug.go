package server

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/pprof"
	"os"
	"strconv"
	"strings"

	"k8s.io/klog/v2"
)

// DefaultNodeLogDir is the directory /logs/ serves, fixed as upstream's.
const DefaultNodeLogDir = "/var/log"

// DebugOptions configure the kubelet API's debugging endpoints, as the
// KubeletConfiguration's fields of the same names.
type DebugOptions struct {
	// EnableDebuggingHandlers gates all of them; without it /logs/ and
	// /debug/pprof/ answer 405 "Debug endpoints are disabled.".
	EnableDebuggingHandlers bool
	// EnableSystemLogHandler serves LogDir under /logs/.
	EnableSystemLogHandler bool
	// LogDir is the node's log directory; empty is DefaultNodeLogDir.
	LogDir string
	// EnableProfilingHandler serves Go's profiles under /debug/pprof/.
	EnableProfilingHandler bool
	// EnableContentionProfiling asks for block profiles (with profiling);
	// the caller sets the process's block profile rate (ContentionProfiling).
	EnableContentionProfiling bool
	// EnableDebugFlagsHandler serves PUT /debug/flags/v, which sets the
	// log verbosity.
	EnableDebugFlagsHandler bool
}

// installDebug registers /logs/, /debug/pprof/ and /debug/flags/v on mux
// as o asks, or the handlers that say they are disabled.
func installDebug(mux *http.ServeMux, o DebugOptions) {
	if !o.EnableDebuggingHandlers {
		h := disabled(debugDisabled)
		mux.Handle("/logs/", h)
		mux.Handle("/debug/pprof/", h)
		return
	}
	if o.EnableSystemLogHandler {
		dir := o.LogDir
		if dir == "" {
			dir = DefaultNodeLogDir
		}
		mux.Handle("GET /logs/", http.StripPrefix("/logs", nodeLogs(dir)))
	} else {
		mux.Handle("/logs/", disabled("logs endpoint is disabled."))
	}
	if o.EnableProfilingHandler {
		mux.HandleFunc("GET /debug/pprof/", profile)
	} else {
		mux.Handle("/debug/pprof/", disabled("profiling endpoint is disabled."))
	}
	if o.EnableDebugFlagsHandler {
		mux.HandleFunc("/debug/flags/v", setVerbosity)
	} else {
		mux.Handle("/debug/flags/v", disabled("flags endpoint is disabled."))
	}
}

// ContentionProfiling reports whether o asks for block profiles: the
// profiles are served and contention profiling is on.
func (o DebugOptions) ContentionProfiling() bool {
	return o.EnableDebuggingHandlers && o.EnableProfilingHandler && o.EnableContentionProfiling
}

// debugOnly serves h unless o turns the debugging handlers off; then it
// answers 405 "Debug endpoints are disabled.", as upstream does for
// /runningpods/ and /containerLogs (and /exec, /attach, /portForward,
// /run).
func debugOnly(o *DebugOptions, h http.Handler) http.Handler {
	if o == nil || o.EnableDebuggingHandlers {
		return h
	}
	return disabled(debugDisabled)
}

// debugDisabled is upstream's answer when enableDebuggingHandlers is off.
const debugDisabled = "Debug endpoints are disabled."

// disabled answers 405 with msg, as upstream does for endpoints turned off.
func disabled(msg string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, msg, http.StatusMethodNotAllowed)
	})
}

// nodeLogs serves the files and directory listings under dir. Request
// paths are cleaned and opened through an os.Root, so neither ".." nor a
// symbolic link leads outside dir.
func nodeLogs(dir string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		root, err := os.OpenRoot(dir)
		if err != nil {
			klog.FromContext(r.Context()).Error(err, "Cannot open the node log directory", "dir", dir)
			http.Error(w, "node log directory unavailable", http.StatusInternalServerError)
			return
		}
		defer root.Close()
		http.FileServerFS(confined{root.FS()}).ServeHTTP(w, r)
	})
}

// confined reports paths that the root refuses (a symbolic link out of
// it) as forbidden rather than as a server error.
type confined struct{ fsys fs.FS }

func (c confined) Open(name string) (fs.File, error) {
	f, err := c.fsys.Open(name)
	if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fs.ErrPermission) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrPermission}
	}
	return f, err
}

// profile serves the pprof index and profiles by name.
func profile(w http.ResponseWriter, r *http.Request) {
	switch strings.TrimPrefix(r.URL.Path, "/debug/pprof/") {
	case "profile":
		pprof.Profile(w, r)
	case "symbol":
		pprof.Symbol(w, r)
	case "cmdline":
		pprof.Cmdline(w, r)
	case "trace":
		pprof.Trace(w, r)
	default:
		pprof.Index(w, r)
	}
}

// setVerbosity sets klog's verbosity to the PUT body (a non-negative
// integer), as upstream's /debug/flags/v. Other methods get 406.
func setVerbosity(w http.ResponseWriter, r *http.Request) {
	plain := func(code int, text string) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(code)
		fmt.Fprintln(w, text)
	}
	if r.Method != http.MethodPut {
		plain(http.StatusNotAcceptable, "unsupported http method")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 64))
	if err != nil {
		plain(http.StatusBadRequest, "error reading request body: "+err.Error())
		return
	}
	val := strings.TrimSpace(string(body))
	var level klog.Level
	if _, err := strconv.ParseUint(val, 10, 31); err != nil {
		plain(http.StatusBadRequest, fmt.Sprintf("failed set klog.logging.verbosity %s: %v", val, err))
		return
	}
	if err := level.Set(val); err != nil {
		plain(http.StatusBadRequest, fmt.Sprintf("failed set klog.logging.verbosity %s: %v", val, err))
		return
	}
	klog.FromContext(r.Context()).Info("Log verbosity changed", "v", val)
	plain(http.StatusOK, "successfully set klog.logging.verbosity to "+val)
}
