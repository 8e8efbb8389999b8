package runtime

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine outlives them. The
// goroutines of one kind of connection are known and not ours: when
// k8s.io/cri-client's builder fails to validate a new connection
// (TestNewErrors, TestImageEndpointErrors) it returns without closing its
// gRPC client, which goes on trying to connect. Every Runtime the tests
// make is closed.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run"),
		goleak.IgnoreTopFunction("google.golang.org/grpc.(*addrConn).resetTransportAndUnlock"),
	)
}
