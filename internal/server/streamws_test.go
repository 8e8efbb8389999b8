package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"go.uber.org/goleak"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
	"k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/spdy"
)

// ioTimeout bounds every wait on the network in these tests.
const ioTimeout = 10 * time.Second

// checkGoroutines fails t if a goroutine started during the test is
// still running when its cleanups (servers closed) have run. Call it
// first, so that its check is the last cleanup.
func checkGoroutines(t *testing.T) {
	t.Helper()
	current := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, current) })
}

// remoteCommandBackend stands in for a runtime's SPDY stream server with
// the v4 remote command protocol: it waits for the streams of the types
// in want, hands them to serve with a channel that is closed when the
// connection closes, and then waits for the connection to close. closed
// is closed once the backend has seen the connection close; paths gets
// the path of each request.
func remoteCommandBackend(t *testing.T, want []string, serve func(streams map[string]httpstream.Stream, connClosed <-chan bool)) (srv *httptest.Server, paths <-chan string, closed <-chan struct{}) {
	t.Helper()
	pathc := make(chan string, 4)
	closedc := make(chan struct{})
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pathc <- r.URL.Path
		if _, err := httpstream.Handshake(r, w, []string{"v4.channel.k8s.io"}); err != nil {
			return // Handshake answered the client
		}
		streams := make(chan httpstream.Stream, len(want)+1)
		conn := spdy.NewResponseUpgrader().UpgradeResponse(w, r, func(s httpstream.Stream, _ <-chan struct{}) error {
			streams <- s
			return nil
		})
		if conn == nil {
			return
		}
		defer close(closedc)
		defer conn.Close()
		byType := map[string]httpstream.Stream{}
		timeout := time.After(ioTimeout)
		for len(byType) < len(want) {
			select {
			case s := <-streams:
				byType[s.Headers().Get("streamType")] = s
			case <-timeout:
				t.Errorf("backend got streams %v, want %v", byType, want)
				return
			}
		}
		for _, typ := range want {
			if byType[typ] == nil {
				t.Errorf("backend got streams %v, want %v", byType, want)
				return
			}
		}
		serve(byType, conn.CloseChan())
		<-conn.CloseChan()
	}))
	t.Cleanup(srv.Close)
	return srv, pathc, closedc
}

// writeStatus ends a backend's session with status on the error stream.
func writeStatus(t *testing.T, errStream httpstream.Stream, status metav1.Status) {
	t.Helper()
	if err := json.NewEncoder(errStream).Encode(&status); err != nil {
		t.Errorf("backend: writing the status: %v", err)
	}
	errStream.Close()
}

// oneSize is a terminal size queue with one size.
func oneSize(size remotecommand.TerminalSize) remotecommand.TerminalSizeQueue {
	c := make(chan remotecommand.TerminalSize, 1)
	c <- size
	close(c)
	return sizeChan(c)
}

type sizeChan chan remotecommand.TerminalSize

func (c sizeChan) Next() *remotecommand.TerminalSize {
	s, ok := <-c
	if !ok {
		return nil
	}
	return &s
}

// TestStreamingTranslatesTTYResize runs a TTY exec over WebSocket v5: the
// client's terminal size reaches the backend's resize stream.
func TestStreamingTranslatesTTYResize(t *testing.T) {
	checkGoroutines(t)
	backend, _, _ := remoteCommandBackend(t, []string{"error", "stdin", "stdout", "resize"},
		func(s map[string]httpstream.Stream, _ <-chan bool) {
			var size remotecommand.TerminalSize
			if err := json.NewDecoder(s["resize"]).Decode(&size); err != nil {
				t.Errorf("backend: reading the resize stream: %v", err)
			}
			fmt.Fprintf(s["stdout"], "size:%dx%d", size.Width, size.Height)
			s["stdout"].Close()
			writeStatus(t, s["error"], metav1.Status{Status: metav1.StatusSuccess})
		})
	f := &fakeStreamer{backend: backend.URL}
	srv := newStreamingServer(t, f)
	e, err := remotecommand.NewWebSocketExecutor(&rest.Config{Host: srv.URL}, "GET",
		srv.URL+"/exec/ns/web/app?command=sh&input=1&output=1&tty=1")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*ioTimeout)
	defer cancel()
	// An open stdin, as from a terminal.
	stdin, stdinW := io.Pipe()
	defer stdinW.Close()
	var stdout bytes.Buffer
	err = e.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: &stdout, Tty: true,
		TerminalSizeQueue: oneSize(remotecommand.TerminalSize{Width: 100, Height: 40})})
	if err != nil || stdout.String() != "size:100x40" {
		t.Errorf("tty exec = %q, %v; want %q without error", stdout.String(), err, "size:100x40")
	}
	want := []streamCall{{Verb: "Exec", Target: StreamTarget{Namespace: "ns", Pod: "web", Container: "app"}, Cmd: []string{"sh"},
		Opts: StreamOptions{Stdin: true, Stdout: true, TTY: true}}}
	if got := f.takeCalls(); !reflect.DeepEqual(got, want) {
		t.Errorf("streamer calls = %+v, want %+v", got, want)
	}
}

