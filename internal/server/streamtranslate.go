package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	rc "k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/client-go/tools/remotecommand"
	clientspdy "k8s.io/client-go/transport/spdy"
	utilexec "k8s.io/client-go/util/exec"
	"k8s.io/klog/v2"
	streamhttp "k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/spdy"
)

// Timing of the WebSocket side of translated and tunneled sessions.
const (
	// wsIdleTimeout ends a session whose client has sent nothing, not
	// even a ping, for this long (the kubelet's WebSocket servers use
	// the same); it also bounds each write of the session's output.
	wsIdleTimeout = 4 * time.Hour
	// wsStatusTimeout bounds writing the final status of a session.
	wsStatusTimeout = 10 * time.Second
	// wsControlTimeout bounds writing a close or pong frame.
	wsControlTimeout = time.Second
	// wsCloseGrace is how long the server waits for the client to answer
	// its close frame before it drops the connection. Closing while the
	// client still sends could reset the connection and lose the end of
	// the output on the client's side.
	wsCloseGrace = 5 * time.Second
	// spdyPingPeriod keeps the connection to the runtime's stream server
	// alive through idle periods, as client-go's SPDY clients do.
	spdyPingPeriod = 5 * time.Second
)

// remoteCommandProtocols are the SPDY remote command protocols asked of
// the runtime, most preferred first: those of client-go's executor, which
// runs the session.
var remoteCommandProtocols = []string{
	rc.StreamProtocolV5Name, rc.StreamProtocolV4Name, rc.StreamProtocolV3Name, rc.StreamProtocolV2Name, rc.StreamProtocolV1Name,
}

// translateRemoteCommand serves an exec or attach session of a WebSocket
// client of the v5.channel.k8s.io protocol by running it as a SPDY client
// of the runtime's stream server at u, which every CRI runtime serves.
//
// The runtime is asked first: the client's WebSocket is accepted once the
// runtime has switched protocols, so that a runtime that refuses answers
// the client's handshake with its status code and message. client-go's
// SPDY executor then runs the session on that connection, relaying
// stdin, stdout, stderr and terminal sizes, and the session ends with its
// status (success, the exit code, or the error) on the error channel. The
// client leaving ends the session with the runtime; the session ending
// closes the client's connection. Nothing of the session outlives the
// call but the executor's own goroutines, which end with the runtime
// connection it closes before it returns.
func translateRemoteCommand(ctx context.Context, w http.ResponseWriter, r *http.Request, verb string, u *url.URL, o StreamOptions) {
	logger := klog.FromContext(ctx)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	conn, resp, err := upgradeSPDY(ctx, u, remoteCommandProtocols)
	if err != nil {
		writeStreamError(logger, w, r, verb, err)
		return
	}
	c := newChannelServer(o)
	if err := c.accept(ctx, cancel, w, r); err != nil {
		// The handshake answered the client.
		_ = conn.Close()
		logger.V(2).Info("WebSocket handshake failed", "verb", verb, "err", err)
		return
	}
	protocol := resp.Header.Get(streamhttp.HeaderProtocolVersion)
	logger.V(4).Info("Runtime connection upgraded", "verb", verb, "protocol", protocol)
	spdyConn, err := spdy.NewClientConnectionWithPings(conn, spdyPingPeriod)
	if err == nil {
		up := &upgraded{resp: resp, conn: spdyConn}
		var exec remotecommand.Executor
		exec, err = remotecommand.NewSPDYExecutorForProtocols(up, clientspdy.NewUpgraderForStreaming(up), http.MethodPost, u, protocol)
		if err == nil {
			err = exec.StreamWithContext(ctx, c.streamOptions(ctx))
		} else {
			_ = spdyConn.Close()
		}
	}
	// The client left, or the request's context ended: there is no one
	// to report to, or no time to.
	aborted := ctx.Err() != nil
	// The executor is done: stop relaying terminal sizes to it.
	cancel()
	c.finish(logger, verb, err, aborted)
}

// upgraded hands client-go's SPDY executor a runtime connection already
// upgraded, as its transport (RoundTrip answers the runtime's response
// to the upgrade, whose protocol header selects the executor's protocol)
// and its upgrader (NewConnection returns the connection, which the
// executor closes when it is done).
type upgraded struct {
	resp *http.Response
	conn streamhttp.Connection
}

func (u *upgraded) RoundTrip(*http.Request) (*http.Response, error) { return u.resp, nil }

func (u *upgraded) NewConnection(*http.Response) (streamhttp.Connection, error) { return u.conn, nil }

// channelServer is the server side of a v5.channel.k8s.io WebSocket.
// Each binary message is a channel number and data: the client writes
// stdin (0) and terminal sizes as JSON (4), and half-closes a channel
// with the message {255, channel}; the server writes stdout (1), stderr
// (2) and, last, the session's status as JSON (3).
type channelServer struct {
	opts StreamOptions
	// The client's stdin as the executor reads it; nil without stdin.
	stdin  *io.PipeReader
	stdinW *io.PipeWriter
	// The client's latest terminal size not yet taken by the executor;
	// used only with a TTY.
	sizes chan remotecommand.TerminalSize
	// readDone is closed when the client's side has ended: it closed
	// the connection or the connection failed.
	readDone chan struct{}

	ws *websocket.Conn // set by accept
	mu sync.Mutex      // serializes writes
}

