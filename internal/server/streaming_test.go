package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/heartlet/heartlet/internal/errdefs"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/spdy"
)

// streamCall is one call of fakeStreamer.
type streamCall struct {
	Verb   string
	Target StreamTarget
	Cmd    []string
	Opts   StreamOptions
	Ports  []int32
}

// fakeStreamer answers with backend's URL. Pod "missing" is not found,
// container "stopped" not running, container "broken" fails otherwise.
type fakeStreamer struct {
	backend string
	output  string // what Run returns

	mu    sync.Mutex
	calls []streamCall
}

func (f *fakeStreamer) answer(c streamCall) (*url.URL, error) {
	f.mu.Lock()
	f.calls = append(f.calls, c)
	f.mu.Unlock()
	switch {
	case c.Target.Pod == "missing":
		return nil, fmt.Errorf("pod %q does not exist: %w", c.Target.Pod, errdefs.ErrNotFound)
	case c.Target.Container == "stopped":
		return nil, fmt.Errorf("container %q is not running: %w", c.Target.Container, ErrBadRequest)
	case c.Target.Container == "broken":
		return nil, errors.New("runtime unavailable")
	}
	return url.Parse(f.backend + "/" + strings.ToLower(c.Verb) + "/token")
}

func (f *fakeStreamer) Exec(_ context.Context, t StreamTarget, cmd []string, o StreamOptions) (*url.URL, error) {
	return f.answer(streamCall{Verb: "Exec", Target: t, Cmd: cmd, Opts: o})
}

func (f *fakeStreamer) Attach(_ context.Context, t StreamTarget, o StreamOptions) (*url.URL, error) {
	return f.answer(streamCall{Verb: "Attach", Target: t, Opts: o})
}

func (f *fakeStreamer) PortForward(_ context.Context, t StreamTarget, ports []int32) (*url.URL, error) {
	return f.answer(streamCall{Verb: "PortForward", Target: t, Ports: ports})
}

func (f *fakeStreamer) Run(_ context.Context, t StreamTarget, cmd []string) ([]byte, error) {
	if _, err := f.answer(streamCall{Verb: "Run", Target: t, Cmd: cmd}); err != nil {
		return nil, err
	}
	return []byte(f.output), nil
}

func (f *fakeStreamer) takeCalls() []streamCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls
	f.calls = nil
	return c
}

// newStreamingServer serves the kubelet API with f as its streamer, with
// a verbosity-4 logger in every request's context so that the request
// logging wrapper is in the path.
func newStreamingServer(t *testing.T, f Streamer) *httptest.Server {
	t.Helper()
	s := NewKubeletAPI(KubeletAPIOptions{Addr: "127.0.0.1:0", Streaming: f})
	srv := httptest.NewUnstartedServer(s.Handler())
	srv.Config.BaseContext = func(net.Listener) context.Context {
		return klog.NewContext(context.Background(), ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(4))))
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

