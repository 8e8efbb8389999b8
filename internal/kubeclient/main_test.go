package kubeclient

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine outlives them. Two
// kinds of client-go goroutines live as long as the process and are not
// leaks of the package:
//   - the integration tests talk to a real API server over HTTP/2: client-go
//     keeps its transports, and their connections' read loops, for the
//     whole process (they end when the server closes an idle connection);
//   - a kubeconfig whose client certificate is a file gets client-go's
//     certificate reloader (transport.dynamicClientCert), whose worker and
//     poll loops run until a stop channel that is never closed.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*ClientConn).readLoop"),
		// The reloader, its worker, and its poll loop (the deprecated
		// wait.PollImmediateUntil, which nothing in this module calls).
		goleak.IgnoreAnyFunction("k8s.io/client-go/transport.(*dynamicClientCert).run"),
		goleak.IgnoreAnyFunction("k8s.io/client-go/transport.(*dynamicClientCert).processNextWorkItem"),
		goleak.IgnoreAnyFunction("k8s.io/apimachinery/pkg/util/wait.PollImmediateUntil"),
		goleak.IgnoreTopFunction("k8s.io/apimachinery/pkg/util/wait.PollImmediateUntilWithContext.poller.func1.1"),
		// The reloader's work queue's delay loop, which it never shuts
		// down (nothing in this package makes a work queue).
		goleak.IgnoreTopFunction("k8s.io/client-go/util/workqueue.(*delayingType[...]).waitingLoop"),
	)
}
