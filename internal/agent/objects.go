package agent

import (
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/clock"

	"github.com/heartlet/heartlet/internal/kubeclient"
	"github.com/heartlet/heartlet/internal/volume"
)

// objectGetter returns how volumes and environment variables read
// ConfigMaps and Secrets, by configMapAndSecretChangeDetectionStrategy as
// upstream: Watch (the default) one watch per object in use, Cache a TTL
// cache (the node's ttl annotation), Get a GET on every read. The watching
// getter is kept in c to be run.
func (c *components) objectGetter(cl *kubeclient.Client, clk clock.WithTicker) volume.Getter {
	direct := volume.NewClientGetter(cl.Kube)
	switch c.cfg.ConfigMapAndSecretChangeDetectionStrategy {
	case kubeletv1beta1.GetChangeDetectionStrategy:
		return direct
	case kubeletv1beta1.TTLCacheChangeDetectionStrategy:
		return volume.NewNodeTTLGetter(direct, clk, c.node.Node)
	default:
		c.watchGetter = volume.NewWatchingGetter(direct, cl.Kube, clk, volume.DefaultWatchIdle)
		c.watchGetter.ResumeWhenBack(cl.Reach.Waiter())
		return c.watchGetter
	}
}
