//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// expansions lists the successful NodeExpandVolume calls on a volume.
func (d *csiDriver) expansions(t *testing.T, volumeID string) []csiCall {
	t.Helper()
	var out []csiCall
	for _, c := range d.calls(t) {
		if c.Method == "NodeExpandVolume" && c.Error == "" && c.VolumeID == volumeID {
			out = append(out, c)
		}
	}
	return out
}

// growClaim asks for size more on the claim.
func growClaim(t *testing.T, claim, size string) {
	t.Helper()
	mustKubectl(t, "patch", "pvc", "-n", "default", claim, "--type=merge",
		"-p", fmt.Sprintf(`{"spec":{"resources":{"requests":{"storage":%q}}}}`, size))
}

// claimResized reports whether the claim's status says the expansion to
// size is finished: the capacity, no resize status, no resize condition.
func claimResized(claim, size string) (bool, string) {
	var c v1.PersistentVolumeClaim
	if err := getJSON(&c, "pvc", "-n", "default", claim); err != nil {
		return false, err.Error()
	}
	got := c.Status.Capacity[v1.ResourceStorage]
	desc := fmt.Sprintf("capacity %s, allocatedResourceStatuses %v, conditions %+v", got.String(), c.Status.AllocatedResourceStatuses, c.Status.Conditions)
	if got.Cmp(resource.MustParse(size)) != 0 || len(c.Status.AllocatedResourceStatuses) != 0 {
		return false, desc
	}
	for _, cond := range c.Status.Conditions {
		if cond.Type == v1.PersistentVolumeClaimFileSystemResizePending || cond.Type == v1.PersistentVolumeClaimNodeResizeError {
			return false, desc
		}
	}
	return true, desc
}

// A claim in use grows: the test resizer expands the volume and asks for
// the node's part (NodeResizePending, FileSystemResizePending); heartlet
// calls NodeExpandVolume on the pod's publication at the pod's next sync,
// without restarting its container, and records the new capacity on the
// claim with FileSystemResizeSuccessful events. A claim grown while no pod
// uses it is expanded when a pod mounts it, before its container starts.
func TestClusterCSIExpand(t *testing.T) {
	// Online expansion waits for the pod's next sync, as upstream's.
	h := startClusterHeartlet(t, clusterOptions{config: "syncFrequency: 10s\n"})
	d := startCSIDriver(t, h)
	d.runController(t)

	handle, pvName := d.dynamicClaim(t, "csi-grow")
	createPod(t, claimPod("csi-grower", "csi-grow", "echo before > /data/f; "+sleeper, nil))
	p := waitAPIPodRunning(t, h, "csi-grower")
	target := csiTarget(h, string(p.UID), pvName)
	if n := len(d.expansions(t, handle)); n != 0 {
		t.Fatalf("%d NodeExpandVolume calls before any growth", n)
	}
	growClaim(t, "csi-grow", "64Mi")
	waitFor(t, 120*time.Second, "the claim in use resized to 64Mi", func() (bool, string) { return claimResized("csi-grow", "64Mi") })
	calls := d.expansions(t, handle)
	if len(calls) != 1 || calls[0].TargetPath != target || calls[0].CapacityBytes != 64<<20 {
		t.Errorf("NodeExpandVolume calls %+v, want one on %s for 64Mi", calls, target)
	}
	waitFor(t, 30*time.Second, "FileSystemResizeSuccessful on the pod", func() (bool, string) {
		evs, err := podEvents("csi-grower", "FileSystemResizeSuccessful")
		if err != nil {
			return false, err.Error()
		}
		return len(evs) > 0 && strings.Contains(evs[0].Message, pvName), fmt.Sprintf("events %+v", evs)
	})
	var claimEvents v1.EventList
	if err := getJSON(&claimEvents, "events", "-n", "default", "--field-selector",
		"involvedObject.kind=PersistentVolumeClaim,involvedObject.name=csi-grow,reason=FileSystemResizeSuccessful"); err != nil || len(claimEvents.Items) == 0 {
		t.Errorf("no FileSystemResizeSuccessful event on the claim (%v)", err)
	}
	now, err := getAPIPod("csi-grower")
	if err != nil {
		t.Fatal(err)
	}
	if cs := now.Status.ContainerStatuses; len(cs) != 1 || cs[0].RestartCount != 0 || cs[0].State.Running == nil {
		t.Errorf("the pod's container after the expansion: %+v", cs)
	}
	if b, err := os.ReadFile(target + "/f"); err != nil || string(b) != "before\n" {
		t.Errorf("the pod's file after the expansion: %q %v", b, err)
	}

	// Grown before any pod mounts it: the resizer leaves it pending on the
	// node, and the mount expands it.
	handle2, pvName2 := d.dynamicClaim(t, "csi-grow-later")
	growClaim(t, "csi-grow-later", "64Mi")
	waitFor(t, 60*time.Second, "the resizer to leave the node's part pending", func() (bool, string) {
		var c v1.PersistentVolumeClaim
		if err := getJSON(&c, "pvc", "-n", "default", "csi-grow-later"); err != nil {
			return false, err.Error()
		}
		return c.Status.AllocatedResourceStatuses[v1.ResourceStorage] == v1.PersistentVolumeClaimNodeResizePending,
			fmt.Sprintf("allocatedResourceStatuses %v", c.Status.AllocatedResourceStatuses)
	})
	createPod(t, claimPod("csi-grown", "csi-grow-later", sleeper, nil))
	p2 := waitAPIPodRunning(t, h, "csi-grown")
	if ok, desc := claimResized("csi-grow-later", "64Mi"); !ok {
		t.Errorf("the claim mounted after it grew is not resized once its pod runs: %s", desc)
	}
	calls = d.expansions(t, handle2)
	if len(calls) != 1 || calls[0].TargetPath != csiTarget(h, string(p2.UID), pvName2) {
		t.Errorf("NodeExpandVolume calls at mount %+v", calls)
	}
}

