package criclient

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine outlives them: every
// client the tests make is closed, and a failed construction must close
// its own.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
