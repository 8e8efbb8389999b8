package csi

import (
	"context"
	"path/filepath"
	"sort"
	"strings"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// statsCallTimeout bounds one NodeGetVolumeStats call: a driver that
// hangs delays the next volumes' stats by at most this much.
const statsCallTimeout = 10 * time.Second

// podVolume is what the stats of one publication are reported under: the
// pod's volume name and, for a volume from a claim, the claim.
type podVolume struct {
	name  string
	claim *statsapi.PVCReference
}

// podVolumeOf is the podVolume of the pod's volume v (nil v: the volume
// has no name to report).
func podVolumeOf(pod *v1.Pod, v *v1.Volume) (podVolume, bool) {
	if v == nil {
		return podVolume{}, false
	}
	pv := podVolume{name: v.Name}
	switch {
	case v.PersistentVolumeClaim != nil:
		pv.claim = &statsapi.PVCReference{Name: v.PersistentVolumeClaim.ClaimName, Namespace: pod.Namespace}
	case v.Ephemeral != nil:
		// A generic ephemeral volume's claim is named <pod>-<volume>.
		pv.claim = &statsapi.PVCReference{Name: pod.Name + "-" + v.Name, Namespace: pod.Namespace}
	}
	return pv, true
}

// remember records under which pod volume a publication's stats are
// reported; p.mu is not held.
func (p *Publisher) remember(pod *v1.Pod, dirName string, v *v1.Volume) {
	pv, ok := podVolumeOf(pod, v)
	if !ok {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reportedAs[string(pod.UID)+"/"+dirName] = pv
}

// PodVolumeStats returns the last stats the drivers reported for the
// pod's CSI volumes (those whose driver has GET_VOLUME_STATS), sorted by
// volume name; it never calls a driver. RunStats refreshes them.
func (p *Publisher) PodVolumeStats(uid types.UID) []statsapi.VolumeStats {
	p.statsMu.Lock()
	defer p.statsMu.Unlock()
	var out []statsapi.VolumeStats
	prefix := string(uid) + "/"
	for key, vs := range p.stats {
		if strings.HasPrefix(key, prefix) {
			out = append(out, copyVolumeStats(vs))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// RunStats reads the stats of every published volume from its driver
// right away and then every StatsPeriod, until ctx is done; without a
// positive period it reads none.
func (p *Publisher) RunStats(ctx context.Context) error {
	if p.opts.StatsPeriod <= 0 {
		<-ctx.Done()
		return nil
	}
	t := p.opts.Clock.NewTicker(p.opts.StatsPeriod)
	defer t.Stop()
	for {
		p.refreshStats(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
	}
}

// statsTarget is one publication whose stats are read.
type statsTarget struct {
	key, target, staging, handle string
	drv                          *driver
	pv                           podVolume
}

// refreshStats reads the stats of every published filesystem volume whose
// driver has GET_VOLUME_STATS and keeps them; the volumes gone since the
// last time are dropped. The driver calls are made without p.mu.
func (p *Publisher) refreshStats(ctx context.Context) {
	logger := klog.FromContext(ctx)
	var targets []statsTarget
	p.mu.Lock()
	for key, pv := range p.reportedAs {
		d, ok := p.published[key]
		if !ok {
			continue
		}
		drv, err := p.opts.Drivers.get(d.DriverName)
		if err != nil || !drv.volumeStats {
			continue
		}
		uid, name, _ := strings.Cut(key, "/")
		t := statsTarget{key: key, handle: d.VolumeHandle, drv: drv, pv: pv,
			target: filepath.Join(p.PublishDir(types.UID(uid), name), "mount")}
		if drv.stage && d.VolumeLifecycleMode == modePersistent {
			t.staging = filepath.Join(p.StagingDir(d.DriverName, d.VolumeHandle), globalMount)
		}
		targets = append(targets, t)
	}
	p.mu.Unlock()

	fresh := make(map[string]*statsapi.VolumeStats, len(targets))
	for _, t := range targets {
		if ctx.Err() != nil {
			return
		}
		cctx, cancel := context.WithTimeout(ctx, statsCallTimeout)
		res, err := t.drv.client.NodeGetVolumeStats(cctx, &csipb.NodeGetVolumeStatsRequest{
			VolumeId: t.handle, VolumePath: t.target, StagingTargetPath: t.staging,
		})
		cancel()
		if err != nil {
			logger.V(2).Info("CSI volume stats unreadable", "volume", t.pv.name, "driver", t.drv.name, "err", err)
			continue
		}
		fresh[t.key] = volumeStats(t.pv, res, p.opts.Clock.Now())
	}
	p.statsMu.Lock()
	p.stats = fresh
	p.statsMu.Unlock()
	if p.afterStats != nil {
		p.afterStats()
	}
}

// volumeStats converts a NodeGetVolumeStats answer as upstream does: the
// BYTES usage entry gives capacity, available and used bytes, the INODES
// entry the inodes; a missing entry leaves its fields unset.
func volumeStats(pv podVolume, res *csipb.NodeGetVolumeStatsResponse, now time.Time) *statsapi.VolumeStats {
	vs := &statsapi.VolumeStats{Name: pv.name, FsStats: statsapi.FsStats{Time: metav1.NewTime(now)}}
	if pv.claim != nil {
		c := *pv.claim
		vs.PVCRef = &c
	}
	u64 := func(v int64) *uint64 {
		if v < 0 {
			v = 0
		}
		x := uint64(v)
		return &x
	}
	for _, u := range res.GetUsage() {
		switch u.GetUnit() {
		case csipb.VolumeUsage_BYTES:
			vs.CapacityBytes, vs.AvailableBytes, vs.UsedBytes = u64(u.GetTotal()), u64(u.GetAvailable()), u64(u.GetUsed())
		case csipb.VolumeUsage_INODES:
			vs.Inodes, vs.InodesFree, vs.InodesUsed = u64(u.GetTotal()), u64(u.GetAvailable()), u64(u.GetUsed())
		}
	}
	return vs
}

// copyVolumeStats is a copy of vs that shares no pointer with it.
func copyVolumeStats(vs *statsapi.VolumeStats) statsapi.VolumeStats {
	c := *vs
	if vs.PVCRef != nil {
		r := *vs.PVCRef
		c.PVCRef = &r
	}
	for _, f := range []**uint64{&c.AvailableBytes, &c.CapacityBytes, &c.UsedBytes, &c.Inodes, &c.InodesFree, &c.InodesUsed} {
		if *f != nil {
			v := **f
			*f = &v
		}
	}
	return c
}
