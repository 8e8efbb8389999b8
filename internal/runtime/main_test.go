package runtime

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine outlives them, a
// failed connection (TestNewErrors, TestImageEndpointErrors) included.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
