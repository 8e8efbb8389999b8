// Package lockfile implements the kubelet's --lock-file and
// --exit-on-lock-contention: an exclusive flock(2) on a file held for the
// life of the process, and notice when another process opens the file (a
// second node agent about to take over), on which the holder exits.
package lockfile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// retryInterval is how often a lock held by another process is tried
// again.
const retryInterval = 500 * time.Millisecond

// Acquire opens path (created with mode 0600 if missing) and takes an
// exclusive flock on it, waiting while another process holds it, until
// ctx is done. The lock lasts until release is called or the process
// ends; release is safe to call more than once.
func Acquire(ctx context.Context, path string, clk clock.Clock) (release func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening lock file %s: %w", path, err)
	}
	logged := false
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			_ = f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		if !logged {
			klog.FromContext(ctx).Info("Waiting for the lock file, held by another process", "path", path)
			logged = true
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("waiting for the lock on %s: %w", path, ctx.Err())
		case <-clk.After(retryInterval):
		}
	}
	closed := false
	return func() {
		if !closed {
			closed = true
			_ = f.Close()
		}
	}, nil
}

// WatchContention returns a channel that is closed when another process
// opens path, or the file is gone (its last link and last open descriptor),
// as the upstream kubelet watches its lock file (inotify IN_OPEN and
// IN_DELETE_SELF). Call it after Acquire: this
// process's own open is not reported. The watch ends when ctx is done
// (the channel is then left open).
func WatchContention(ctx context.Context, path string) (<-chan struct{}, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("watching lock file %s: %w", path, err)
	}
	if _, err := unix.InotifyAddWatch(fd, path, unix.IN_OPEN|unix.IN_DELETE_SELF); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("watching lock file %s: %w", path, err)
	}
	// A non-blocking descriptor in an *os.File is served by the runtime's
	// poller, so Close ends a Read in progress.
	f := os.NewFile(uintptr(fd), "inotify:"+path)
	contended := make(chan struct{})
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		buf := make([]byte, unix.SizeofInotifyEvent+unix.NAME_MAX+1)
		n, err := f.Read(buf)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			klog.FromContext(ctx).Error(err, "Watching the lock file failed, treating it as contention", "path", path)
		} else if n >= unix.SizeofInotifyEvent {
			klog.FromContext(ctx).Info("Another process opened or removed the lock file", "path", path)
		}
		close(contended)
	}()
	go func() {
		select {
		case <-ctx.Done():
		case <-readDone:
		}
		_ = f.Close()
		<-readDone
	}()
	return contended, nil
}