func newChannelServer(o StreamOptions) *channelServer {
	c := &channelServer{opts: o, sizes: make(chan remotecommand.TerminalSize, 1), readDone: make(chan struct{})}
	if o.Stdin {
		c.stdin, c.stdinW = io.Pipe()
	}
	return c
}

// streamOptions are the executor's ends of the client's streams.
func (c *channelServer) streamOptions(ctx context.Context) remotecommand.StreamOptions {
	var so remotecommand.StreamOptions
	if c.opts.Stdin {
		so.Stdin = c.stdin
	}
	if c.opts.Stdout {
		so.Stdout = channelWriter{c, rc.StreamStdOut}
	}
	if c.opts.Stderr {
		so.Stderr = channelWriter{c, rc.StreamStdErr}
	}
	if c.opts.TTY {
		so.Tty = true
		so.TerminalSizeQueue = sizeQueue{ctx: ctx, sizes: c.sizes}
	}
	return so
}

// accept completes the client's WebSocket handshake, tells the client
// the session is established with an empty message on its first output
// channel (as the API server's translator does), and starts reading the
// client's messages until the connection ends, which calls end. A failed
// handshake has answered the client.
func (c *channelServer) accept(ctx context.Context, end context.CancelFunc, w http.ResponseWriter, r *http.Request) error {
	up := websocket.Upgrader{
		Subprotocols: []string{rc.StreamProtocolV5Name},
		// Clients authenticate with credentials of their own, not a
		// browser's cookies: any origin may connect, as with the
		// kubelet's other WebSocket endpoints.
		CheckOrigin: func(*http.Request) bool { return true },
	}
	ws, err := up.Upgrade(w, r, nil)
	if err != nil {
		return fmt.Errorf("accepting the WebSocket: %w", err)
	}
	if ws.Subprotocol() != rc.StreamProtocolV5Name {
		_ = ws.Close()
		return fmt.Errorf("client did not accept subprotocol %s", rc.StreamProtocolV5Name)
	}
	first := byte(rc.StreamErr)
	switch {
	case c.opts.Stdout:
		first = rc.StreamStdOut
	case c.opts.Stderr:
		first = rc.StreamStdErr
	}
	_ = ws.SetWriteDeadline(time.Now().Add(wsStatusTimeout))
	if err := ws.WriteMessage(websocket.BinaryMessage, []byte{first}); err != nil {
		_ = ws.Close()
		return fmt.Errorf("writing to the WebSocket: %w", err)
	}
	c.ws = ws
	logger := klog.FromContext(ctx)
	ws.SetPingHandler(func(data string) error {
		_ = ws.SetReadDeadline(time.Now().Add(wsIdleTimeout))
		return pong(ws, data)
	})
	go func() {
		defer close(c.readDone)
		defer end()
		err := c.readLoop(ctx)
		if websocket.IsCloseError(err, websocket.CloseNormalClosure, websocket.CloseGoingAway) {
			err = nil
		}
		logger.V(4).Info("WebSocket client side ended", "err", err)
	}()
	return nil
}

// pong answers a ping as gorilla/websocket's default ping handler does:
// a connection already closing or failing is no error of the reader.
func pong(ws *websocket.Conn, data string) error {
	err := ws.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(wsControlTimeout))
	var nerr net.Error
	if err == nil || errors.Is(err, websocket.ErrCloseSent) || errors.As(err, &nerr) {
		return nil
	}
	return err
}

// readLoop reads the client's messages until the connection ends. Stdin
// is passed on as the executor reads it (a client that writes faster
// waits); stdin after the session or after the client half-closed it is
// dropped, as are sizes without a TTY and unknown channels. Sizes never
// block the loop.
func (c *channelServer) readLoop(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	buf := make([]byte, 32*1024)
	for {
		if err := c.ws.SetReadDeadline(time.Now().Add(wsIdleTimeout)); err != nil {
			return err
		}
		kind, msg, err := c.ws.NextReader()
		if err != nil {
			return err
		}
		if kind != websocket.BinaryMessage {
			return fmt.Errorf("unexpected WebSocket message type %d", kind)
		}
		if _, err := io.ReadFull(msg, buf[:1]); err != nil {
			continue // an empty message
		}
		switch buf[0] {
		case rc.StreamStdIn:
			if c.stdinW != nil {
				// Hides the pipe's lack of ReadFrom from CopyBuffer:
				// the buffer is reused.
				_, _ = io.CopyBuffer(struct{ io.Writer }{c.stdinW}, msg, buf)
			}
		case rc.StreamResize:
			if !c.opts.TTY {
				continue
			}
			dec := json.NewDecoder(msg)
			for {
				var size remotecommand.TerminalSize
				if err := dec.Decode(&size); err != nil {
					if !errors.Is(err, io.EOF) {
						logger.V(4).Info("Ignoring an invalid terminal size", "err", err)
					}
					break
				}
				select {
				case c.sizes <- size:
				default:
					// The executor has not taken the previous size yet
					// (or does not take sizes): the newer replaces it.
					// This is the only sender, so the send cannot block.
					select {
					case <-c.sizes:
					default:
					}
					c.sizes <- size
				}
			}
		case rc.StreamClose:
			if _, err := io.ReadFull(msg, buf[:1]); err != nil {
				continue
			}
			logger.V(4).Info("Client closed a channel", "channel", buf[0])
			if buf[0] == rc.StreamStdIn && c.stdinW != nil {
				_ = c.stdinW.Close()
			}
		}
	}
}

