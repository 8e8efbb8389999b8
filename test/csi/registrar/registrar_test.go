package registrar

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// kubeletSide dials the registration socket as the kubelet's plugin
// watcher does.
func kubeletSide(t *testing.T, socket string) registerapi.RegistrationClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dialing %s: %v", socket, err)
	}
	t.Cleanup(func() { conn.Close() })
	return registerapi.NewRegistrationClient(conn)
}

func TestRegistration(t *testing.T) {
	root := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A stale socket of an earlier run is replaced.
	dir := filepath.Join(root, "plugins_registry")
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(SocketPath(dir, "csi.example"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := Start(ctx, Config{DriverName: "csi.example", Endpoint: "/run/csi/csi.sock", KubeletRootDir: root})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer r.Stop()
	if want := filepath.Join(root, "plugins_registry", "csi.example-reg.sock"); r.SocketPath() != want {
		t.Fatalf("socket %s, want %s", r.SocketPath(), want)
	}
	c := kubeletSide(t, r.SocketPath())
	info, err := c.GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil {
		t.Fatalf("GetInfo: %v", err)
	}
	if info.GetType() != registerapi.CSIPlugin || info.GetName() != "csi.example" || info.GetEndpoint() != "/run/csi/csi.sock" ||
		len(info.GetSupportedVersions()) != 1 || info.GetSupportedVersions()[0] != "1.0.0" {
		t.Fatalf("GetInfo = %v", info)
	}
	if r.InfoCalls() != 1 {
		t.Fatalf("InfoCalls = %d, want 1", r.InfoCalls())
	}
	for _, st := range []*registerapi.RegistrationStatus{
		{PluginRegistered: false, Error: "version not supported"},
		{PluginRegistered: true},
	} {
		if _, err := c.NotifyRegistrationStatus(ctx, st); err != nil {
			t.Fatalf("NotifyRegistrationStatus: %v", err)
		}
	}
	first, err := r.WaitResult(ctx, 1)
	if err != nil || first.Registered || first.Error != "version not supported" {
		t.Fatalf("first result %+v, %v", first, err)
	}
	second, err := r.WaitResult(ctx, 2)
	if err != nil || !second.Registered {
		t.Fatalf("second result %+v, %v", second, err)
	}
	if got := len(r.Results()); got != 2 {
		t.Fatalf("%d results, want 2", got)
	}
	r.Stop()
	if _, err := os.Stat(r.SocketPath()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket still there after Stop: %v", err)
	}
	if _, err := r.WaitResult(ctx, 3); err == nil {
		t.Fatal("WaitResult on a stopped registrar succeeded")
	}
}

func TestStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	r, err := Start(ctx, Config{DriverName: "d", Endpoint: "/x.sock", RegistrationDir: t.TempDir()})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	cancel()
	<-r.Done()
	r.Stop() // a second stop is harmless
	if _, err := os.Stat(r.SocketPath()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket still there after the context ended: %v", err)
	}
}

func TestStartRefuses(t *testing.T) {
	for name, cfg := range map[string]Config{
		"no name":           {Endpoint: "/x.sock"},
		"no endpoint":       {DriverName: "d"},
		"relative endpoint": {DriverName: "d", Endpoint: "x.sock"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg.RegistrationDir = t.TempDir()
			if r, err := Start(context.Background(), cfg); err == nil {
				r.Stop()
				t.Fatal("Start accepted the config")
			}
		})
	}
}