// TestStreamingTranslatesAttach attaches over WebSocket v5: the backend's
// attach URL gets a SPDY session and its output and status reach the
// client, a failure as an error with the runtime's message.
func TestStreamingTranslatesAttach(t *testing.T) {
	tests := []struct {
		name    string
		status  metav1.Status
		wantErr string // empty: success
	}{
		{name: "success", status: metav1.Status{Status: metav1.StatusSuccess}},
		{name: "failure", status: metav1.Status{Status: metav1.StatusFailure, Message: "container web is gone"}, wantErr: "container web is gone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkGoroutines(t)
			backend, paths, _ := remoteCommandBackend(t, []string{"error", "stdout", "stderr"},
				func(s map[string]httpstream.Stream, _ <-chan bool) {
					io.WriteString(s["stdout"], "attached")
					io.WriteString(s["stderr"], "warning")
					s["stdout"].Close()
					s["stderr"].Close()
					writeStatus(t, s["error"], tt.status)
				})
			f := &fakeStreamer{backend: backend.URL}
			srv := newStreamingServer(t, f)
			e, err := remotecommand.NewWebSocketExecutor(&rest.Config{Host: srv.URL}, "GET", srv.URL+"/attach/ns/web/u1/app?output=1&error=1")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*ioTimeout)
			defer cancel()
			var stdout, stderr bytes.Buffer
			err = e.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr})
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("attach error = %v, want %q", err, tt.wantErr)
			}
			var ce utilexec.CodeExitError
			if errors.As(err, &ce) {
				t.Errorf("attach error %v is an exit code", err)
			}
			if stdout.String() != "attached" || stderr.String() != "warning" {
				t.Errorf("stdout %q, stderr %q; want %q, %q", stdout.String(), stderr.String(), "attached", "warning")
			}
			if p := <-paths; p != "/attach/token" {
				t.Errorf("backend saw %s, want /attach/token", p)
			}
			want := []streamCall{{Verb: "Attach", Target: StreamTarget{Namespace: "ns", Pod: "web", UID: "u1", Container: "app"},
				Opts: StreamOptions{Stdout: true, Stderr: true}}}
			if got := f.takeCalls(); !reflect.DeepEqual(got, want) {
				t.Errorf("streamer calls = %+v, want %+v", got, want)
			}
		})
	}
}