// channelWriter writes to one of the client's output channels.
type channelWriter struct {
	c  *channelServer
	ch byte
}

func (w channelWriter) Write(p []byte) (int, error) {
	if err := w.c.write(w.ch, p, wsIdleTimeout); err != nil {
		return 0, err
	}
	return len(p), nil
}

// write sends p on channel ch in one message, within timeout.
func (c *channelServer) write(ch byte, p []byte, timeout time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.ws.SetWriteDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	mw, err := c.ws.NextWriter(websocket.BinaryMessage)
	if err != nil {
		return err
	}
	if _, err := mw.Write([]byte{ch}); err != nil {
		_ = mw.Close()
		return err
	}
	if _, err := mw.Write(p); err != nil {
		_ = mw.Close()
		return err
	}
	return mw.Close()
}

// finish ends an accepted session that ended with err: unless the
// session was aborted or the client has left, it writes the status and
// closes the connection with the client's agreement (or after
// wsCloseGrace); it returns once the connection is closed and the read
// loop has ended. The executor must be done and the session's context
// canceled. An aborted session's executor may still be writing output
// (until the connection closes), so the status is not written then.
func (c *channelServer) finish(logger klog.Logger, verb string, err error, aborted bool) {
	if c.stdinW != nil {
		// The executor's stdin gets EOF; stdin the client still sends is
		// dropped.
		_ = c.stdinW.Close()
	}
	select {
	case <-c.readDone:
		logger.V(2).Info("Streaming session ended by the client", "verb", verb, "err", err)
	default:
		if aborted {
			logger.V(2).Info("Streaming session aborted", "verb", verb, "err", err)
			break
		}
		status := remoteCommandStatus(err)
		logger.V(2).Info("Streaming session ended", "verb", verb, "status", status.Status, "reason", status.Reason, "message", status.Message)
		body, merr := json.Marshal(status)
		if merr == nil {
			merr = c.write(rc.StreamErr, body, wsStatusTimeout)
		}
		if merr != nil {
			logger.V(2).Info("Failed to write the session's status", "verb", verb, "err", merr)
			break
		}
		werr := c.ws.WriteControl(websocket.CloseMessage,
			websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(wsControlTimeout))
		if werr != nil {
			break
		}
		grace := time.NewTimer(wsCloseGrace)
		select {
		case <-c.readDone:
		case <-grace.C:
			logger.V(4).Info("The client did not answer the close frame", "verb", verb)
		}
		grace.Stop()
	}
	_ = c.ws.Close()
	<-c.readDone
}

// remoteCommandStatus is what the error channel reports for a session
// that ended with err: success, the exit code of a command that exited
// non-zero (which clients turn back into an exit error), or a failure.
func remoteCommandStatus(err error) metav1.Status {
	s := metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess}
	if err == nil {
		return s
	}
	var exit utilexec.ExitError
	if errors.As(err, &exit) && exit.Exited() {
		s.Status = metav1.StatusFailure
		s.Reason = rc.NonZeroExitCodeReason
		s.Message = fmt.Sprintf("command terminated with non-zero exit code: %v", err)
		s.Details = &metav1.StatusDetails{Causes: []metav1.StatusCause{{
			Type: rc.ExitCodeCauseType, Message: strconv.Itoa(exit.ExitStatus()),
		}}}
		return s
	}
	var apiStatus apierrors.APIStatus
	if errors.As(err, &apiStatus) {
		st := apiStatus.Status()
		st.TypeMeta = s.TypeMeta
		return st
	}
	s.Status = metav1.StatusFailure
	s.Reason = metav1.StatusReasonInternalError
	s.Code = http.StatusInternalServerError
	s.Message = err.Error()
	return s
}

// sizeQueue hands the client's terminal sizes to the executor until ctx
// ends (remotecommand.TerminalSizeQueue: Next blocks for the next size,
// nil when there will be none).
type sizeQueue struct {
	ctx   context.Context
	sizes <-chan remotecommand.TerminalSize
}

func (q sizeQueue) Next() *remotecommand.TerminalSize {
	select {
	case s := <-q.sizes:
		return &s
	case <-q.ctx.Done():
		return nil
	}
}
