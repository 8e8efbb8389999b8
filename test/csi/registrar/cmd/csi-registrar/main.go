// Command csi-registrar registers a CSI driver with the kubelet the way
// node-driver-registrar does (the same flag names): it serves the plugin
// registration socket <plugin-registration-path>/<driver>-reg.sock until
// it is stopped, and exits 1 when the kubelet reports that the
// registration failed. Without --driver-name it asks the driver at
// --csi-address for its name.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/heartlet/heartlet/test/csi/registrar"
)

func main() {
	var cfg registrar.Config
	var csiAddress string
	flag.StringVar(&csiAddress, "csi-address", "", "the driver's CSI socket, to ask its name (GetPluginInfo)")
	flag.StringVar(&cfg.Endpoint, "kubelet-registration-path", "", "the driver's CSI socket as the kubelet dials it (default: --csi-address)")
	flag.StringVar(&cfg.RegistrationDir, "plugin-registration-path", "/var/lib/kubelet/plugins_registry", "the kubelet's plugin registration directory")
	flag.StringVar(&cfg.DriverName, "driver-name", "", "the driver's name (default: asked from --csi-address)")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(cfg, csiAddress, log); err != nil {
		log.Error("csi-registrar failed", "err", err)
		os.Exit(1)
	}
}

func run(cfg registrar.Config, csiAddress string, log *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cfg.Endpoint == "" {
		cfg.Endpoint = csiAddress
	}
	if cfg.DriverName == "" {
		if csiAddress == "" {
			return fmt.Errorf("give --driver-name or --csi-address")
		}
		name, err := driverName(ctx, csiAddress)
		if err != nil {
			return err
		}
		cfg.DriverName = name
	}
	r, err := registrar.Start(ctx, cfg)
	if err != nil {
		return err
	}
	defer r.Stop()
	log.Info("csi-registrar serving", "socket", r.SocketPath(), "driver", cfg.DriverName, "endpoint", cfg.Endpoint)
	for n := 1; ; n++ {
		res, err := r.WaitResult(ctx, n)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if !res.Registered {
			return fmt.Errorf("the kubelet refused the registration of %s: %s", cfg.DriverName, res.Error)
		}
		log.Info("registered with the kubelet", "driver", cfg.DriverName)
	}
}

// driverName asks the driver its name, retrying while its socket is not
// served yet.
func driverName(ctx context.Context, address string) (string, error) {
	conn, err := grpc.NewClient("unix://"+address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return "", fmt.Errorf("dialing %s: %w", address, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	info, err := csi.NewIdentityClient(conn).GetPluginInfo(ctx, &csi.GetPluginInfoRequest{}, grpc.WaitForReady(true))
	if err != nil {
		return "", fmt.Errorf("asking the driver at %s its name: %w", address, err)
	}
	return info.GetName(), nil
}
