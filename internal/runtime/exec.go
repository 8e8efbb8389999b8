package runtime

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	utilexec "k8s.io/utils/exec"

	"github.com/heartlet/heartlet/internal/criclient"
)

const opExecSync = "exec_sync"

// ErrExecTimeout is in the chain of an ExecSync error when the command did
// not finish within its timeout.
var ErrExecTimeout = errors.New("command timed out")

// ExecResult is the outcome of a command run in a container.
type ExecResult struct {
	Stdout, Stderr []byte
	ExitCode       int
}

// ExecSync runs cmd in a running container and waits at most timeout (0:
// no limit) for it to finish. A command that ran and exited non-zero is
// not an error: its exit code is in the result. Errors are the runtime's
// (the container is gone, the command could not start) or ErrExecTimeout.
func (r *Runtime) ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (_ ExecResult, err error) {
	defer r.record(opExecSync, r.clock.Now(), &err)
	stdout, stderr, err := r.rs.ExecSync(ctx, containerID, cmd, timeout)
	res := ExecResult{Stdout: stdout, Stderr: stderr}
	var exitErr utilexec.ExitError
	switch {
	case err == nil:
		return res, nil
	case errors.As(err, &exitErr):
		res.ExitCode = exitErr.ExitStatus()
		return res, nil
	case errors.Is(err, criclient.ErrCommandTimedOut) || status.Code(err) == codes.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded):
		return res, wrap(errors.Join(ErrExecTimeout, err), "exec in container %s (timeout %s)", containerID, timeout)
	}
	return res, wrap(err, "exec in container %s", containerID)
}
