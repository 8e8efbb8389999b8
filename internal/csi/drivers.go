// Package csi is the node side of the Container Storage Interface: the
// drivers registered through the plugin registration API (Drivers, a
// pluginwatcher.Handler), what they report published in the CSINode
// object and the node's csi.volume.kubernetes.io/nodeid annotation, and
// the staging and publishing of pod volumes (Publisher, a volume.Plugin
// for inline CSI volumes and the publisher of CSI persistent volumes).
//
// The layout on disk is upstream's, so that either kubelet finds what the
// other mounted:
//
//	<root>/plugins/kubernetes.io/csi/<driver>/<sha256(volumeHandle)>/globalmount   staging target
//	<root>/plugins/kubernetes.io/csi/<driver>/<sha256(volumeHandle)>/vol_data.json driver and handle
//	<root>/pods/<uid>/volumes/kubernetes.io~csi/<name>/mount                       publish target
//	<root>/pods/<uid>/volumes/kubernetes.io~csi/<name>/vol_data.json              what was published
//
// where <name> is the PersistentVolume's name, or the pod volume's name for
// an inline volume.
package csi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/klog/v2"

	"github.com/heartlet/heartlet/internal/pluginwatcher"
)

// ErrDriverNotRegistered reports a volume of a driver that has not
// registered (yet).
var ErrDriverNotRegistered = errors.New("not found in the list of registered CSI drivers")

// driverNameRE is the CSI spec's rule for driver names: at most 63
// characters, alphanumeric at both ends, dashes, dots and alphanumerics
// between. A name that passes cannot climb out of a directory.
var driverNameRE = regexp.MustCompile(`^[a-zA-Z0-9]([-a-zA-Z0-9.]{0,61}[a-zA-Z0-9])?$`)

// ValidDriverName checks a driver name against the CSI spec's rule.
func ValidDriverName(name string) error {
	if !driverNameRE.MatchString(name) || strings.Contains(name, "..") {
		return fmt.Errorf("invalid CSI driver name %q: want at most 63 characters, alphanumeric at both ends, with dashes, dots and alphanumerics between", name)
	}
	return nil
}

// Dialer connects to a driver's endpoint. The Closer ends the connection.
type Dialer func(ctx context.Context, endpoint string) (csipb.NodeClient, io.Closer, error)

// DialUnix is the Dialer of Unix socket endpoints ("unix:///path" or a
// path).
func DialUnix(_ context.Context, endpoint string) (csipb.NodeClient, io.Closer, error) {
	target := endpoint
	if !strings.HasPrefix(target, "unix://") {
		target = "unix://" + target
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, fmt.Errorf("connect to CSI driver at %s: %w", endpoint, err)
	}
	return csipb.NewNodeClient(conn), conn, nil
}

// NodeInfoPublisher publishes what a driver reports of this node (the
// CSINode object and the node annotation; see NodeInfo).
//
// Contract: Add records the driver's NodeGetInfo answer and is idempotent;
// Remove drops the driver and is safe for one never added. An error from
// Add refuses the registration (the registrar retries).
type NodeInfoPublisher interface {
	Add(ctx context.Context, driver string, info *csipb.NodeGetInfoResponse) error
	Remove(ctx context.Context, driver string) error
}

// driver is a registered driver.
type driver struct {
	name     string
	endpoint string
	client   csipb.NodeClient
	closer   io.Closer
	stage    bool // STAGE_UNSTAGE_VOLUME
	// mountGroup: VOLUME_MOUNT_GROUP, the driver applies the pod's fsGroup.
	mountGroup bool
	// volumeStats: GET_VOLUME_STATS, the driver measures its volumes.
	volumeStats bool
	// expand: EXPAND_VOLUME, the driver grows its volumes on the node.
	expand bool
}

// Drivers is the set of registered CSI drivers; it implements
// pluginwatcher.Handler for registerapi.CSIPlugin. Safe for concurrent use.
type Drivers struct {
	dial Dialer
	info NodeInfoPublisher // nil: nothing published (standalone)

	mu      sync.Mutex
	drivers map[string]*driver
}

var _ pluginwatcher.Handler = (*Drivers)(nil)

// NewDrivers returns an empty set. A nil dial is DialUnix.
func NewDrivers(dial Dialer, info NodeInfoPublisher) *Drivers {
	if dial == nil {
		dial = DialUnix
	}
	return &Drivers{dial: dial, info: info, drivers: map[string]*driver{}}
}

