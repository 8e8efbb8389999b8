//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// Two pods share one ReadWriteMany CSI volume at the same time: it is
// staged once and published into each pod; each pod reads what the other
// wrote; the first pod's deletion unpublishes only its own target and
// leaves the volume staged and in use by the second, and the second's
// deletion unstages it.
func TestClusterCSIShared(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{})
	d := startCSIDriver(t, h)
	d.runController(t)
	handle, pvName := d.dynamicClaim(t, "csi-shared", v1.ReadWriteMany)

	// Each pod writes its own file, then waits for the other's and copies
	// it to a file of its own, so each pod's read is visible to the test.
	sharer := func(name, other string) *v1.Pod {
		return claimPod(name, "csi-shared", fmt.Sprintf(
			"echo from-%[1]s > /data/%[1]s; until [ -f /data/%[2]s ]; do sleep 0.2; done; cat /data/%[2]s > /data/%[1]s-read; %[3]s",
			name, other, sleeper), nil)
	}
	createPod(t, sharer("csi-share-a", "csi-share-b"))
	createPod(t, sharer("csi-share-b", "csi-share-a"))
	a := waitAPIPodRunning(t, h, "csi-share-a")
	b := waitAPIPodRunning(t, h, "csi-share-b")
	targetA, targetB := csiTarget(h, string(a.UID), pvName), csiTarget(h, string(b.UID), pvName)

	for _, c := range []struct{ target, file, want string }{
		{targetA, "csi-share-a-read", "from-csi-share-b\n"},
		{targetB, "csi-share-b-read", "from-csi-share-a\n"},
	} {
		waitFor(t, 60*time.Second, c.file+" in the shared volume", func() (bool, string) {
			got, err := os.ReadFile(filepath.Join(c.target, c.file))
			return err == nil && string(got) == c.want, fmt.Sprintf("%q %v", got, err)
		})
	}
	if n := len(d.succeeded(t, "NodeStageVolume", handle)); n != 1 {
		t.Errorf("NodeStageVolume succeeded %d times for two pods at once, want 1", n)
	}
	published := map[string]bool{}
	for _, c := range d.succeeded(t, "NodePublishVolume", handle) {
		published[c.TargetPath] = true
	}
	if !published[targetA] || !published[targetB] {
		t.Errorf("published at %v, want both %s and %s", published, targetA, targetB)
	}

	deletePodAndWait(t, "csi-share-a")
	unpublished := d.waitCall(t, "NodeUnpublishVolume", handle)
	if unpublished.TargetPath != targetA {
		t.Errorf("unpublished %s, want the deleted pod's %s", unpublished.TargetPath, targetA)
	}
	staging := csiStaging(h, handle)
	if n := len(d.succeeded(t, "NodeUnstageVolume", handle)); n != 0 || !isMounted(t, staging) || !isMounted(t, targetB) {
		t.Fatalf("after the first pod went: %d unstage calls, staging mounted %v, second target mounted %v; want 0, true, true",
			n, isMounted(t, staging), isMounted(t, targetB))
	}
	if got, err := os.ReadFile(filepath.Join(targetB, "csi-share-a")); err != nil || string(got) != "from-csi-share-a\n" {
		t.Errorf("the second pod's view after the first went: %q %v", got, err)
	}
	unique := v1.UniqueVolumeName("kubernetes.io/csi/" + csiDriverName + "^" + handle)
	waitFor(t, 30*time.Second, "the volume the second pod uses in volumesInUse", func() (bool, string) {
		n, err := getNode()
		if err != nil {
			return false, err.Error()
		}
		return slices.Contains(n.Status.VolumesInUse, unique), fmt.Sprintf("volumesInUse %v", n.Status.VolumesInUse)
	})

	deletePodAndWait(t, "csi-share-b")
	d.waitCall(t, "NodeUnstageVolume", handle)
	if isMounted(t, staging) || isMounted(t, targetB) {
		t.Errorf("still mounted after both pods went: staging %v, target %v", isMounted(t, staging), isMounted(t, targetB))
	}
}
