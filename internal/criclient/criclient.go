// Package criclient is heartlet's client of a CRI v1 runtime and image
// service: a thin layer over the generated gRPC stubs of
// k8s.io/cri-api/pkg/apis/runtime/v1 that implements the
// k8s.io/cri-api/pkg/apis RuntimeService and ImageManagerService
// interfaces.
//
// It exists instead of k8s.io/cri-client so that the binary does not link
// OpenTelemetry: that client always builds its gRPC connection with
// tracing instrumentation (otelgrpc, the otel SDK's API and its semantic
// conventions) and per-container error-log reduction, none of which
// heartlet uses. The semantics callers rely on are kept: every call is
// bounded by the client timeout (with the same exceptions: a longer bound
// for RunPodSandbox, StopContainer and ExecSync, none for PullImage and the
// container event stream), the same response checks, ErrCommandTimedOut and
// k8s.io/utils/exec exit errors from ExecSync, and 16 MiB responses.
//
// Every error names the CRI call that failed and keeps the gRPC status in
// its chain, so status.Code and status.FromError see through it. A failed
// construction closes its connection: nothing outlives it.
package criclient

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/mem"
	"k8s.io/klog/v2"
)

// ErrCommandTimedOut is in the chain of an ExecSync error when the command
// did not finish in time (the call ended with gRPC DeadlineExceeded).
var ErrCommandTimedOut = errors.New("command timed out")

// maxRecvMsgSize is the largest response accepted, 16 MiB as the upstream
// kubelet's (gRPC's default is 4 MiB; a node with many containers or
// images exceeds it in the list calls). The send side is left at gRPC's
// default, which does not limit requests below 2 GiB.
const maxRecvMsgSize = 16 << 20

// Connection parameters, as the upstream kubelet's: reconnect quickly to a
// restarted runtime (backoff from 100ms up to 3s) and give each connection
// attempt at least 5s.
const (
	baseBackoffDelay  = 100 * time.Millisecond
	maxBackoffDelay   = 3 * time.Second
	minConnectTimeout = 5 * time.Second
)

// bufferPool holds the buffers responses are read into (the transport's
// frames, and through codec the joined responses). gRPC's default pool has
// no size between 32 KiB and 1 MiB, so every response above 32 KiB (the
// relist's container and sandbox lists of a node with 100 pods) takes a
// 1 MiB buffer, cleared at each use and kept in the pool: 2.1 MiB of the
// 10 MiB live heap of heartlet with 100 pods. Sizes by powers of two up to
// 1 MiB waste at most half.
//
// Buffers above 1 MiB (a response of thousands of containers) are not
// kept: gRPC's pool would hand such a buffer, whatever its size, to any
// later request above 1 MiB, and keep it until the GC clears the pool.
var bufferPool mem.BufferPool = func() mem.BufferPool {
	p, err := mem.NewBinaryTieredBufferPool(8, 10, 12, 13, 14, 15, 16, 17, 18, 19, 20)
	if err != nil {
		panic(fmt.Sprintf("gRPC buffer pool: %v", err))
	}
	return boundedPool{BufferPool: p, max: 1 << 20}
}()

// boundedPool is a buffer pool that keeps no buffer larger than max.
type boundedPool struct {
	mem.BufferPool
	max int
}

// Put keeps b only when it is at most max bytes large.
func (p boundedPool) Put(b *[]byte) {
	if cap(*b) > p.max {
		return
	}
	p.BufferPool.Put(b)
}

// socketPath returns the path of the unix socket endpoint names:
// unix:///path, or a bare absolute path.
func socketPath(endpoint string) (string, error) {
	if strings.HasPrefix(endpoint, "/") {
		return endpoint, nil
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", fmt.Errorf("endpoint %q: %w", endpoint, err)
	}
	if u.Scheme != "unix" {
		return "", fmt.Errorf("endpoint %q: only unix sockets (unix:///path) are supported", endpoint)
	}
	if u.Host != "" || u.Path == "" {
		return "", fmt.Errorf("endpoint %q: want unix:///path", endpoint)
	}
	return u.Path, nil
}

// dial makes a gRPC client for the unix socket at endpoint. It does not
// connect: the first call does.
func dial(endpoint string, timeout time.Duration) (*grpc.ClientConn, error) {
	if timeout <= 0 {
		return nil, fmt.Errorf("timeout %s: must be positive", timeout)
	}
	path, err := socketPath(endpoint)
	if err != nil {
		return nil, err
	}
	params := grpc.ConnectParams{Backoff: backoff.DefaultConfig, MinConnectTimeout: minConnectTimeout}
	params.Backoff.BaseDelay = baseBackoffDelay
	params.Backoff.MaxDelay = maxBackoffDelay
	// The passthrough resolver hands the path to the dialer as it is, so
	// that it is not parsed as a URL.
	return grpc.NewClient("passthrough:///"+path,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithAuthority("localhost"),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", addr)
		}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxRecvMsgSize), grpc.ForceCodecV2(newCodec(bufferPool))),
		grpc.WithConnectParams(params),
		experimental.WithBufferPool(bufferPool),
	)
}

// fail names the CRI call that failed, keeping err (and its gRPC status)
// in the chain.
func fail(ctx context.Context, call string, err error) error {
	klog.FromContext(ctx).V(4).Info("CRI call failed", "call", call, "err", err)
	return fmt.Errorf("%s: %w", call, err)
}

// invalid is the error of a response that lacks what the call promises.
func invalid(ctx context.Context, call, format string, args ...any) error {
	return fail(ctx, call, fmt.Errorf("invalid response: "+format, args...))
}
