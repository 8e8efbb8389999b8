package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

// DefaultName is the driver's name unless --name says otherwise.
const DefaultName = "csi.heartlet.test"

// config is the driver's configuration (its flags).
type config struct {
	Endpoint         string
	Name             string
	NodeID           string
	StateDir         string
	RecordFile       string
	TopologyKey      string
	MaxVolumes       int64
	BackingSize      int64
	MaxVolumeSize    int64
	RequireAttach    bool
	VolumeMountGroup bool
}

func defaultConfig() config {
	host, _ := os.Hostname()
	return config{
		Endpoint:      "/run/heartlet-csi/csi.sock",
		Name:          DefaultName,
		NodeID:        host,
		StateDir:      "/var/lib/heartlet-csi",
		TopologyKey:   "topology.csi.heartlet.test/node",
		MaxVolumes:    16,
		BackingSize:   4 << 30,
		MaxVolumeSize: 1 << 40,
	}
}

// defaultCapacity is a volume's size when CreateVolume asks for none.
const defaultCapacity = 1 << 30

// driver implements the CSI Identity, Controller and Node services. Every
// call holds mu: the driver is small and its calls are short, so it simply
// serialises them, which keeps the state and the mounts consistent.
type driver struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedControllerServer
	csi.UnimplementedNodeServer

	cfg  config
	dirs stateDirs
	log  *slog.Logger

	mu    sync.Mutex
	state *state
}

// newDriver sets up the backing filesystem and loads the state.
func newDriver(ctx context.Context, cfg config, log *slog.Logger) (*driver, error) {
	if cfg.Name == "" || cfg.NodeID == "" || cfg.StateDir == "" {
		return nil, fmt.Errorf("the driver needs a name, a node ID and a state directory")
	}
	dirs := stateDirs{root: cfg.StateDir}
	if err := os.MkdirAll(dirs.root, 0o700); err != nil {
		return nil, fmt.Errorf("creating the state directory: %w", err)
	}
	if err := setupBacking(ctx, dirs, cfg.BackingSize); err != nil {
		return nil, err
	}
	st, err := loadState(dirs.stateFile())
	if err != nil {
		return nil, err
	}
	return &driver{cfg: cfg, dirs: dirs, log: log, state: st}, nil
}

// callRecord is one line of the record file.
type callRecord struct {
	Time              time.Time         `json:"time"`
	Method            string            `json:"method"`
	VolumeID          string            `json:"volumeID"`
	StagingTargetPath string            `json:"stagingTargetPath,omitempty"`
	TargetPath        string            `json:"targetPath,omitempty"`
	ReadOnly          bool              `json:"readOnly,omitempty"`
	Block             bool              `json:"block,omitempty"`
	FsType            string            `json:"fsType,omitempty"`
	MountFlags        []string          `json:"mountFlags,omitempty"`
	VolumeMountGroup  string            `json:"volumeMountGroup,omitempty"`
	AccessMode        string            `json:"accessMode,omitempty"`
	VolumeContext     map[string]string `json:"volumeContext,omitempty"`
	PublishContext    map[string]string `json:"publishContext,omitempty"`
	Secrets           []string          `json:"secrets,omitempty"`
	CapacityBytes     int64             `json:"capacityBytes,omitempty"`
	Error             string            `json:"error,omitempty"`
}

// record appends r to the record file. Failing to record is logged, not
// returned: the call itself succeeded or failed on its own.
func (d *driver) record(r callRecord, err error) {
	r.Time = time.Now().UTC()
	if err != nil {
		r.Error = err.Error()
	}
	b, merr := json.Marshal(r)
	if merr != nil {
		d.log.Error("encoding a call record", "err", merr)
		return
	}
	f, oerr := os.OpenFile(d.cfg.RecordFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if oerr != nil {
		d.log.Error("opening the record file", "err", oerr)
		return
	}
	defer f.Close()
	if _, werr := f.Write(append(b, '\n')); werr != nil {
		d.log.Error("writing the record file", "err", werr)
	}
}

// describeCapability fills r's capability fields.
func describeCapability(r *callRecord, c *csi.VolumeCapability) {
	if c == nil {
		return
	}
	if m := c.GetMount(); m != nil {
		r.FsType = m.GetFsType()
		r.MountFlags = m.GetMountFlags()
		r.VolumeMountGroup = m.GetVolumeMountGroup()
	}
	r.Block = c.GetBlock() != nil
	r.AccessMode = c.GetAccessMode().GetMode().String()
}

// secretKeys lists the keys (never the values) of a secrets map.
func secretKeys(m map[string]string) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}

// teardown unmounts every target and staging path the state knows,
// detaches the loop devices, unmounts the backing filesystem and removes
// the state directory.
func teardown(ctx context.Context, dir string) error {
	dirs := stateDirs{root: dir}
	st, err := loadState(dirs.stateFile())
	if err != nil {
		return err
	}
	for _, v := range st.Volumes {
		for p, t := range v.Targets {
			if err := unmountAll(p); err != nil {
				return err
			}
			if err := detachLoop(ctx, t.Loop, dirs.blockFile(v.ID)); err != nil {
				return err
			}
		}
		for p, loop := range v.Staged {
			if err := unmountAll(p); err != nil {
				return err
			}
			if err := detachLoop(ctx, loop, dirs.blockFile(v.ID)); err != nil {
				return err
			}
		}
	}
	if err := unmountAll(dirs.fs()); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("removing %s: %w", dir, err)
	}
	return nil
}

// Identity service.

func (d *driver) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: d.cfg.Name, VendorVersion: "0.1.0"}, nil
}

func (d *driver) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	svc := func(t csi.PluginCapability_Service_Type) *csi.PluginCapability {
		return &csi.PluginCapability{Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{Type: t}}}
	}
	return &csi.GetPluginCapabilitiesResponse{Capabilities: []*csi.PluginCapability{
		svc(csi.PluginCapability_Service_CONTROLLER_SERVICE),
		svc(csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS),
		{Type: &csi.PluginCapability_VolumeExpansion_{VolumeExpansion: &csi.PluginCapability_VolumeExpansion{
			Type: csi.PluginCapability_VolumeExpansion_ONLINE,
		}}},
	}}, nil
}

func (d *driver) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{}, nil
}

// volumeDirOrFile is the volume's backing path.
func (d *driver) volumeDirOrFile(v *volume) string {
	if v.Block {
		return d.dirs.blockFile(v.ID)
	}
	return d.dirs.volumeDir(v.ID)
}

// createBacking creates a volume's directory or block file.
func (d *driver) createBacking(v *volume) error {
	if v.Block {
		return createSparse(d.dirs.blockFile(v.ID), v.Capacity)
	}
	if err := os.MkdirAll(d.dirs.volumeDir(v.ID), 0o755); err != nil {
		return fmt.Errorf("creating the volume directory: %w", err)
	}
	// MkdirAll honours the umask; the volume root is world-readable and
	// writable by root, as a fresh filesystem's root is.
	return os.Chmod(d.dirs.volumeDir(v.ID), 0o755)
}

// removeBacking deletes a volume's directory or block file.
func (d *driver) removeBacking(v *volume) error {
	if err := os.RemoveAll(d.volumeDirOrFile(v)); err != nil {
		return fmt.Errorf("removing the volume %s: %w", v.ID, err)
	}
	return nil
}

// ensureParent creates path's parent directory.
func ensureParent(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return fmt.Errorf("creating the parent of %s: %w", path, err)
	}
	return nil
}
