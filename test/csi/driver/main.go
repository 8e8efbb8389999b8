// Command csi-driver is heartlet's test CSI driver: a real, single-node
// driver whose volumes are directories (filesystem volumes) or loop devices
// (block volumes) on a loop-mounted ext4 filesystem under its state
// directory. The e2e tests register it with heartlet through the plugin
// registration API (test/csi/registrar) and provision its volumes with
// test/csi/controller; csi-sanity checks it against the CSI spec.
//
// It serves the Identity, Controller and Node services on one unix socket,
// keeps its state in --state-dir so that it survives its own restart, and
// appends one JSON line per node call to --record (the call, the volume,
// the paths and the volume context, which carries the pod information and
// service account tokens the kubelet passes).
//
// With --teardown it unmounts and detaches everything it set up under
// --state-dir, removes the directory and exits.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
)

func main() {
	cfg := defaultConfig()
	var teardownOnly bool
	flag.StringVar(&cfg.Endpoint, "endpoint", cfg.Endpoint, "unix socket path to serve CSI on")
	flag.StringVar(&cfg.Name, "name", cfg.Name, "driver name (GetPluginInfo, CSIDriver object)")
	flag.StringVar(&cfg.NodeID, "node-id", cfg.NodeID, "node ID reported by NodeGetInfo (default: the host name)")
	flag.StringVar(&cfg.StateDir, "state-dir", cfg.StateDir, "directory for the state, the backing filesystem and the volumes")
	flag.StringVar(&cfg.RecordFile, "record", "", "file the node calls are appended to as JSON lines (default: <state-dir>/calls.jsonl)")
	flag.StringVar(&cfg.TopologyKey, "topology-key", cfg.TopologyKey, "topology key of the node's segment (value: the node ID)")
	flag.Int64Var(&cfg.MaxVolumes, "max-volumes", cfg.MaxVolumes, "max_volumes_per_node reported by NodeGetInfo (0: no limit)")
	flag.Int64Var(&cfg.BackingSize, "backing-size", cfg.BackingSize, "size in bytes of the backing filesystem (sparse)")
	flag.Int64Var(&cfg.MaxVolumeSize, "max-volume-size", cfg.MaxVolumeSize, "largest volume CreateVolume accepts, in bytes")
	flag.BoolVar(&cfg.RequireAttach, "require-attach", false, "refuse NodeStage/NodePublish of a volume not ControllerPublished to this node with the publish context the controller returned (for CSIDriver attachRequired: true)")
	flag.BoolVar(&cfg.VolumeMountGroup, "volume-mount-group", false, "advertise VOLUME_MOUNT_GROUP: the driver applies the pod's fsGroup itself")
	flag.BoolVar(&teardownOnly, "teardown", false, "unmount and detach everything under --state-dir, remove it and exit")
	flag.Parse()
	if cfg.RecordFile == "" {
		cfg.RecordFile = filepath.Join(cfg.StateDir, "calls.jsonl")
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if teardownOnly {
		err = teardown(ctx, cfg.StateDir)
	} else {
		err = serve(ctx, cfg, log)
	}
	if err != nil {
		log.Error("csi-driver failed", "err", err)
		os.Exit(1)
	}
}

// serve runs the driver on cfg.Endpoint until ctx ends.
func serve(ctx context.Context, cfg config, log *slog.Logger) error {
	d, err := newDriver(ctx, cfg, log)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(cfg.Endpoint), 0o755); err != nil {
		return fmt.Errorf("creating the socket directory: %w", err)
	}
	if err := os.Remove(cfg.Endpoint); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing the old socket: %w", err)
	}
	l, err := net.Listen("unix", cfg.Endpoint)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", cfg.Endpoint, err)
	}
	srv := d.grpcServer()
	go func() {
		<-ctx.Done()
		srv.GracefulStop()
	}()
	log.Info("csi-driver serving", "endpoint", cfg.Endpoint, "name", cfg.Name, "nodeID", cfg.NodeID, "stateDir", cfg.StateDir)
	if err := srv.Serve(l); err != nil {
		return fmt.Errorf("serving CSI: %w", err)
	}
	_ = os.Remove(cfg.Endpoint)
	return nil
}

// grpcServer returns a gRPC server with the driver's three services and a
// log line per call.
func (d *driver) grpcServer() *grpc.Server {
	srv := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		resp, err := h(ctx, req)
		if err != nil {
			d.log.Info("csi call failed", "method", info.FullMethod, "err", err)
		} else {
			d.log.Debug("csi call", "method", info.FullMethod)
		}
		return resp, err
	}))
	csi.RegisterIdentityServer(srv, d)
	csi.RegisterControllerServer(srv, d)
	csi.RegisterNodeServer(srv, d)
	return srv
}