func TestStreamingRoutes(t *testing.T) {
	f := &fakeStreamer{backend: "http://127.0.0.1:1", output: "total 0\n"}
	srv := newStreamingServer(t, f)
	target := func(ns, pod, uid, ctr string) StreamTarget {
		return StreamTarget{Namespace: ns, Pod: pod, UID: types.UID(uid), Container: ctr}
	}
	tests := []struct {
		name   string
		method string
		path   string
		want   int
		body   string      // substring of the body
		call   *streamCall // nil: the streamer must not be called
		ctype  string
	}{
		// Reaching the proxy without an upgrade is a 400 from it.
		{name: "exec", method: "POST", path: "/exec/ns/web/app?command=ls&command=-l&output=1&error=1", want: 400, body: "Upgrade request required",
			call: &streamCall{Verb: "Exec", Target: target("ns", "web", "", "app"), Cmd: []string{"ls", "-l"}, Opts: StreamOptions{Stdout: true, Stderr: true}}},
		{name: "exec GET with uid", method: "GET", path: "/exec/ns/web/u1/app?command=sh&input=1&output=1&tty=1&error=1", want: 400, body: "Upgrade request required",
			call: &streamCall{Verb: "Exec", Target: target("ns", "web", "u1", "app"), Cmd: []string{"sh"}, Opts: StreamOptions{Stdin: true, Stdout: true, TTY: true}}},
		{name: "exec true is not 1", method: "POST", path: "/exec/ns/web/app?command=ls&output=true", want: 400, body: "at least 1 of stdin, stdout, stderr"},
		{name: "exec without command", method: "POST", path: "/exec/ns/web/app?output=1", want: 400, body: `"command" is required`},
		{name: "exec unknown pod", method: "POST", path: "/exec/ns/missing/app?command=ls&output=1", want: 404, body: `pod "missing" does not exist`,
			call: &streamCall{Verb: "Exec", Target: target("ns", "missing", "", "app"), Cmd: []string{"ls"}, Opts: StreamOptions{Stdout: true}}},
		{name: "exec container not running", method: "POST", path: "/exec/ns/web/stopped?command=ls&output=1", want: 400, body: "not running",
			call: &streamCall{Verb: "Exec", Target: target("ns", "web", "", "stopped"), Cmd: []string{"ls"}, Opts: StreamOptions{Stdout: true}}},
		{name: "exec runtime error", method: "POST", path: "/exec/ns/web/broken?command=ls&output=1", want: 500, body: "runtime unavailable",
			call: &streamCall{Verb: "Exec", Target: target("ns", "web", "", "broken"), Cmd: []string{"ls"}, Opts: StreamOptions{Stdout: true}}},
		{name: "exec PUT", method: "PUT", path: "/exec/ns/web/app?command=ls&output=1", want: 405},
		{name: "exec too short", method: "POST", path: "/exec/ns/web?command=ls&output=1", want: 404},
		{name: "attach", method: "POST", path: "/attach/ns/web/app?input=1&output=1", want: 400, body: "Upgrade request required",
			call: &streamCall{Verb: "Attach", Target: target("ns", "web", "", "app"), Opts: StreamOptions{Stdin: true, Stdout: true}}},
		{name: "attach with uid", method: "GET", path: "/attach/ns/web/u1/app?error=1", want: 400, body: "Upgrade request required",
			call: &streamCall{Verb: "Attach", Target: target("ns", "web", "u1", "app"), Opts: StreamOptions{Stderr: true}}},
		{name: "attach without streams", method: "POST", path: "/attach/ns/web/app", want: 400, body: "at least 1 of stdin"},
		{name: "attach unknown container", method: "POST", path: "/attach/ns/missing/app?output=1", want: 404,
			call: &streamCall{Verb: "Attach", Target: target("ns", "missing", "", "app"), Opts: StreamOptions{Stdout: true}}},
		{name: "portForward", method: "POST", path: "/portForward/ns/web", want: 400, body: "Upgrade request required",
			call: &streamCall{Verb: "PortForward", Target: target("ns", "web", "", "")}},
		{name: "portForward SPDY ignores port params", method: "GET", path: "/portForward/ns/web/u1?port=80", want: 400, body: "Upgrade request required",
			call: &streamCall{Verb: "PortForward", Target: target("ns", "web", "u1", "")}},
		{name: "portForward unknown pod", method: "POST", path: "/portForward/ns/missing", want: 404,
			call: &streamCall{Verb: "PortForward", Target: target("ns", "missing", "", "")}},
		{name: "run", method: "POST", path: "/run/ns/web/app?cmd=ls+-l+/", want: 200, body: "total 0\n", ctype: "application/json",
			call: &streamCall{Verb: "Run", Target: target("ns", "web", "", "app"), Cmd: []string{"ls", "-l", "/"}}},
		{name: "run with uid", method: "POST", path: "/run/ns/web/u1/app?cmd=date", want: 200, body: "total 0\n",
			call: &streamCall{Verb: "Run", Target: target("ns", "web", "u1", "app"), Cmd: []string{"date"}}},
		{name: "run GET", method: "GET", path: "/run/ns/web/app?cmd=date", want: 405},
		{name: "run without cmd", method: "POST", path: "/run/ns/web/app", want: 400, body: `"cmd" is required`},
		{name: "run not running", method: "POST", path: "/run/ns/web/stopped?cmd=date", want: 400,
			call: &streamCall{Verb: "Run", Target: target("ns", "web", "", "stopped"), Cmd: []string{"date"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, srv.URL+tt.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.want || !strings.Contains(string(body), tt.body) {
				t.Errorf("%s %s = %d %q, want %d containing %q", tt.method, tt.path, resp.StatusCode, body, tt.want, tt.body)
			}
			if tt.ctype != "" && resp.Header.Get("Content-Type") != tt.ctype {
				t.Errorf("Content-Type = %q, want %q", resp.Header.Get("Content-Type"), tt.ctype)
			}
			calls := f.takeCalls()
			var want []streamCall
			if tt.call != nil {
				want = []streamCall{*tt.call}
			}
			if !reflect.DeepEqual(calls, want) {
				t.Errorf("streamer calls = %+v, want %+v", calls, want)
			}
		})
	}
}

// echoBackend stands in for a runtime's stream server: it answers an
// upgrade request with 101, choosing the first protocol offered, and
// echoes what it reads.
func echoBackend(t *testing.T) (*httptest.Server, <-chan *http.Request) {
	t.Helper()
	reqs := make(chan *http.Request, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reqs <- r
		if r.Header.Get("Upgrade") == "" {
			http.Error(w, "upgrade required", http.StatusBadRequest)
			return
		}
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("backend hijack: %v", err)
			return
		}
		defer conn.Close()
		fmt.Fprintf(rw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: %s\r\nX-Stream-Protocol-Version: %s\r\n\r\n",
			r.Header.Get("Upgrade"), r.Header.Get("X-Stream-Protocol-Version"))
		rw.Flush()
		_, _ = io.Copy(conn, rw)
	}))
	t.Cleanup(srv.Close)
	return srv, reqs
}

