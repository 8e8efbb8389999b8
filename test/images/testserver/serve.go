package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// Files whose presence turns the answers bad, so a test can flip them with
// an exec (or a probe can be made to fail from outside the process).
const (
	unhealthyFile = "/tmp/unhealthy"
	unreadyFile   = "/tmp/unready"
)

type serveOptions struct {
	httpPort, tcpPort, grpcPort int
	grpcServices                string
	healthyFor, readyAfter      time.Duration
	exitAfter                   time.Duration
	exitCode                    int
	ignoreSIGTERM               bool
	termDelay                   time.Duration
	termMessage, termPath       string
	allocMiB                    int
	stdoutRate, stderrRate      int
	lineBytes                   int
	requestLog                  string
}

// server holds the switchable state behind the answers.
type server struct {
	opts  serveOptions
	start time.Time

	mu        sync.Mutex
	healthBad bool // set by /set?healthz=fail
	readyBad  bool // set by /set?readyz=fail
	reqLog    *os.File
	exitOnce  sync.Once
}

func serve(args []string) error {
	var o serveOptions
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.IntVar(&o.httpPort, "http-port", 8080, "HTTP port (0: none)")
	fs.IntVar(&o.tcpPort, "tcp-port", 0, "TCP port that accepts and closes connections (0: none)")
	fs.IntVar(&o.grpcPort, "grpc-port", 0, "gRPC port serving grpc.health.v1 (0: none)")
	fs.StringVar(&o.grpcServices, "grpc-services", "", "comma-separated service names the gRPC health server knows besides \"\"")
	fs.DurationVar(&o.healthyFor, "healthy-for", 0, "answer /healthz (and gRPC health) badly after this long (0: never)")
	fs.DurationVar(&o.readyAfter, "ready-after", 0, "answer /readyz badly until this long after start")
	fs.DurationVar(&o.exitAfter, "exit-after", 0, "exit with -exit-code after this long (0: never)")
	fs.IntVar(&o.exitCode, "exit-code", 0, "exit code for -exit-after and /exit")
	fs.BoolVar(&o.ignoreSIGTERM, "ignore-sigterm", false, "log SIGTERM and keep running")
	fs.DurationVar(&o.termDelay, "term-delay", 0, "on SIGTERM, wait this long before exiting 0")
	fs.StringVar(&o.termMessage, "termination-message", "", "write this to -termination-message-path on exit")
	fs.StringVar(&o.termPath, "termination-message-path", "/dev/termination-log", "termination message file")
	fs.IntVar(&o.allocMiB, "alloc-mib", 0, "allocate and touch this many MiB at start")
	fs.IntVar(&o.stdoutRate, "stdout-rate", 0, "lines per second printed to stdout")
	fs.IntVar(&o.stderrRate, "stderr-rate", 0, "lines per second printed to stderr")
	fs.IntVar(&o.lineBytes, "line-bytes", 0, "pad each printed line to this many bytes")
	fs.StringVar(&o.requestLog, "request-log", "", "append one line per HTTP request and signal to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	s := &server{opts: o, start: time.Now()}
	if o.requestLog != "" {
		f, err := os.OpenFile(o.requestLog, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return fmt.Errorf("open request log: %w", err)
		}
		s.reqLog = f
	}
	s.record("start pid=%d", os.Getpid())
	fmt.Printf("testserver: started pid=%d uid=%d gid=%d\n", os.Getpid(), os.Getuid(), os.Getgid())

	var hold [][]byte
	if o.allocMiB > 0 {
		for i := 0; i < o.allocMiB; i++ {
			b := make([]byte, 1<<20)
			for j := 0; j < len(b); j += 4096 {
				b[j] = 1
			}
			hold = append(hold, b)
		}
		fmt.Printf("testserver: allocated %d MiB\n", len(hold))
	}

	errc := make(chan error, 3)
	if o.httpPort > 0 {
		ln, err := net.Listen("tcp", ":"+strconv.Itoa(o.httpPort))
		if err != nil {
			return fmt.Errorf("listen HTTP: %w", err)
		}
		go func() { errc <- http.Serve(ln, s.handler()) }()
	}
	if o.tcpPort > 0 {
		ln, err := net.Listen("tcp", ":"+strconv.Itoa(o.tcpPort))
		if err != nil {
			return fmt.Errorf("listen TCP: %w", err)
		}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					errc <- err
					return
				}
				_, _ = io.WriteString(c, "testserver\n")
				c.Close()
			}
		}()
	}
	if o.grpcPort > 0 {
		ln, err := net.Listen("tcp", ":"+strconv.Itoa(o.grpcPort))
		if err != nil {
			return fmt.Errorf("listen gRPC: %w", err)
		}
		gs := grpc.NewServer()
		hs := health.NewServer()
		healthpb.RegisterHealthServer(gs, hs)
		go s.syncGRPCHealth(hs)
		go func() { errc <- gs.Serve(ln) }()
	}
	go s.printLoop(os.Stdout, "stdout", o.stdoutRate)
	go s.printLoop(os.Stderr, "stderr", o.stderrRate)

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	var exitTimer <-chan time.Time
	if o.exitAfter > 0 {
		exitTimer = time.After(o.exitAfter)
	}
	for {
		select {
		case err := <-errc:
			return err
		case <-exitTimer:
			s.exit(o.exitCode, "exit-after elapsed")
		case sig := <-sigs:
			s.record("signal %s", sig)
			fmt.Printf("testserver: received %s\n", sig)
			if o.ignoreSIGTERM && sig == syscall.SIGTERM {
				continue
			}
			time.Sleep(o.termDelay)
			s.exit(0, "terminated by "+sig.String())
		}
	}
}

