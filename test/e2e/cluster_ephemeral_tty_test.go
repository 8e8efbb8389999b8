//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal pair: the controlling side the test
// reads and writes, and the terminal side kubectl gets as its stdin,
// stdout and stderr.
func openPTY(t *testing.T) (ptm, pts *os.File) {
	t.Helper()
	ptm, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open /dev/ptmx: %v", err)
	}
	fd := int(ptm.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlock pty: %v", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("pty number: %v", err)
	}
	pts, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open /dev/pts/%d: %v", n, err)
	}
	if err := unix.IoctlSetWinsize(int(pts.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 40, Col: 120}); err != nil {
		t.Fatalf("set the terminal size: %v", err)
	}
	return ptm, pts
}

// ttyOutput collects what the terminal shows.
type ttyOutput struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *ttyOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

func (o *ttyOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// Interactive debugging as a user does it at a terminal: `kubectl debug
// -it POD --image=... --target=main` adds an ephemeral container with
// stdin and a TTY through the ephemeralcontainers subresource, waits for
// it to run and attaches to it through the API server (which proxies to
// heartlet's attach endpoint) with a TTY. A command typed on the terminal
// runs in the container, in the target's PID namespace, and its output
// comes back; `exit` ends the shell, the session and the container, which
// is never restarted. As upstream's test/e2e/common/node/ephemeral_containers.go
// and kubectl's debug command (k8s.io/kubectl/pkg/cmd/debug).
func TestClusterEphemeralContainerInteractive(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{})
	const name = "api-ephemeral-tty"
	createPod(t, apiPod(name, nil))
	pod := waitAPIPodRunning(t, h, name)
	appID := statusOf(pod, "main").ContainerID

	ptm, pts := openPTY(t)
	defer ptm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kubectl", "--kubeconfig", adminKubeconfig, "debug", "-it", "-n", "default", name,
		"-c", "dbg-tty", "--image="+busyboxImage, "--target=main", "--", "sh")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pts, pts, pts
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start kubectl debug -it: %v", err)
	}
	pts.Close()
	var out ttyOutput
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		b := make([]byte, 4096)
		for {
			n, err := ptm.Read(b)
			if n > 0 {
				_, _ = out.Write(b[:n])
			}
			if err != nil {
				return
			}
		}
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	// kubectl prints "If you don't see a command prompt, try pressing
	// enter." once attached; the shell's prompt follows.
	waitFor(t, 2*time.Minute, "kubectl debug -it to attach", func() (bool, string) {
		select {
		case err := <-exited:
			t.Fatalf("kubectl debug -it ended before attaching: %v; terminal:\n%s", err, out.String())
		default:
		}
		p, err := getAPIPod(name)
		if err != nil || p == nil {
			return false, fmt.Sprintf("get pod: %v", err)
		}
		st := ephemeralStatus(p, "dbg-tty")
		return st != nil && st.State.Running != nil && strings.Contains(out.String(), "command prompt"), "terminal: " + out.String()
	})
	p, err := getAPIPod(name)
	if err != nil || p == nil {
		t.Fatalf("get pod: %v", err)
	}
	for _, ec := range p.Spec.EphemeralContainers {
		if ec.Name == "dbg-tty" && (!ec.Stdin || !ec.TTY || ec.TargetContainerName != "main") {
			t.Errorf("ephemeral container spec stdin=%v tty=%v target=%q, want stdin, tty, target main", ec.Stdin, ec.TTY, ec.TargetContainerName)
		}
	}

	// A command typed at the terminal: its output (computed in the
	// container, so the echo of the typed line cannot match) and the
	// target's processes (the app's shell loop) come back.
	if _, err := ptm.Write([]byte("echo tty=$(tty) sum=$((6*7)); ps -o pid,args | grep -c 'while tru[e]'\r")); err != nil {
		t.Fatalf("write to the terminal: %v", err)
	}
	waitFor(t, 30*time.Second, "the command's output on the terminal", func() (bool, string) {
		s := out.String()
		return strings.Contains(s, "sum=42") && strings.Contains(s, "tty=/dev/pts/"), "terminal: " + s
	})
	s := out.String()
	if i := strings.Index(s, "sum=42"); i >= 0 && !strings.Contains(s[i:], "\r\n1\r\n") {
		t.Errorf("ps in dbg-tty does not show the target's shell loop once; terminal:\n%s", s)
	}

	// exit ends the shell: the session and kubectl end, the container is
	// Terminated with exit code 0 and not started again.
	if _, err := ptm.Write([]byte("exit\r")); err != nil {
		t.Fatalf("write exit: %v", err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("kubectl debug -it: %v; terminal:\n%s", err, out.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("kubectl debug -it did not end after exit; terminal:\n%s", out.String())
	}
	<-copied
	t.Logf("terminal:\n%s", out.String())
	pod = waitAPIPod(t, h, name, podStartTimeout, "to report dbg-tty Terminated", func(p *v1.Pod) bool {
		st := ephemeralStatus(p, "dbg-tty")
		return st != nil && st.State.Terminated != nil
	})
	if st := ephemeralStatus(pod, "dbg-tty"); st.State.Terminated.ExitCode != 0 || st.RestartCount != 0 {
		t.Errorf("dbg-tty status %+v, want Terminated with 0, never restarted", st)
	}
	if main := statusOf(pod, "main"); main.ContainerID != appID || main.RestartCount != 0 {
		t.Errorf("main %s (restarts %d): want the same container %s", main.ContainerID, main.RestartCount, appID)
	}
}
