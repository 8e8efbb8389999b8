package agent

import (
	"path/filepath"

	v1 "k8s.io/api/core/v1"

	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/heartlet/heartlet/internal/csi"
	"github.com/heartlet/heartlet/internal/kubeclient"
	"github.com/heartlet/heartlet/internal/pluginwatcher"
	"github.com/heartlet/heartlet/internal/pvc"
	"github.com/heartlet/heartlet/internal/volume"
)

// buildVolumePlugins builds the volume plugins of persistent volume
// claims and CSI volumes, and the watcher of <root-dir>/plugins_registry
// that registers CSI drivers (run by run). In standalone mode there is no
// API: claims and CSI volumes fail with volume.ErrNoAPI, and drivers
// register without publishing node information.
func (a *Agent) buildVolumePlugins(c *components, cl *kubeclient.Client, getter volume.Getter) []volume.Plugin {
	opts := csi.PublisherOptions{RootDir: a.opts.RootDir, NodeName: a.opts.NodeName,
		StatsPeriod: a.opts.Config.VolumeStatsAggPeriod.Duration, Clock: a.clock}
	var (
		info     csi.NodeInfoPublisher
		pvGetter pvc.Getter
	)
	if cl != nil {
		info = csi.NewNodeInfo(cl.Kube, a.opts.NodeName)
		pvGetter = pvc.NewClientGetter(cl.Kube, a.opts.NodeName)
		opts.Kube = cl.Kube
		opts.Tokens = getter
		opts.Events = c.recorder
	}
	drivers := csi.NewDrivers(nil, info)
	c.closers = append(c.closers, drivers.Close)
	opts.Drivers = drivers
	pub := csi.NewPublisher(opts)
	c.csiVolumes = pub
	c.pluginWatcher = pluginwatcher.New(pluginwatcher.Options{
		Dir:      filepath.Join(a.opts.RootDir, "plugins_registry"),
		Handlers: map[string]pluginwatcher.Handler{registerapi.CSIPlugin: drivers},
		Clock:    a.clock,
	})
	claims := pvc.New(pvGetter, pub, pvc.WithRootDir(a.opts.RootDir))
	c.claimVolumes = claims
	return []volume.Plugin{claims, pub}
}

// volumesInUse is the node status's volumesInUse: the CSI volumes
// published for pods (none before the workers are built).
func (c *components) volumesInUse() []v1.UniqueVolumeName {
	if c.csiVolumes == nil {
		return nil
	}
	return c.csiVolumes.VolumesInUse()
}
