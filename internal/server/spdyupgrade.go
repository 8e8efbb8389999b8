package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/proxy"
	"k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/spdy"
)

// spdyUpgradeTimeout bounds connecting to the runtime's stream server and
// its answer to the upgrade request.
const spdyUpgradeTimeout = 30 * time.Second

// upgradeSPDY connects to the runtime's stream server at u, as the
// proxy of SPDY clients does (no HTTP proxy, the system's roots for
// https), and asks it to switch to SPDY/3.1 with one of protocols (most
// preferred first). It returns the connection, reading first what the
// runtime sent after its answer, and the answer (its
// X-Stream-Protocol-Version header names the protocol chosen). The
// request carries none of the client's headers. A runtime that does not
// switch is a *runtimeUpgradeError with its status and message; its
// connection is closed.
func upgradeSPDY(ctx context.Context, u *url.URL, protocols []string) (net.Conn, *http.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, spdyUpgradeTimeout)
	defer cancel()
	conn, err := proxy.DialURL(ctx, u, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("connecting to the runtime's stream server: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			_ = conn.Close()
		}
	}()
	// The context ending ends the exchange.
	if deadline, set := ctx.Deadline(); set {
		_ = conn.SetDeadline(deadline)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	req := &http.Request{
		Method:     http.MethodPost,
		URL:        u,
		Host:       u.Host,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header: http.Header{
			httpstream.HeaderConnection:      {httpstream.HeaderUpgrade},
			httpstream.HeaderUpgrade:         {spdy.HeaderSpdy31},
			httpstream.HeaderProtocolVersion: protocols,
		},
	}
	if err := req.Write(conn); err != nil {
		return nil, nil, fmt.Errorf("asking the runtime's stream server for SPDY: %w", err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the runtime's stream server's answer: %w", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols ||
		!strings.Contains(strings.ToLower(resp.Header.Get(httpstream.HeaderConnection)), "upgrade") ||
		!strings.Contains(strings.ToLower(resp.Header.Get(httpstream.HeaderUpgrade)), strings.ToLower(spdy.HeaderSpdy31)) {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		_ = resp.Body.Close()
		msg := resp.Status
		if b := strings.TrimSpace(string(body)); b != "" {
			msg += ": " + b
		}
		return nil, nil, &runtimeUpgradeError{Status: resp.StatusCode,
			Err: fmt.Errorf("the runtime's stream server did not switch to SPDY: %s", msg)}
	}
	if !stop() {
		return nil, nil, fmt.Errorf("upgrading the runtime connection: %w", context.Cause(ctx))
	}
	if err := conn.SetDeadline(time.Time{}); err != nil {
		return nil, nil, fmt.Errorf("upgrading the runtime connection: %w", err)
	}
	ok = true
	return &bufferedConn{Conn: conn, r: br}, resp, nil
}

// bufferedConn is a connection whose reads come through r, which holds
// what was read ahead of them.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// runtimeUpgradeError is the runtime's stream server not switching
// protocols. The client gets its status code if that is an error code,
// else (a response that does not switch to the protocol asked for) 502.
type runtimeUpgradeError struct {
	Status int // the runtime's status code
	Err    error
}

func (e *runtimeUpgradeError) Error() string { return e.Err.Error() }
func (e *runtimeUpgradeError) Unwrap() error { return e.Err }

// code is the status code the client gets.
func (e *runtimeUpgradeError) code() int {
	if e.Status >= 400 && e.Status < 600 {
		return e.Status
	}
	return http.StatusBadGateway
}
