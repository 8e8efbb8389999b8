package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"

	"github.com/heartlet/heartlet/internal/config"
)

func TestHoldLockFile(t *testing.T) {
	_, tctx := ktesting.NewTestContext(t)
	path := filepath.Join(t.TempDir(), "kubelet.lock")

	ctx, release, err := holdLockFile(tctx, &config.Options{})
	if err != nil || ctx != tctx {
		t.Fatalf("without --lock-file: ctx changed or err %v", err)
	}
	release()

	ctx, release, err = holdLockFile(tctx, &config.Options{LockFile: path, ExitOnLockContention: true})
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if ctx.Err() != nil {
		t.Fatal("context done before any contention")
	}
	// Another node agent opens the file.
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("contention did not stop the context")
	}
	if !errors.Is(context.Cause(ctx), errLockContention) {
		t.Errorf("cause %v, want errLockContention", context.Cause(ctx))
	}
}
