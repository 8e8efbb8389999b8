package pvc

import (
	"context"
	"testing"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/heartlet/heartlet/internal/kubeapi/kubeapifake"
)

// TestLocalVolumeStats: a local PV set up for a pod has stats from statfs
// of its path under the pod's volume name and claim, once however often it
// is set up, until the pod is torn down; a hostPath PV has none, as
// upstream.
func TestLocalVolumeStats(t *testing.T) {
	dir := t.TempDir()
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}
	dirType := v1.HostPathDirectory
	tests := []struct {
		name      string
		src       v1.PersistentVolumeSource
		wantStats bool
	}{
		{name: "local", src: v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: dir}}, wantStats: true},
		{name: "hostPath", src: v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: dir, Type: &dirType}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := New(NewClientGetter(kubeapifake.Wrap(fake.NewClientset(boundClaim("claim", "pv"), pvWith("pv", tc.src), node)), nodeName), &fakeCSI{})
			pod := testPod()
			ctx := context.Background()
			for range 2 {
				if _, err := p.SetUp(ctx, pod, &pod.Spec.Volumes[0]); err != nil {
					t.Fatal(err)
				}
			}
			got := p.PodVolumeStats(pod.UID)
			if !tc.wantStats {
				if len(got) != 0 {
					t.Fatalf("stats = %+v, want none", got)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("stats = %+v, want one volume", got)
			}
			vs := got[0]
			if vs.Name != "data" || vs.PVCRef == nil || vs.PVCRef.Namespace != "ns" || vs.PVCRef.Name != "claim" {
				t.Errorf("stats name %s pvcRef %+v, want data, ns/claim", vs.Name, vs.PVCRef)
			}
			var st unix.Statfs_t
			if err := unix.Statfs(dir, &st); err != nil {
				t.Fatal(err)
			}
			if want := st.Blocks * uint64(st.Bsize); *vs.CapacityBytes != want || *vs.Inodes != st.Files {
				t.Errorf("capacity %d inodes %d, want statfs's %d and %d", *vs.CapacityBytes, *vs.Inodes, want, st.Files)
			}
			if *vs.UsedBytes+*vs.AvailableBytes > *vs.CapacityBytes || *vs.InodesUsed+*vs.InodesFree != *vs.Inodes {
				t.Errorf("used %d + available %d > capacity %d, or inodes %d + %d != %d", *vs.UsedBytes, *vs.AvailableBytes, *vs.CapacityBytes, *vs.InodesUsed, *vs.InodesFree, *vs.Inodes)
			}
			if err := p.TearDown(ctx, pod.UID); err != nil {
				t.Fatal(err)
			}
			if got := p.PodVolumeStats(pod.UID); len(got) != 0 {
				t.Errorf("stats after TearDown = %+v", got)
			}
		})
	}
}
