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

// startDriver runs the driver with its state under a new temporary
// directory and returns its socket. Cleanup stops it, tears its state down
// and fails the test if a mount of the driver's is left.
func startDriver(t *testing.T, mutate func(*config)) (*driver, string) {
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
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, cancel := context.WithCancel(context.Background())
	d, err := newDriver(ctx, cfg, log)
	if err != nil {
		cancel()
		t.Fatalf("starting the driver: %v", err)
	}
	l, err := net.Listen("unix", cfg.Endpoint)
	if err != nil {
		cancel()
		t.Fatalf("listening: %v", err)
	}
	srv := d.grpcServer()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(l)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
		if err := teardown(context.Background(), cfg.StateDir); err != nil {
			t.Errorf("teardown: %v", err)
		}
		cancel()
		left, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
		if err != nil {
			t.Errorf("reading the mount table: %v", err)
		}
		for _, m := range left {
			t.Errorf("mount left after teardown: %s", m.Mountpoint)
		}
	})
	return d, cfg.Endpoint
}

// TestSanity runs csi-sanity against the driver (filesystem volumes; the
// sanity suite can run only once per process, the block volumes have
// their own test).
func TestSanity(t *testing.T) {
	_, sock := startDriver(t, nil)
	dir := filepath.Dir(sock)
	cfg := sanity.NewTestConfig()
	cfg.Address = sock
	cfg.TargetPath = filepath.Join(dir, "target")
	cfg.StagingPath = filepath.Join(dir, "staging")
	cfg.TestVolumeSize = 64 << 20
	cfg.TestVolumeExpandSize = 128 << 20
	cfg.TestNodeVolumeAttachLimit = true
	cfg.IdempotentCount = 3
	sanity.Test(t, cfg)
}