// refusingBackend answers every request with status and a message.
func refusingBackend(t *testing.T, status int) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no such stream session", status)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestStreamingRuntimeRefusesUpgrade checks that a runtime refusing the
// upgrade fails the WebSocket handshake of exec and of the port-forward
// tunnel with the runtime's status code and message.
func TestStreamingRuntimeRefusesUpgrade(t *testing.T) {
	checkGoroutines(t)
	f := &fakeStreamer{backend: refusingBackend(t, http.StatusNotFound).URL}
	srv := newStreamingServer(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), 2*ioTimeout)
	defer cancel()

	t.Run("exec", func(t *testing.T) {
		e, err := remotecommand.NewWebSocketExecutor(&rest.Config{Host: srv.URL}, "GET", srv.URL+"/exec/ns/web/app?command=ls&output=1")
		if err != nil {
			t.Fatal(err)
		}
		var stdout bytes.Buffer
		err = e.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout})
		// client-go reads the failed handshake's Status.
		var uerr *httpstream.UpgradeFailureError
		var serr *apierrors.StatusError
		if ctx.Err() != nil || !errors.As(err, &uerr) || !errors.As(uerr.Cause, &serr) ||
			serr.Status().Code != http.StatusNotFound || !strings.Contains(err.Error(), "no such stream session") {
			t.Errorf("exec error = %#v, want an upgrade failure with the runtime's 404 and message", err)
		}
	})
	t.Run("portForward", func(t *testing.T) {
		d := websocket.Dialer{Subprotocols: []string{"SPDY/3.1+portforward.k8s.io"}, HandshakeTimeout: ioTimeout}
		conn, resp, err := d.DialContext(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/portForward/ns/web", nil)
		if err == nil {
			conn.Close()
			t.Fatal("WebSocket dial succeeded, want the runtime's refusal")
		}
		if resp == nil {
			t.Fatalf("WebSocket dial: %v, want a response", err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "no such stream session") {
			t.Errorf("handshake answer = %d %q, want 404 with the runtime's message", resp.StatusCode, body)
		}
	})
	if got := len(f.takeCalls()); got != 2 {
		t.Errorf("streamer called %d times, want 2", got)
	}
}

// dialV5 opens a WebSocket v5 remote command session as a client.
func dialV5(t *testing.T, rawURL string) *websocket.Conn {
	t.Helper()
	d := websocket.Dialer{Subprotocols: []string{"v5.channel.k8s.io"}, HandshakeTimeout: ioTimeout}
	conn, resp, err := d.Dial("ws"+strings.TrimPrefix(rawURL, "http"), nil)
	if err != nil {
		t.Fatalf("WebSocket dial: %v (%v)", err, resp)
	}
	if conn.Subprotocol() != "v5.channel.k8s.io" {
		t.Errorf("negotiated %q, want v5.channel.k8s.io", conn.Subprotocol())
	}
	return conn
}

// readChannel reads messages until channel ch has carried want.
func readChannel(t *testing.T, conn *websocket.Conn, ch byte, want string) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(ioTimeout))
	var got []byte
	for !bytes.Contains(got, []byte(want)) {
		_, msg, err := conn.ReadMessage()
		if err != nil {
			t.Fatalf("reading channel %d: %v (got %q)", ch, err, got)
		}
		if len(msg) > 0 && msg[0] == ch {
			got = append(got, msg[1:]...)
		}
	}
}

// waitClosed waits for c to be closed.
func waitClosed(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(ioTimeout):
		t.Fatalf("%s did not happen", what)
	}
}

// TestStreamingClientLeavesExec drops the client's connection in the
// middle of a WebSocket v5 exec whose command would run on: the kubelet
// API closes the runtime's connection and nothing is left running.
func TestStreamingClientLeavesExec(t *testing.T) {
	checkGoroutines(t)
	backend, _, closed := remoteCommandBackend(t, []string{"error", "stdin", "stdout"},
		func(s map[string]httpstream.Stream, _ <-chan bool) {
			io.WriteString(s["stdout"], "ready")
		})
	srv := newStreamingServer(t, &fakeStreamer{backend: backend.URL})
	conn := dialV5(t, srv.URL+"/exec/ns/web/app?command=sleep&command=1000&input=1&output=1")
	readChannel(t, conn, 1, "ready")
	if err := conn.WriteMessage(websocket.BinaryMessage, []byte("\x00typed")); err != nil {
		t.Fatal(err)
	}
	conn.Close() // without a close frame, as a client that vanished
	waitClosed(t, closed, "closing the runtime's connection after the client left")
}

// tunnelBackend stands in for a runtime's SPDY stream server for port
// forwarding: it switches protocols and then hands the connection to
// serve; closed is closed when serve has returned.
func tunnelBackend(t *testing.T, serve func(rw io.ReadWriter)) (srv *httptest.Server, closed <-chan struct{}) {
	t.Helper()
	closedc := make(chan struct{})
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("backend hijack: %v", err)
			return
		}
		defer close(closedc)
		defer conn.Close()
		fmt.Fprintf(rw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: %s\r\n\r\n",
			r.Header.Get("X-Stream-Protocol-Version"))
		rw.Flush()
		serve(struct {
			io.Reader
			io.Writer
		}{rw, conn})
	}))
	t.Cleanup(srv.Close)
	return srv, closedc
}

