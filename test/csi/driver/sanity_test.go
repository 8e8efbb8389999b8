//go:build integration

package main

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
	"github.com/moby/sys/mountinfo"
)

// testDriver is a driver serving on a socket under a temporary directory.
type testDriver struct {
	cfg  config
	stop func()
}

// startDriver runs the driver with its state under a new temporary
// directory and returns it. Cleanup stops it, tears its state down and
// fails the test if a mount of the driver's is left.
func startDriver(t *testing.T, mutate func(*config)) *testDriver {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the CSI driver mounts and attaches loop devices: run as root")
	}
	dir := t.TempDir()
	cfg := defaultConfig()
	cfg.NodeID = "sanity-node"
	cfg.StateDir = filepath.Join(dir, "state")
	cfg.Endpoint = filepath.Join(dir, "csi.sock")
	cfg.RecordFile = filepath.Join(dir, "calls.jsonl")
	cfg.BackingSize = 256 << 20
	if mutate != nil {
		mutate(&cfg)
	}
	td := &testDriver{cfg: cfg}
	td.restart(t)
	t.Cleanup(func() {
		td.stop()
		if err := teardown(context.Background(), cfg.StateDir); err != nil {
			t.Errorf("teardown: %v", err)
		}
		left, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
		if err != nil {
			t.Errorf("reading the mount table: %v", err)
		}
		for _, m := range left {
			t.Errorf("mount left after teardown: %s", m.Mountpoint)
		}
	})
	return td
}

// restart stops the running driver, if any, and starts a new one on the
// same state directory and socket.
func (td *testDriver) restart(t *testing.T) {
	t.Helper()
	if td.stop != nil {
		td.stop()
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	d, err := newDriver(context.Background(), td.cfg, log)
	if err != nil {
		t.Fatalf("starting the driver: %v", err)
	}
	_ = os.Remove(td.cfg.Endpoint)
	l, err := net.Listen("unix", td.cfg.Endpoint)
	if err != nil {
		t.Fatalf("listening: %v", err)
	}
	srv := d.grpcServer()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(l)
	}()
	td.stop = func() {
		srv.Stop()
		<-done
	}
}

// TestSanity runs csi-sanity against the driver (filesystem volumes; the
// sanity suite can run only once per process, the block volumes have
// their own test).
func TestSanity(t *testing.T) {
	td := startDriver(t, nil)
	dir := filepath.Dir(td.cfg.Endpoint)
	cfg := sanity.NewTestConfig()
	cfg.Address = td.cfg.Endpoint
	cfg.TargetPath = filepath.Join(dir, "target")
	cfg.StagingPath = filepath.Join(dir, "staging")
	cfg.TestVolumeSize = 64 << 20
	cfg.TestVolumeExpandSize = 128 << 20
	cfg.TestNodeVolumeAttachLimit = true
	cfg.IdempotentCount = 3
	sanity.Test(t, cfg)
}
