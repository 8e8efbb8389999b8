package kubeclient

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// blackhole is a TCP proxy that can stop forwarding without closing
// anything, as a peer that vanished from the network: bytes go in, nothing
// comes back.
type blackhole struct {
	ln       net.Listener
	backend  string
	dropping atomic.Bool
	accepted atomic.Int32
	// clientClosed receives one value each time a client closes its end.
	clientClosed chan struct{}
	wg           sync.WaitGroup

	mu    sync.Mutex
	conns []net.Conn
}

func newBlackhole(t *testing.T, backend string) *blackhole {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &blackhole{ln: ln, backend: backend, clientClosed: make(chan struct{}, 16)}
	b.wg.Add(1)
	go b.serve()
	t.Cleanup(func() {
		_ = ln.Close()
		b.mu.Lock()
		for _, c := range b.conns {
			_ = c.Close()
		}
		b.mu.Unlock()
		b.wg.Wait()
	})
	return b
}

func (b *blackhole) addr() string { return b.ln.Addr().String() }

func (b *blackhole) serve() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.accepted.Add(1)
		s, err := net.Dial("tcp", b.backend)
		if err != nil {
			_ = c.Close()
			continue
		}
		b.mu.Lock()
		b.conns = append(b.conns, c, s)
		b.mu.Unlock()
		b.wg.Add(2)
		go func() {
			defer b.wg.Done()
			b.pump(s, c)
			_ = s.Close()
			b.clientClosed <- struct{}{}
		}()
		go func() {
			defer b.wg.Done()
			b.pump(c, s)
			_ = c.Close()
		}()
	}
}

// pump copies src to dst, dropping what it reads while the hole is on.
func (b *blackhole) pump(dst io.Writer, src io.Reader) {
	buf := make([]byte, 32*1024)
	for {
		n, err := src.Read(buf)
		if n > 0 && !b.dropping.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// TestHTTP2HealthCheck proves that heartlet's clients notice a connection
// whose peer stopped answering and move to a new one, for every way of
// passing credentials (client-go builds a different transport for each).
// The health check timeouts are shortened through the environment that
// client-go reads, so the test takes seconds instead of 45.
func TestHTTP2HealthCheck(t *testing.T) {
	t.Setenv(envHTTP2ReadIdle, "1")
	t.Setenv(envHTTP2Ping, "1")
	ca := newTestCA(t, "cluster-ca")

	script := "#!/bin/sh\necho '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"from-exec\"}}'\n"
	tests := []struct {
		name     string
		user     func(t *testing.T, dir string) string
		identity string
	}{
		{"client certificate files (rotating)", func(t *testing.T, dir string) string { return certUser(t, dir, ca, "system:node:n") }, "system:node:n"},
		{"bearer token", func(t *testing.T, dir string) string { return "    token: tok\n" }, "token:tok"},
		{"exec plugin", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "cred.sh")
			if err := os.WriteFile(p, []byte(script), 0o700); err != nil {
				t.Fatal(err)
			}
			return "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: " + p + "\n      interactiveMode: Never\n"
		}, "token:from-exec"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := startTLS(t, ca, &fakeAPI{}, "")
			hole := newBlackhole(t, srv.Listener.Addr().String())
			dir := t.TempDir()
			path := writeKubeconfig(t, dir, "https://"+hole.addr(), ca.certPEM, tc.user(t, dir))

			c, err := Load(context.Background(), Options{Kubeconfig: path, PreflightTimeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if c.Identity != tc.identity {
				t.Errorf("Identity = %q, want %q", c.Identity, tc.identity)
			}
			if n := hole.accepted.Load(); n != 1 {
				t.Fatalf("preflight used %d connections, want 1 (HTTP/2 multiplexes)", n)
			}

			hole.dropping.Store(true)
			select {
			case <-hole.clientClosed:
			case <-time.After(15 * time.Second):
				t.Fatal("the client kept a connection whose peer stopped answering; HTTP/2 health checks are off")
			}
			hole.dropping.Store(false)

			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if _, err := c.Kube.CoreV1().RESTClient().Get().AbsPath("/version").Do(ctx).Raw(); err != nil {
				t.Fatalf("request after reconnect: %v", err)
			}
			if n := hole.accepted.Load(); n != 2 {
				t.Errorf("connections = %d, want 2 (one new after the dead one)", n)
			}
		})
	}
}

func TestCloseAllConns(t *testing.T) {
	ca := newTestCA(t, "cluster-ca")
	srv := startTLS(t, ca, &fakeAPI{}, "")
	hole := newBlackhole(t, srv.Listener.Addr().String())
	dir := t.TempDir()
	path := writeKubeconfig(t, dir, "https://"+hole.addr(), ca.certPEM, certUser(t, dir, ca, "system:node:n"))
	c, err := Load(context.Background(), Options{Kubeconfig: path})
	if err != nil {
		t.Fatal(err)
	}
	c.CloseAllConns()
	select {
	case <-hole.clientClosed:
	case <-time.After(10 * time.Second):
		t.Fatal("CloseAllConns left the connection open")
	}
	if _, err := c.Kube.CoreV1().RESTClient().Get().AbsPath("/version").Do(context.Background()).Raw(); err != nil {
		t.Fatalf("request after CloseAllConns: %v", err)
	}
	if n := hole.accepted.Load(); n != 2 {
		t.Errorf("connections = %d, want 2", n)
	}
}

func TestHTTP2Health(t *testing.T) {
	tests := []struct {
		name           string
		env            map[string]string
		readIdle, ping time.Duration
		disabled       bool
	}{
		{"defaults", nil, 30 * time.Second, 15 * time.Second, false},
		{"overridden", map[string]string{envHTTP2ReadIdle: "5", envHTTP2Ping: "2"}, 5 * time.Second, 2 * time.Second, false},
		{"read idle off", map[string]string{envHTTP2ReadIdle: "0"}, 0, 15 * time.Second, false},
		{"negative read idle is off", map[string]string{envHTTP2ReadIdle: "-3"}, 0, 15 * time.Second, false},
		{"zero ping is the default", map[string]string{envHTTP2Ping: "0"}, 30 * time.Second, 15 * time.Second, false},
		{"garbage is the default", map[string]string{envHTTP2ReadIdle: "x", envHTTP2Ping: "y"}, 30 * time.Second, 15 * time.Second, false},
		{"http2 disabled", map[string]string{envDisableHTTP2: "1"}, 0, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			readIdle, ping, disabled := HTTP2Health(func(k string) string { return tc.env[k] })
			if readIdle != tc.readIdle || ping != tc.ping || disabled != tc.disabled {
				t.Errorf("HTTP2Health = %v, %v, %v; want %v, %v, %v", readIdle, ping, disabled, tc.readIdle, tc.ping, tc.disabled)
			}
		})
	}
}