func (s *server) healthy() bool {
	s.mu.Lock()
	bad := s.healthBad
	s.mu.Unlock()
	if bad || fileExists(unhealthyFile) {
		return false
	}
	return s.opts.healthyFor == 0 || time.Since(s.start) < s.opts.healthyFor
}

func (s *server) ready() bool {
	s.mu.Lock()
	bad := s.readyBad
	s.mu.Unlock()
	if bad || fileExists(unreadyFile) {
		return false
	}
	return time.Since(s.start) >= s.opts.readyAfter
}

func (s *server) handler() http.Handler {
	mux := http.NewServeMux()
	answer := func(ok func() bool) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			if ok() {
				_, _ = io.WriteString(w, "ok\n")
				return
			}
			http.Error(w, "failing", http.StatusInternalServerError)
		}
	}
	mux.HandleFunc("/healthz", answer(s.healthy))
	mux.HandleFunc("/readyz", answer(s.ready))
	// /set?healthz=fail|ok&readyz=fail|ok flips the answers.
	mux.HandleFunc("/set", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		s.mu.Lock()
		if v := q.Get("healthz"); v != "" {
			s.healthBad = v == "fail"
		}
		if v := q.Get("readyz"); v != "" {
			s.readyBad = v == "fail"
		}
		s.mu.Unlock()
		_, _ = io.WriteString(w, "ok\n")
	})
	// /headers answers the request headers as JSON.
	mux.HandleFunc("/headers", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(r.Header)
	})
	// /status/CODE answers with that status code.
	mux.HandleFunc("/status/", func(w http.ResponseWriter, r *http.Request) {
		code, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/status/"))
		if err != nil || code < 100 || code > 599 {
			http.Error(w, "bad status code", http.StatusBadRequest)
			return
		}
		w.WriteHeader(code)
	})
	// /redirect?to=URL answers 302 to URL.
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	})
	mux.HandleFunc("/hostname", func(w http.ResponseWriter, _ *http.Request) {
		h, _ := os.Hostname()
		_, _ = io.WriteString(w, h+"\n")
	})
	// /exit?code=N exits with N (default -exit-code).
	mux.HandleFunc("/exit", func(w http.ResponseWriter, r *http.Request) {
		code := s.opts.exitCode
		if v := r.URL.Query().Get("code"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				http.Error(w, "bad code", http.StatusBadRequest)
				return
			}
			code = n
		}
		_, _ = io.WriteString(w, "exiting\n")
		go s.exit(code, "asked by /exit")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "testserver\n")
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.record("%s %s", r.Method, r.URL.RequestURI())
		mux.ServeHTTP(w, r)
	})
}

// syncGRPCHealth keeps the gRPC health statuses in line with healthy().
func (s *server) syncGRPCHealth(hs *health.Server) {
	names := []string{""}
	for _, n := range strings.Split(s.opts.grpcServices, ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	for {
		st := healthpb.HealthCheckResponse_SERVING
		if !s.healthy() {
			st = healthpb.HealthCheckResponse_NOT_SERVING
		}
		for _, n := range names {
			hs.SetServingStatus(n, st)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// printLoop prints rate numbered lines per second to w, in bursts every
// 10 ms so high rates stay smooth.
func (s *server) printLoop(w io.Writer, name string, rate int) {
	if rate <= 0 {
		return
	}
	var n int
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var carry float64
	for range tick.C {
		carry += float64(rate) / 100
		var b strings.Builder
		for ; carry >= 1; carry-- {
			n++
			line := fmt.Sprintf("%s line %d", name, n)
			if pad := s.opts.lineBytes - len(line) - 1; pad > 0 {
				line += " " + strings.Repeat("x", pad-1)
			}
			b.WriteString(line)
			b.WriteByte('\n')
		}
		if b.Len() > 0 {
			_, _ = io.WriteString(w, b.String())
		}
	}
}

// record appends one line to the request log, if any.
func (s *server) record(format string, args ...any) {
	if s.reqLog == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(s.reqLog, "%s %s\n", time.Now().UTC().Format(time.RFC3339Nano), fmt.Sprintf(format, args...))
}

// exit writes the termination message and exits with code.
func (s *server) exit(code int, why string) {
	s.exitOnce.Do(func() {
		s.record("exit %d (%s)", code, why)
		fmt.Printf("testserver: exit %d (%s)\n", code, why)
		if s.opts.termMessage != "" {
			if err := os.WriteFile(s.opts.termPath, []byte(s.opts.termMessage), 0o644); err != nil {
				fmt.Fprintf(os.Stderr, "testserver: write termination message: %v\n", err)
			}
		}
		os.Exit(code)
	})
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
