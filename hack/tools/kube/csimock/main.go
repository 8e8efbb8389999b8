// Command csimock serves upstream's CSI mock driver service (the one the
// Kubernetes e2e tests use, k8s.io/kubernetes/test/e2e/storage/drivers/
// csi-test/mock/service) on a unix socket, so that heartlet's CSI node side
// can be checked against the call sequence upstream expects from a kubelet.
// The mock keeps its volumes in memory and mounts nothing.
//
// Every call is appended to --calls as one JSON line with the fields of the
// upstream mock's "gRPCCall" log (Method, Request, Response, Error), so a
// test can read the sequence back.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"google.golang.org/grpc"
	"k8s.io/kubernetes/test/e2e/storage/drivers/csi-test/driver"
	"k8s.io/kubernetes/test/e2e/storage/drivers/csi-test/mock/service"
)

func main() {
	var cfg service.Config
	var endpoint, calls string
	flag.StringVar(&endpoint, "endpoint", "/run/heartlet-csimock/csi.sock", "unix socket to serve CSI on")
	flag.StringVar(&calls, "calls", "", "file the calls are appended to as JSON lines (default: none)")
	flag.StringVar(&cfg.DriverName, "name", service.Name, "driver name (also the node ID the mock reports)")
	flag.Int64Var(&cfg.AttachLimit, "attach-limit", 2, "max_volumes_per_node")
	flag.BoolVar(&cfg.DisableAttach, "disable-attach", false, "no PUBLISH_UNPUBLISH_VOLUME controller capability")
	flag.BoolVar(&cfg.NodeExpansionRequired, "node-expand-required", false, "advertise EXPAND_VOLUME on the node")
	flag.BoolVar(&cfg.DisableControllerExpansion, "disable-controller-expansion", false, "no controller EXPAND_VOLUME")
	flag.BoolVar(&cfg.DisableOnlineExpansion, "disable-online-expansion", false, "offline expansion only")
	flag.BoolVar(&cfg.EnableTopology, "enable-topology", false, "report a topology segment")
	flag.BoolVar(&cfg.PermissiveTargetPath, "permissive-target-path", false, "accept a target path whose parent does not exist")
	flag.BoolVar(&cfg.VolumeMountGroupRequired, "volume-mount-group", false, "advertise VOLUME_MOUNT_GROUP")
	flag.BoolVar(&cfg.NodeVolumeConditionRequired, "node-volume-condition", false, "advertise VOLUME_CONDITION on the node")
	flag.Parse()
	if err := run(endpoint, calls, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "csimock:", err)
		os.Exit(1)
	}
}

func run(endpoint, calls string, cfg service.Config) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rec, err := newRecorder(calls)
	if err != nil {
		return err
	}
	defer rec.close()
	svc := service.New(cfg)
	d := driver.NewCSIDriver(&driver.CSIDriverServers{Controller: svc, Identity: svc, Node: svc})
	if err := os.Remove(endpoint); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("removing the old socket: %w", err)
	}
	l, err := net.Listen("unix", endpoint)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", endpoint, err)
	}
	if err := d.Start(l, rec.intercept); err != nil {
		return fmt.Errorf("serving: %w", err)
	}
	fmt.Fprintf(os.Stderr, "csimock serving %s on %s\n", cfg.DriverName, endpoint)
	<-ctx.Done()
	d.Stop()
	_ = os.Remove(endpoint)
	return nil
}

// recorder appends one JSON line per call.
type recorder struct {
	mu sync.Mutex
	f  *os.File
}

func newRecorder(path string) (*recorder, error) {
	if path == "" {
		return &recorder{}, nil
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the calls file: %w", err)
	}
	return &recorder{f: f}, nil
}

func (r *recorder) close() {
	if r.f != nil {
		r.f.Close()
	}
}

func (r *recorder) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	resp, err := h(ctx, req)
	if r.f == nil {
		return resp, err
	}
	line := struct {
		Method   string
		Request  any
		Response any
		Error    string
	}{Method: info.FullMethod, Request: req, Response: resp}
	if err != nil {
		line.Error = err.Error()
	}
	b, merr := json.Marshal(line)
	if merr != nil {
		return resp, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	_, _ = r.f.Write(append(b, '\n'))
	return resp, err
}