// Register implements pluginwatcher.Handler: it checks that the driver
// speaks CSI 1.x, asks it for its node information and capabilities and
// publishes the former.
func (d *Drivers) Register(ctx context.Context, name, endpoint string, versions []string) error {
	if err := ValidDriverName(name); err != nil {
		return err
	}
	if !supportsV1(versions) {
		return fmt.Errorf("CSI driver %q supports none of the versions heartlet speaks (1.x): %v", name, versions)
	}
	d.mu.Lock()
	old := d.drivers[name]
	d.mu.Unlock()
	if old != nil && old.endpoint == endpoint {
		return nil
	}
	client, closer, err := d.dial(ctx, endpoint)
	if err != nil {
		return err
	}
	drv, err := d.probe(ctx, name, endpoint, client)
	if err != nil {
		_ = closer.Close()
		return err
	}
	drv.closer = closer
	d.mu.Lock()
	old = d.drivers[name]
	d.drivers[name] = drv
	d.mu.Unlock()
	if old != nil {
		_ = old.closer.Close()
	}
	return nil
}

// probeTimeout bounds the wait for a new driver to serve its socket and
// answer: its registrar may register it before it listens.
const probeTimeout = 30 * time.Second

// probe reads a new driver's node information and capabilities.
func (d *Drivers) probe(ctx context.Context, name, endpoint string, client csipb.NodeClient) (*driver, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	info, err := client.NodeGetInfo(ctx, &csipb.NodeGetInfoRequest{}, grpc.WaitForReady(true))
	if err != nil {
		return nil, fmt.Errorf("NodeGetInfo of CSI driver %q: %w", name, err)
	}
	if info.GetNodeId() == "" {
		return nil, fmt.Errorf("CSI driver %q reported an empty node ID", name)
	}
	caps, err := client.NodeGetCapabilities(ctx, &csipb.NodeGetCapabilitiesRequest{}, grpc.WaitForReady(true))
	if err != nil {
		return nil, fmt.Errorf("NodeGetCapabilities of CSI driver %q: %w", name, err)
	}
	drv := &driver{name: name, endpoint: endpoint, client: client}
	for _, c := range caps.GetCapabilities() {
		switch c.GetRpc().GetType() {
		case csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME:
			drv.stage = true
		case csipb.NodeServiceCapability_RPC_VOLUME_MOUNT_GROUP:
			drv.mountGroup = true
		case csipb.NodeServiceCapability_RPC_GET_VOLUME_STATS:
			drv.volumeStats = true
		case csipb.NodeServiceCapability_RPC_EXPAND_VOLUME:
			drv.expand = true
		}
	}
	if d.info != nil {
		if err := d.info.Add(ctx, name, info); err != nil {
			return nil, fmt.Errorf("publish node information of CSI driver %q: %w", name, err)
		}
	}
	klog.FromContext(ctx).V(2).Info("CSI driver registered", "driver", name, "endpoint", endpoint, "nodeID", info.GetNodeId(), "stage", drv.stage)
	return drv, nil
}

// Deregister implements pluginwatcher.Handler.
func (d *Drivers) Deregister(ctx context.Context, name, endpoint string) {
	d.mu.Lock()
	drv := d.drivers[name]
	if drv == nil || drv.endpoint != endpoint {
		d.mu.Unlock()
		return
	}
	delete(d.drivers, name)
	d.mu.Unlock()
	_ = drv.closer.Close()
	if d.info != nil {
		if err := d.info.Remove(ctx, name); err != nil {
			klog.FromContext(ctx).Error(err, "Couldn't remove CSI driver from the node's information", "driver", name)
		}
	}
}

// get returns a registered driver.
func (d *Drivers) get(name string) (*driver, error) {
	if err := ValidDriverName(name); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	drv := d.drivers[name]
	if drv == nil {
		return nil, fmt.Errorf("driver name %s %w", name, ErrDriverNotRegistered)
	}
	return drv, nil
}

// Close ends every driver connection.
func (d *Drivers) Close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for name, drv := range d.drivers {
		_ = drv.closer.Close()
		delete(d.drivers, name)
	}
}

// supportsV1 reports whether a version of CSI 1.x is listed.
func supportsV1(versions []string) bool {
	for _, v := range versions {
		v = strings.TrimPrefix(v, "v")
		if v == "1" || strings.HasPrefix(v, "1.") {
			return true
		}
	}
	return false
}
