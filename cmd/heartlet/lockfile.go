package main

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/heartlet/heartlet/internal/config"
	"github.com/heartlet/heartlet/internal/lockfile"
)

// errLockContention stops the agent when another process opens the lock
// file.
var errLockContention = errors.New("another process opened the lock file")

// holdLockFile takes --lock-file before anything starts, as the upstream
// kubelet does, waiting while another process holds it. With
// --exit-on-lock-contention the returned context is cancelled with
// errLockContention when another process opens the file. release lets the
// lock go; it is a no-op without --lock-file.
func holdLockFile(ctx context.Context, opts *config.Options) (context.Context, func(), error) {
	if opts.LockFile == "" {
		return ctx, func() {}, nil
	}
	logger := klog.FromContext(ctx)
	logger.Info("Acquiring the lock file", "path", opts.LockFile)
	release, err := lockfile.Acquire(ctx, opts.LockFile, clock.RealClock{})
	if err != nil {
		return nil, nil, fmt.Errorf("--lock-file: %w", err)
	}
	if !opts.ExitOnLockContention {
		return ctx, release, nil
	}
	ctx, cancel := context.WithCancelCause(ctx)
	contended, err := lockfile.WatchContention(ctx, opts.LockFile)
	if err != nil {
		cancel(nil)
		release()
		return nil, nil, fmt.Errorf("--exit-on-lock-contention: %w", err)
	}
	go func() {
		select {
		case <-contended:
			logger.Info("Stopping: another process opened the lock file", "path", opts.LockFile)
			cancel(errLockContention)
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(nil); release() }, nil
}