func TestStreamingProxiesUpgrades(t *testing.T) {
	backend, reqs := echoBackend(t)
	f := &fakeStreamer{backend: backend.URL}
	srv := newStreamingServer(t, f)
	tests := []struct {
		name, path, wantPath string
	}{
		{"exec", "/exec/ns/web/app?command=cat&input=1&output=1", "/exec/token"},
		{"attach", "/attach/ns/web/u1/app?input=1&output=1", "/attach/token"},
		{"portForward", "/portForward/ns/web", "/portforward/token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: node\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\nContent-Length: 0\r\n\r\n", tt.path)
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Upgrade") != "SPDY/3.1" ||
				resp.Header.Get("X-Stream-Protocol-Version") != "v4.channel.k8s.io" {
				t.Fatalf("response = %d %v, want 101 with the backend's protocol headers", resp.StatusCode, resp.Header)
			}
			got := <-reqs
			if got.URL.Path != tt.wantPath || got.URL.RawQuery != "" {
				t.Errorf("backend saw %s, want %s without the client's query", got.URL, tt.wantPath)
			}
			if _, err := io.WriteString(conn, "ping\n"); err != nil {
				t.Fatal(err)
			}
			line, err := br.ReadString('\n')
			if err != nil || line != "ping\n" {
				t.Errorf("echo through the proxy = %q, %v; want %q", line, err, "ping\n")
			}
			f.takeCalls()
		})
	}
}

func TestStatusRecorderHijack(t *testing.T) {
	var status int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		conn, rw, err := rec.Hijack()
		if err != nil {
			t.Errorf("Hijack through the recorder: %v", err)
			return
		}
		defer conn.Close()
		status = rec.status
		fmt.Fprint(rw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: test\r\n\r\n")
		rw.Flush()
	}))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "test")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSwitchingProtocols || status != http.StatusSwitchingProtocols {
		t.Errorf("client saw %d, recorder %d; want 101 both", resp.StatusCode, status)
	}
}

func TestParseStreamOptions(t *testing.T) {
	tests := []struct {
		query   string
		want    StreamOptions
		wantErr bool
	}{
		{query: "output=1", want: StreamOptions{Stdout: true}},
		{query: "input=1&output=1&error=1", want: StreamOptions{Stdin: true, Stdout: true, Stderr: true}},
		{query: "input=1&output=1&error=1&tty=1", want: StreamOptions{Stdin: true, Stdout: true, TTY: true}},
		{query: "error=1&tty=1", wantErr: true}, // stderr dropped with a TTY leaves nothing
		{query: "output=true&input=yes", wantErr: true},
		{query: "", wantErr: true},
		{query: "tty=1", wantErr: true},
		{query: "input=1&input=0", want: StreamOptions{Stdin: true}}, // first value counts
	}
	for _, tt := range tests {
		q, err := url.ParseQuery(tt.query)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseStreamOptions(q)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseStreamOptions(%q) = %+v, %v; want %+v, error %v", tt.query, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestParsePorts(t *testing.T) {
	tests := []struct {
		query string
		want  []int32
		err   string
	}{
		{query: "port=80", want: []int32{80}},
		{query: "port=80&port=65535&port=1", want: []int32{80, 65535, 1}},
		{query: "", err: `"port" is required`},
		{query: "port=0", err: "must be > 0"},
		{query: "port=65536", err: "unable to parse"},
		{query: "port=-1", err: "unable to parse"},
		{query: "port=http", err: "unable to parse"},
		{query: "port=80&port=", err: "cannot be empty"},
		{query: "port=80,443&port=8080", want: []int32{80, 443, 8080}},
		{query: "port=80,", err: "unable to parse"},
	}
	for _, tt := range tests {
		q, _ := url.ParseQuery(tt.query)
		got, err := ParsePorts(q)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParsePorts(%q) = %v, %v; want error %q", tt.query, got, err, tt.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParsePorts(%q) = %v, %v; want %v", tt.query, got, err, tt.want)
		}
	}
}

