package kubeclient

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine outlives them. The
// integration tests talk to a real API server over HTTP/2: client-go keeps
// its transports, and their connections' read loops, for the whole process
// (they end when the server closes an idle connection), so those are not
// leaks of the package.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*ClientConn).readLoop"))
}
