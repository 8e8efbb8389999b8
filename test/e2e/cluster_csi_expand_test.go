//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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