func TestParseCommands(t *testing.T) {
	tests := []struct {
		query string
		exec  []string // nil: error
		run   []string // nil: error
	}{
		{query: "command=sh&command=-c&command=echo a b", exec: []string{"sh", "-c", "echo a b"}, run: nil},
		{query: "cmd=ls -l /", exec: nil, run: []string{"ls", "-l", "/"}},
		{query: "cmd=a&cmd=b", run: []string{"a"}},
		{query: "cmd=   ", run: nil},
		{query: "command=", exec: []string{""}},
	}
	for _, tt := range tests {
		q, _ := url.ParseQuery(tt.query)
		exec, err := ParseExecCommand(q)
		if (tt.exec == nil) != (err != nil) || !reflect.DeepEqual(exec, tt.exec) {
			t.Errorf("ParseExecCommand(%q) = %q, %v; want %q", tt.query, exec, err, tt.exec)
		}
		run, err := ParseRunCommand(q)
		if (tt.run == nil) != (err != nil) || !reflect.DeepEqual(run, tt.run) {
			t.Errorf("ParseRunCommand(%q) = %q, %v; want %q", tt.query, run, err, tt.run)
		}
	}
}

// FuzzStreamQuery checks the invariants of the query parsers on any
// query string: no panics, and what parses is what was asked for.
func FuzzStreamQuery(f *testing.F) {
	for _, s := range []string{
		"command=sh&input=1&output=1&tty=1", "output=1&error=1", "port=80&port=443", "port=0", "port=99999",
		"cmd=ls -l", "cmd=", "stdin=%zz", "command=a&command=b&error=1&tty=1", "port=+80", "port=0080",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		if o, err := ParseStreamOptions(q); err == nil {
			if !o.Stdin && !o.Stdout && !o.Stderr {
				t.Errorf("%q: no stream accepted", raw)
			}
			if o.TTY && o.Stderr {
				t.Errorf("%q: stderr kept with a TTY", raw)
			}
			if o.Stdin != (q.Get("input") == "1") || o.Stdout != (q.Get("output") == "1") || o.TTY != (q.Get("tty") == "1") {
				t.Errorf("%q: options %+v do not match the query", raw, o)
			}
		}
		if ports, err := ParsePorts(q); err == nil {
			if want := len(strings.Split(strings.Join(q["port"], ","), ",")); len(ports) == 0 || len(ports) != want {
				t.Errorf("%q: ports %v, want %d", raw, ports, want)
			}
			for _, p := range ports {
				if p < 1 || p > 65535 {
					t.Errorf("%q: port %d out of range", raw, p)
				}
			}
		}
		if cmd, err := ParseExecCommand(q); err == nil && !reflect.DeepEqual(cmd, q["command"]) {
			t.Errorf("%q: exec command %q, want %q", raw, cmd, q["command"])
		}
		if cmd, err := ParseRunCommand(q); err == nil && strings.Join(cmd, " ") != q.Get("cmd") {
			t.Errorf("%q: run command %q does not rejoin to %q", raw, cmd, q.Get("cmd"))
		}
	})
}

