// Command pause is the infrastructure container of heartlet's test pod
// sandboxes. It holds the pod's namespaces open, reaps the children it
// inherits when it runs as the pod's init process, and exits 0 on SIGTERM or
// SIGINT.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "pause: warning: not running as pid 1")
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGCHLD, syscall.SIGTERM, syscall.SIGINT)
	os.Exit(run(sigs, reap))
}

// run handles signals until a termination signal arrives and returns the
// exit code. Every SIGCHLD calls reaper.
func run(sigs <-chan os.Signal, reaper func()) int {
	for s := range sigs {
		if s == syscall.SIGCHLD {
			reaper()
			continue
		}
		return 0
	}
	return 0
}

// reap collects every exited child without blocking.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
	}
}