func dialTunnel(t *testing.T, rawURL string) *websocket.Conn {
	t.Helper()
	d := websocket.Dialer{Subprotocols: []string{"SPDY/3.1+portforward.k8s.io"}, HandshakeTimeout: ioTimeout}
	conn, resp, err := d.Dial("ws"+strings.TrimPrefix(rawURL, "http")+"/portForward/ns/web", nil)
	if err != nil {
		t.Fatalf("WebSocket dial: %v (%v)", err, resp)
	}
	return conn
}

// TestStreamingTunnelEnds ends a port-forward tunnel from either side:
// the client leaving closes the runtime's connection; the runtime
// closing sends the client its last bytes and a normal close.
func TestStreamingTunnelEnds(t *testing.T) {
	t.Run("client leaves", func(t *testing.T) {
		checkGoroutines(t)
		backend, closed := tunnelBackend(t, func(rw io.ReadWriter) { _, _ = io.Copy(rw, rw) })
		srv := newStreamingServer(t, &fakeStreamer{backend: backend.URL})
		conn := dialTunnel(t, srv.URL)
		if err := conn.WriteMessage(websocket.BinaryMessage, []byte("ping")); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(ioTimeout))
		if _, msg, err := conn.ReadMessage(); err != nil || string(msg) != "ping" {
			t.Fatalf("echo = %q, %v; want ping", msg, err)
		}
		conn.Close() // without a close frame, as a client that vanished
		waitClosed(t, closed, "closing the runtime's connection after the client left")
	})
	t.Run("runtime closes", func(t *testing.T) {
		checkGoroutines(t)
		backend, _ := tunnelBackend(t, func(rw io.ReadWriter) { io.WriteString(rw, "bye") })
		srv := newStreamingServer(t, &fakeStreamer{backend: backend.URL})
		conn := dialTunnel(t, srv.URL)
		defer conn.Close()
		_ = conn.SetReadDeadline(time.Now().Add(ioTimeout))
		var got []byte
		var err error
		for {
			var msg []byte
			if _, msg, err = conn.ReadMessage(); err != nil {
				break
			}
			got = append(got, msg...)
		}
		if string(got) != "bye" || !websocket.IsCloseError(err, websocket.CloseNormalClosure) {
			t.Errorf("tunnel read %q, then %v; want %q, then a normal close", got, err, "bye")
		}
	})
}

// TestStreamingWebSocketErrorsAreStatus checks that a WebSocket request
// refused before any upgrade gets its error as a JSON Status, which
// client-go's WebSocket clients decode.
func TestStreamingWebSocketErrorsAreStatus(t *testing.T) {
	srv := newStreamingServer(t, &fakeStreamer{backend: "http://127.0.0.1:1"})
	tests := []struct {
		path, subprotocol string
		code              int
		message           string
	}{
		{"/exec/ns/missing/app?command=ls&output=1", "v5.channel.k8s.io", http.StatusNotFound, `pod "missing" does not exist`},
		{"/attach/ns/web/stopped?output=1", "v4.channel.k8s.io", http.StatusBadRequest, `container "stopped" is not running`},
		{"/portForward/ns/web?port=http", "portforward.k8s.io", http.StatusBadRequest, `unable to parse "http" as a port`},
	}
	for _, tt := range tests {
		d := websocket.Dialer{Subprotocols: []string{tt.subprotocol}, HandshakeTimeout: ioTimeout}
		conn, resp, err := d.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+tt.path, nil)
		if err == nil {
			conn.Close()
			t.Errorf("%s: WebSocket dial succeeded, want %d", tt.path, tt.code)
			continue
		}
		if resp == nil {
			t.Errorf("%s: WebSocket dial: %v, want a response", tt.path, err)
			continue
		}
		var status metav1.Status
		decErr := json.NewDecoder(resp.Body).Decode(&status)
		resp.Body.Close()
		if resp.StatusCode != tt.code || resp.Header.Get("Content-Type") != "application/json" || decErr != nil ||
			status.Status != metav1.StatusFailure || status.Code != int32(tt.code) || !strings.Contains(status.Message, tt.message) {
			t.Errorf("%s: answer %d %q with %+v (%v), want %d with a Status saying %q",
				tt.path, resp.StatusCode, resp.Header.Get("Content-Type"), status, decErr, tt.code, tt.message)
		}
	}
}
