package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"k8s.io/apimachinery/pkg/util/portforward"
	"k8s.io/klog/v2"
	"k8s.io/streaming/pkg/httpstream"
)

// tunnelPortForward serves kubectl's WebSocket port forwarding: SPDY
// carried in WebSocket binary messages, with the subprotocol
// "SPDY/3.1+portforward.k8s.io". It asks the runtime's stream server at u
// for a SPDY upgrade with the protocols the client offered; once the
// runtime has switched protocols it accepts the client's WebSocket with
// the runtime's protocol, and the rest is a byte pipe between the two:
// each binary message to the runtime, what the runtime sends as binary
// messages. A runtime that refuses is answered to the client with its
// status code and message, before the WebSocket is accepted. Either side
// ending, or ctx, closes both; nothing of the tunnel outlives the call.
func tunnelPortForward(ctx context.Context, w http.ResponseWriter, r *http.Request, u *url.URL) {
	logger := klog.FromContext(ctx)
	protocols := tunneledProtocols(r)
	if len(protocols) == 0 {
		writeStreamError(logger, w, r, "portForward", &paramError{fmt.Errorf("no %s WebSocket subprotocol offered", portforward.WebsocketsSPDYTunnelingPrefix)})
		return
	}
	backend, resp, err := upgradeSPDY(ctx, u, protocols)
	if err != nil {
		writeStreamError(logger, w, r, "portForward", err)
		return
	}
	protocol := strings.TrimSpace(resp.Header.Get(httpstream.HeaderProtocolVersion))
	up := websocket.Upgrader{
		// Clients authenticate with credentials of their own, not a
		// browser's cookies: any origin may connect.
		CheckOrigin: func(*http.Request) bool { return true },
	}
	if protocol != "" {
		up.Subprotocols = []string{portforward.WebsocketsSPDYTunnelingPrefix + protocol}
	}
	ws, err := up.Upgrade(w, r, nil)
	if err != nil {
		// Upgrade answered the client.
		_ = backend.Close()
		logger.V(2).Info("WebSocket handshake failed", "verb", "portForward", "err", err)
		return
	}
	logger.V(4).Info("WebSocket tunnel to the runtime established", "verb", "portForward", "subprotocol", ws.Subprotocol())
	pipeTunnel(ctx, ws, backend)
}

// tunneledProtocols are the SPDY protocols of the client's tunneling
// WebSocket subprotocols: "SPDY/3.1+portforward.k8s.io" is
// "portforward.k8s.io".
func tunneledProtocols(r *http.Request) []string {
	var out []string
	for _, p := range websocket.Subprotocols(r) {
		if rest, ok := strings.CutPrefix(p, portforward.WebsocketsSPDYTunnelingPrefix); ok && strings.HasSuffix(rest, portforward.KubernetesSuffix) {
			out = append(out, rest)
		}
	}
	return out
}

// pipeTunnel copies the client's binary messages to backend and what
// backend sends to the client as binary messages, until either side ends
// or ctx does; then it closes both and returns once both copies have
// ended. When the runtime ends first, the client gets a close frame and
// wsCloseGrace to answer it.
func pipeTunnel(ctx context.Context, ws *websocket.Conn, backend net.Conn) {
	logger := klog.FromContext(ctx)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() {
		defer cancel()
		err := copyToWebSocket(ws, backend)
		logger.V(4).Info("Runtime side of the tunnel ended", "err", err)
		cerr := ws.WriteControl(websocket.CloseMessage,
			websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(wsControlTimeout))
		if cerr != nil {
			return
		}
		grace := time.NewTimer(wsCloseGrace)
		defer grace.Stop()
		select {
		case <-ctx.Done():
		case <-grace.C:
		}
	})
	wg.Go(func() {
		defer cancel()
		err := copyFromWebSocket(backend, ws)
		if websocket.IsCloseError(err, websocket.CloseNormalClosure, websocket.CloseGoingAway) {
			err = nil
		}
		logger.V(4).Info("Client side of the tunnel ended", "err", err)
	})
	<-ctx.Done()
	_ = ws.Close()
	_ = backend.Close()
	wg.Wait()
}

// copyToWebSocket sends what it reads from r as binary messages until r
// ends (nil at EOF) or a write fails.
func copyToWebSocket(ws *websocket.Conn, r io.Reader) error {
	buf := make([]byte, 32*1024)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if werr := ws.WriteMessage(websocket.BinaryMessage, buf[:n]); werr != nil {
				return werr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// copyFromWebSocket writes the data of the client's binary messages to w
// until the connection ends, a message is not binary, or a write fails.
func copyFromWebSocket(w io.Writer, ws *websocket.Conn) error {
	buf := make([]byte, 32*1024)
	// Hides a connection's ReadFrom from CopyBuffer: the buffer is reused.
	dst := struct{ io.Writer }{w}
	for {
		kind, msg, err := ws.NextReader()
		if err != nil {
			return err
		}
		if kind != websocket.BinaryMessage {
			return fmt.Errorf("unexpected WebSocket message type %d", kind)
		}
		if _, err := io.CopyBuffer(dst, msg, buf); err != nil {
			return err
		}
	}
}