// spdyExecBackend stands in for a runtime's SPDY stream server with the
// v4 remote command protocol: it echoes stdin to stdout prefixed with
// "echo:", writes "to-stderr" to stderr and reports exit code 7.
func spdyExecBackend(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := httpstream.Handshake(r, w, []string{"v4.channel.k8s.io"}); err != nil {
			return // Handshake answered the client
		}
		streams := make(chan httpstream.Stream, 4)
		conn := spdy.NewResponseUpgrader().UpgradeResponse(w, r, func(s httpstream.Stream, _ <-chan struct{}) error {
			streams <- s
			return nil
		})
		if conn == nil {
			return
		}
		defer conn.Close()
		byType := map[string]httpstream.Stream{}
		timeout := time.After(10 * time.Second)
		for len(byType) < 4 { // error, stdin, stdout, stderr
			select {
			case s := <-streams:
				byType[s.Headers().Get("streamType")] = s
			case <-timeout:
				t.Errorf("backend got streams %v, want error, stdin, stdout and stderr", byType)
				return
			}
		}
		in, _ := io.ReadAll(byType["stdin"])
		fmt.Fprintf(byType["stdout"], "echo:%s", in)
		io.WriteString(byType["stderr"], "to-stderr")
		byType["stdout"].Close()
		byType["stderr"].Close()
		status := metav1.Status{Status: metav1.StatusFailure, Reason: "NonZeroExitCode",
			Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: "ExitCode", Message: "7"}}}}
		_ = json.NewEncoder(byType["error"]).Encode(&status)
		byType["error"].Close()
		<-conn.CloseChan()
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestStreamingTranslatesWebSocket runs an exec with client-go's
// WebSocket (v5.channel.k8s.io) executor: the kubelet API translates it
// to SPDY for the backend and relays the streams and the exit code.
func TestStreamingTranslatesWebSocket(t *testing.T) {
	backend := spdyExecBackend(t)
	f := &fakeStreamer{backend: backend.URL}
	srv := newStreamingServer(t, f)
	e, err := remotecommand.NewWebSocketExecutor(&rest.Config{Host: srv.URL}, "GET",
		srv.URL+"/exec/ns/web/app?command=cat&input=1&output=1&error=1")
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = e.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: strings.NewReader("hello"), Stdout: &stdout, Stderr: &stderr})
	var ce utilexec.CodeExitError
	if !errors.As(err, &ce) || ce.Code != 7 {
		t.Errorf("exec error = %v, want exit code 7", err)
	}
	if stdout.String() != "echo:hello" || stderr.String() != "to-stderr" {
		t.Errorf("stdout %q, stderr %q; want %q, %q", stdout.String(), stderr.String(), "echo:hello", "to-stderr")
	}
	want := []streamCall{{Verb: "Exec", Target: StreamTarget{Namespace: "ns", Pod: "web", Container: "app"}, Cmd: []string{"cat"},
		Opts: StreamOptions{Stdin: true, Stdout: true, Stderr: true}}}
	if got := f.takeCalls(); !reflect.DeepEqual(got, want) {
		t.Errorf("streamer calls = %+v, want %+v", got, want)
	}
}

// TestStreamingTunnelsPortForward connects with kubectl's WebSocket
// port-forward subprotocol: the kubelet API asks the backend for SPDY and
// carries its bytes in WebSocket messages.
func TestStreamingTunnelsPortForward(t *testing.T) {
	backend, reqs := echoBackend(t)
	f := &fakeStreamer{backend: backend.URL}
	srv := newStreamingServer(t, f)
	d := websocket.Dialer{Subprotocols: []string{"SPDY/3.1+portforward.k8s.io"}, HandshakeTimeout: 10 * time.Second}
	conn, resp, err := d.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/portForward/ns/web/u1", nil)
	if err != nil {
		t.Fatalf("WebSocket dial: %v (%v)", err, resp)
	}
	defer conn.Close()
	if conn.Subprotocol() != "SPDY/3.1+portforward.k8s.io" {
		t.Errorf("negotiated %q, want SPDY/3.1+portforward.k8s.io", conn.Subprotocol())
	}
	got := <-reqs
	if got.Header.Get("Upgrade") != "SPDY/3.1" || got.Header.Get("X-Stream-Protocol-Version") != "portforward.k8s.io" || got.URL.Path != "/portforward/token" {
		t.Errorf("backend saw %s with Upgrade %q, protocols %q; want SPDY/3.1 with portforward.k8s.io at /portforward/token",
			got.URL.Path, got.Header.Get("Upgrade"), got.Header.Values("X-Stream-Protocol-Version"))
	}
	if err := conn.WriteMessage(websocket.BinaryMessage, []byte("ping\n")); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	var echoed []byte
	for len(echoed) < len("ping\n") {
		_, msg, err := conn.ReadMessage()
		if err != nil {
			t.Fatalf("read through the tunnel: %v (got %q)", err, echoed)
		}
		echoed = append(echoed, msg...)
	}
	if string(echoed) != "ping\n" {
		t.Errorf("echo through the tunnel = %q, want %q", echoed, "ping\n")
	}
	want := []streamCall{{Verb: "PortForward", Target: StreamTarget{Namespace: "ns", Pod: "web", UID: "u1"}}}
	if calls := f.takeCalls(); !reflect.DeepEqual(calls, want) {
		t.Errorf("streamer calls = %+v, want %+v", calls, want)
	}
}
