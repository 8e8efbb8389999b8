package pvc

import (
	"sort"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// localVolume is a local PV set up for a pod, measured for its stats.
type localVolume struct {
	name             string // the pod's volume name
	namespace, claim string
	path             string
}

// rememberLocal records the local PV at path behind pod's volume v.
func (p *Plugin) rememberLocal(pod *v1.Pod, v *v1.Volume, path string) {
	claim, _ := ClaimName(pod, v)
	p.mu.Lock()
	defer p.mu.Unlock()
	vols := p.local[pod.UID]
	for _, lv := range vols {
		if lv.name == v.Name {
			return
		}
	}
	p.local[pod.UID] = append(vols, localVolume{name: v.Name, namespace: pod.Namespace, claim: claim, path: path})
}

// PodVolumeStats gives the stats of the pod's local PVs, as upstream
// measures them: statfs of the volume's path (capacity, available, used
// as capacity less free, and the inodes), under the pod's volume name with
// the claim's pvcRef. hostPath PVs have none, as upstream; CSI volumes'
// come from the CSI publisher.
func (p *Plugin) PodVolumeStats(uid types.UID) []statsapi.VolumeStats {
	p.mu.Lock()
	vols := append([]localVolume(nil), p.local[uid]...)
	p.mu.Unlock()
	var out []statsapi.VolumeStats
	for _, lv := range vols {
		var st unix.Statfs_t
		if err := unix.Statfs(lv.path, &st); err != nil {
			continue
		}
		bs := uint64(st.Bsize)
		capacity, free, avail := st.Blocks*bs, st.Bfree*bs, st.Bavail*bs
		used := capacity - free
		inodes, inodesFree := st.Files, st.Ffree
		inodesUsed := inodes - inodesFree
		out = append(out, statsapi.VolumeStats{
			Name:   lv.name,
			PVCRef: &statsapi.PVCReference{Name: lv.claim, Namespace: lv.namespace},
			FsStats: statsapi.FsStats{
				Time:           metav1.NewTime(p.clock.Now()),
				CapacityBytes:  &capacity,
				AvailableBytes: &avail,
				UsedBytes:      &used,
				Inodes:         &inodes,
				InodesFree:     &inodesFree,
				InodesUsed:     &inodesUsed,
			},
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