// A raw block claim of the test driver grown while its pod runs: the
// driver's volume grows, heartlet calls NodeExpandVolume on the pod's
// block publication with the block access type, the claim's status says
// the expansion is done, and the container sees the larger device.
func TestClusterCSIExpandBlock(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{config: "syncFrequency: 10s\n"})
	d := startCSIDriver(t, h)
	d.runController(t)

	class, mode := csiDriverName, v1.PersistentVolumeBlock
	createObject(t, &v1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: "csi-grow-block", Namespace: "default"},
		Spec: v1.PersistentVolumeClaimSpec{
			AccessModes:      []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			StorageClassName: &class,
			VolumeMode:       &mode,
			Resources:        v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("32Mi")}},
		},
	}, "pvc", "csi-grow-block")
	var pv v1.PersistentVolume
	waitFor(t, 60*time.Second, "the block claim provisioned and bound", func() (bool, string) {
		var c v1.PersistentVolumeClaim
		if err := getJSON(&c, "pvc", "-n", "default", "csi-grow-block"); err != nil {
			return false, err.Error()
		}
		if c.Status.Phase != v1.ClaimBound {
			return false, "phase " + string(c.Status.Phase)
		}
		if err := getJSON(&pv, "pv", c.Spec.VolumeName); err != nil {
			return false, err.Error()
		}
		return pv.Spec.CSI != nil && pv.Spec.VolumeMode != nil && *pv.Spec.VolumeMode == v1.PersistentVolumeBlock, fmt.Sprintf("pv %+v", pv.Spec)
	})
	handle := pv.Spec.CSI.VolumeHandle

	out := t.TempDir()
	sizeLoop := "while true; do blockdev --getsize64 /dev/xvda > /out/size.tmp && mv /out/size.tmp /out/size; sleep 1; done"
	createPod(t, devicePod("csi-block-grower", "csi-grow-block", out, sizeLoop, false))
	p := waitAPIPodRunning(t, h, "csi-block-grower")
	deviceSize := func(want int64) func() (bool, string) {
		return func() (bool, string) {
			b, err := os.ReadFile(filepath.Join(out, "size"))
			return err == nil && strings.TrimSpace(string(b)) == fmt.Sprint(want), fmt.Sprintf("the container's device size %q %v", b, err)
		}
	}
	waitFor(t, 30*time.Second, "the container's device of 32Mi", deviceSize(32<<20))

	growClaim(t, "csi-grow-block", "64Mi")
	waitFor(t, 120*time.Second, "the block claim in use resized to 64Mi", func() (bool, string) { return claimResized("csi-grow-block", "64Mi") })
	target := filepath.Join(h.rootDir, "plugins", "kubernetes.io", "csi", "volumeDevices", "publish", pv.Name, string(p.UID))
	if calls := d.expansions(t, handle); len(calls) != 1 || calls[0].TargetPath != target || calls[0].CapacityBytes != 64<<20 {
		t.Errorf("NodeExpandVolume calls %+v, want one on the block publication %s for 64Mi", calls, target)
	}
	waitFor(t, 30*time.Second, "the container's device of 64Mi", deviceSize(64<<20))
	now, err := getAPIPod("csi-block-grower")
	if err != nil {
		t.Fatal(err)
	}
	if cs := now.Status.ContainerStatuses; len(cs) != 1 || cs[0].RestartCount != 0 || cs[0].State.Running == nil {
		t.Errorf("the pod's container after the expansion: %+v", cs)
	}
}
