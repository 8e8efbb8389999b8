//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// Raw block claims (volumeMode Block, containers' volumeDevices): a local
// PV on a loop device of the test, a CSI block volume of the test driver,
// and the refusals.

// blockPattern is what the pods write at the start of the device.
const blockPattern = "heartlet-block-1"

// loopDevice attaches a sparse file to a loop device for the test.
func loopDevice(t *testing.T) string {
	t.Helper()
	img := filepath.Join(t.TempDir(), "disk.img")
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(16 << 20); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	out, err := exec.Command("losetup", "--find", "--show", img).CombinedOutput()
	if err != nil {
		t.Skipf("losetup: %v: %s", err, out)
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "--detach", dev).CombinedOutput(); err != nil {
			t.Errorf("losetup --detach %s: %v: %s", dev, err, out)
		}
	})
	return dev
}

// upstreamGlobalMap makes what upstream's kubelet makes at a block
// volume's global map path for a pod: the device bind-mounted on a file
// and a loop device attached to that file; it returns the loop device.
func upstreamGlobalMap(t *testing.T, dev, path string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "--bind", dev, path).CombinedOutput(); err != nil {
		t.Fatalf("bind %s on %s: %v: %s", dev, path, err, out)
	}
	out, err := exec.Command("losetup", "--find", "--show", path).CombinedOutput()
	if err != nil {
		t.Fatalf("losetup %s: %v: %s", path, err, out)
	}
	lock := strings.TrimSpace(string(out))
	t.Cleanup(func() {
		// Only if heartlet did not release them.
		if b, err := os.ReadFile(filepath.Join("/sys/block", filepath.Base(lock), "loop", "backing_file")); err == nil && strings.TrimSpace(string(b)) == path {
			_ = exec.Command("losetup", "--detach", lock).Run()
		}
		if isMounted(t, path) {
			_ = exec.Command("umount", path).Run()
		}
	})
	return lock
}

// localBlockPV creates a local PV of volumeMode Block (Filesystem when
// block is false) on path with this node's affinity.
func localBlockPV(t *testing.T, name, path string, block bool) {
	t.Helper()
	mode := v1.PersistentVolumeFilesystem
	if block {
		mode = v1.PersistentVolumeBlock
	}
	createObject(t, &v1.PersistentVolume{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolume"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.PersistentVolumeSpec{
			Capacity:                      v1.ResourceList{v1.ResourceStorage: resource.MustParse("16Mi")},
			AccessModes:                   []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: v1.PersistentVolumeReclaimRetain,
			VolumeMode:                    &mode,
			PersistentVolumeSource:        v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: path}},
			NodeAffinity: &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
				MatchExpressions: []v1.NodeSelectorRequirement{{Key: v1.LabelHostname, Operator: v1.NodeSelectorOpIn, Values: []string{clusterNode}}},
			}}}},
		},
	}, "pv", name)
}

// createModeClaim creates a claim of the given volumeMode for pvName and
// waits until it is bound.
func createModeClaim(t *testing.T, claim, pvName string, mode v1.PersistentVolumeMode) {
	t.Helper()
	empty := ""
	createObject(t, &v1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: claim, Namespace: "default"},
		Spec: v1.PersistentVolumeClaimSpec{
			AccessModes:      []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			StorageClassName: &empty,
			VolumeName:       pvName,
			VolumeMode:       &mode,
			Resources:        v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("16Mi")}},
		},
	}, "pvc", claim)
	waitFor(t, 60*time.Second, "claim "+claim+" bound", func() (bool, string) {
		var c v1.PersistentVolumeClaim
		if err := getJSON(&c, "pvc", "-n", "default", claim); err != nil {
			return false, err.Error()
		}
		return c.Status.Phase == v1.ClaimBound, "phase " + string(c.Status.Phase)
	})
}

// devicePod is a pod that gets claim as the device /dev/xvda, and a host
// directory out at /out, and runs script.
func devicePod(name, claim, out, script string, readOnly bool) *v1.Pod {
	hostPathDir := v1.HostPathDirectory
	return apiPod(name, func(p *v1.Pod) {
		c := shContainer("main", script)
		c.VolumeDevices = []v1.VolumeDevice{{Name: "data", DevicePath: "/dev/xvda"}}
		c.VolumeMounts = []v1.VolumeMount{{Name: "out", MountPath: "/out"}}
		p.Spec.Containers = []v1.Container{c}
		p.Spec.Volumes = []v1.Volume{
			{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: claim, ReadOnly: readOnly}}},
			{Name: "out", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: out, Type: &hostPathDir}}},
		}
	})
}

// writeScript writes the pattern at the start of the device and reads it
// back into /out/<file>.
func writeScript(file string) string {
	return fmt.Sprintf("printf %s | dd of=/dev/xvda bs=16 count=1 && sync && dd if=/dev/xvda bs=16 count=1 > /out/%s; %s", blockPattern, file, sleeper)
}

// readScript reads the start of the device into /out/<file>.
func readScript(file string) string {
	return fmt.Sprintf("dd if=/dev/xvda bs=16 count=1 > /out/%s; %s", file, sleeper)
}

// waitOut waits until the pod wrote want into out/file.
func waitOut(t *testing.T, out, file, want string) {
	t.Helper()
	waitFor(t, 30*time.Second, "the pod's "+file, func() (bool, string) {
		b, err := os.ReadFile(filepath.Join(out, file))
		return err == nil && string(b) == want, fmt.Sprintf("%q %v", b, err)
	})
}

// A local PV on a loop device, volumeMode Block: the pod writes to the
// device and reads it back, the bytes are on the host's device, a second
// pod reads them after the first is gone, and a read-only claim's pod may
// read but not write.
func TestClusterBlockLocal(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{})
	dev := loopDevice(t)
	localBlockPV(t, "e2e-block-local", dev, true)
	createModeClaim(t, "block-local", "e2e-block-local", v1.PersistentVolumeBlock)
	out := t.TempDir()

	createPod(t, devicePod("block-writer", "block-local", out, writeScript("first"), false))
	p := waitAPIPodRunning(t, h, "block-writer")
	waitOut(t, out, "first", blockPattern)
	link := filepath.Join(h.rootDir, "pods", string(p.UID), "volumeDevices", "kubernetes.io~local-volume", "e2e-block-local")
	if got, err := os.Readlink(link); err != nil || got != dev {
		t.Errorf("pod device link %s -> %q (%v), want %s", link, got, err, dev)
	}
	b := make([]byte, len(blockPattern))
	f, err := os.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.ReadAt(b, 0)
	_ = f.Close()
	if err != nil || string(b) != blockPattern {
		t.Errorf("host device %s starts with %q (%v), want %q", dev, b, err, blockPattern)
	}
	// What upstream's kubelet holds for a pod it mapped (before a switch):
	// the device bind-mounted at its global map path and a loop device on
	// it. heartlet releases both with the pod.
	global := filepath.Join(h.rootDir, "plugins", "kubernetes.io~local-volume", "volumeDevices", "e2e-block-local", string(p.UID))
	lock := upstreamGlobalMap(t, dev, global)
	deletePodAndWait(t, "block-writer")
	waitFor(t, 30*time.Second, "upstream's global map entry released", func() (bool, string) {
		_, err := os.Lstat(global)
		return os.IsNotExist(err), fmt.Sprintf("%s: %v", global, err)
	})
	if b, err := os.ReadFile(filepath.Join("/sys/block", filepath.Base(lock), "loop", "backing_file")); err == nil {
		t.Errorf("loop device %s still attached to %s", lock, b)
	}

	createPod(t, devicePod("block-reader", "block-local", out, readScript("second"), false))
	waitAPIPodRunning(t, h, "block-reader")
	waitOut(t, out, "second", blockPattern)
	deletePodAndWait(t, "block-reader")

	ro := fmt.Sprintf("dd if=/dev/xvda bs=16 count=1 > /out/ro-read; if printf x | dd of=/dev/xvda bs=1 count=1 conv=notrunc; then echo wrote; else echo refused; fi > /out/ro-write; %s", sleeper)
	createPod(t, devicePod("block-ro", "block-local", out, ro, true))
	waitAPIPodRunning(t, h, "block-ro")
	waitOut(t, out, "ro-read", blockPattern)
	waitOut(t, out, "ro-write", "refused\n")
}

// provisionBlock creates a block volume through the driver's controller
// service and a PV of volumeMode Block for claim default/claim.
func (d *csiDriver) provisionBlock(t *testing.T, claim string) (handle, pvName string) {
	t.Helper()
	handle, pvName = d.provisionVolume(t, claim, 16<<20, v1.PersistentVolumeBlock)
	createModeClaim(t, claim, pvName, v1.PersistentVolumeBlock)
	return handle, pvName
}

// A CSI block volume of the test driver: staged and published at
// upstream's paths with a Block access type, written and read by a pod;
// heartlet killed with -9 and restarted keeps the running pod's device;
// the pod's deletion unpublishes and unstages it; a second pod reads the
// bytes back.
func TestClusterBlockCSI(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{})
	d := startCSIDriver(t, h)
	handle, pvName := d.provisionBlock(t, "block-csi")
	out := t.TempDir()

	createPod(t, devicePod("block-csi-writer", "block-csi", out, writeScript("first"), false))
	p := waitAPIPodRunning(t, h, "block-csi-writer")
	waitOut(t, out, "first", blockPattern)
	blockRoot := filepath.Join(h.rootDir, "plugins", "kubernetes.io", "csi", "volumeDevices")
	stage := d.waitCall(t, "NodeStageVolume", handle)
	if want := filepath.Join(blockRoot, "staging", pvName); stage.StagingTargetPath != want {
		t.Errorf("staging path %s, want %s", stage.StagingTargetPath, want)
	}
	pub := d.waitCall(t, "NodePublishVolume", handle)
	target := filepath.Join(blockRoot, "publish", pvName, string(p.UID))
	if pub.TargetPath != target || pub.StagingTargetPath != stage.StagingTargetPath {
		t.Errorf("published at %s from %s, want %s from the staging path", pub.TargetPath, pub.StagingTargetPath, target)
	}
	link := filepath.Join(h.rootDir, "pods", string(p.UID), "volumeDevices", "kubernetes.io~csi", pvName)
	if got, err := os.Readlink(link); err != nil || got != target {
		t.Errorf("pod device link %s -> %q (%v), want %s", link, got, err, target)
	}
	if _, err := os.Stat(filepath.Join(blockRoot, pvName, "data", "vol_data.json")); err != nil {
		t.Errorf("vol_data.json: %v", err)
	}

	// Killed and restarted: the running pod's device is reconstructed,
	// never unpublished, and its container keeps running.
	id := statusOf(p, "main").ContainerID
	h.kill()
	startCluster(t, h, clusterOptions{})
	waitNodeSchedulable(t, h)
	p = waitAPIPodRunning(t, h, "block-csi-writer")
	if cs := statusOf(p, "main"); cs.ContainerID != id || cs.RestartCount != 0 {
		t.Errorf("the running pod's container changed: %s (restarts %d), was %s", cs.ContainerID, cs.RestartCount, id)
	}
	if cs := d.succeeded(t, "NodeUnpublishVolume", handle); len(cs) != 0 {
		t.Errorf("the running pod's block volume was unpublished: %+v", cs)
	}

	deletePodAndWait(t, "block-csi-writer")
	if un := d.waitCall(t, "NodeUnpublishVolume", handle); un.TargetPath != target {
		t.Errorf("unpublished %s, want %s", un.TargetPath, target)
	}
	if un := d.waitCall(t, "NodeUnstageVolume", handle); un.StagingTargetPath != stage.StagingTargetPath {
		t.Errorf("unstaged %s, want %s", un.StagingTargetPath, stage.StagingTargetPath)
	}
	for _, path := range []string{stage.StagingTargetPath, target, filepath.Join(blockRoot, pvName)} {
		if _, err := os.Lstat(path); !os.IsNotExist(err) {
			t.Errorf("%s left after the pod went: %v", path, err)
		}
	}

	createPod(t, devicePod("block-csi-reader", "block-csi", out, readScript("second"), false))
	waitAPIPodRunning(t, h, "block-csi-reader")
	waitOut(t, out, "second", blockPattern)
}

// waitFailedMount waits for a FailedMount event of pod name containing
// msg, and checks that the pod does not run.
func waitFailedMount(t *testing.T, name, msg string) {
	t.Helper()
	waitFor(t, 60*time.Second, "FailedMount with "+msg, func() (bool, string) {
		evs, err := podEvents(name, "FailedMount")
		if err != nil {
			return false, err.Error()
		}
		for _, e := range evs {
			if strings.Contains(e.Message, msg) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("events %+v", evs)
	})
	if p, err := getAPIPod(name); err != nil || p == nil || p.Status.Phase == v1.PodRunning {
		t.Errorf("pod %s runs despite the refusal (%v)", name, err)
	}
}

// Refusals: a Block claim in volumeMounts and a Filesystem claim in
// volumeDevices are FailedMount with upstream's messages; a pod cannot
// make a host path of its choice a device: the API server refuses
// volumeDevices on a hostPath volume, and heartlet refuses it too in a
// static pod, which no API server checks.
func TestClusterBlockRefused(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{})
	dev := loopDevice(t)
	localBlockPV(t, "e2e-block-mounted", dev, true)
	createModeClaim(t, "block-mounted", "e2e-block-mounted", v1.PersistentVolumeBlock)
	localBlockPV(t, "e2e-fs-mapped", t.TempDir(), false)
	createModeClaim(t, "fs-mapped", "e2e-fs-mapped", v1.PersistentVolumeFilesystem)

	createPod(t, claimPod("block-in-mounts", "block-mounted", sleeper, func(p *v1.Pod) { p.Spec.NodeName = clusterNode }))
	waitFailedMount(t, "block-in-mounts", "volume data has volumeMode Block, but is specified in volumeMounts")

	out := t.TempDir()
	fsPod := devicePod("fs-in-devices", "fs-mapped", out, sleeper, false)
	fsPod.Spec.NodeName = clusterNode
	createPod(t, fsPod)
	waitFailedMount(t, "fs-in-devices", "volume data has volumeMode Filesystem, but is specified in volumeDevices")

	hostDev := v1.HostPathBlockDev
	hostPathPod := apiPod("hostpath-device", func(p *v1.Pod) {
		p.Spec.NodeName = clusterNode
		p.Spec.Containers[0].VolumeDevices = []v1.VolumeDevice{{Name: "disk", DevicePath: "/dev/xvda"}}
		p.Spec.Volumes = []v1.Volume{{Name: "disk", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: dev, Type: &hostDev}}}}
	})
	b, err := yaml.Marshal(hostPathPod)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kubectlIn(b, "create", "-f", "-"); err == nil {
		_, _ = kubectl("delete", "pod", "-n", "default", "hostpath-device", "--grace-period=0", "--force")
		t.Fatal("the API server accepted volumeDevices on a hostPath volume")
	}

	const file = "static-hostpath-device.yaml"
	name := "static-hostpath-device-" + clusterNode
	h.writeManifest(t, file, manifest(t, "static-hostpath-device", func(p *v1.Pod) {
		c := shContainer("main", sleeper)
		c.VolumeDevices = []v1.VolumeDevice{{Name: "disk", DevicePath: "/dev/xvda"}}
		p.Spec.Containers = []v1.Container{c}
		p.Spec.Volumes = []v1.Volume{{Name: "disk", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: dev}}}}
	}))
	t.Cleanup(func() {
		h.removeManifest(t, file)
		deletePodAndWait(t, name)
	})
	waitFor(t, 60*time.Second, "the static pod's container refused", func() (bool, string) {
		pods, err := h.pods()
		if err != nil {
			return false, err.Error()
		}
		for i := range pods {
			if pods[i].Name != name {
				continue
			}
			for _, cs := range pods[i].Status.ContainerStatuses {
				if cs.State.Running != nil {
					t.Fatalf("the static pod's container runs with the host device %s", dev)
				}
				if w := cs.State.Waiting; w != nil && w.Reason == "CreateContainerConfigError" && strings.Contains(w.Message, "cannot be a device") {
					return true, ""
				}
			}
			return false, describeStatus(&pods[i])
		}
		return false, "not in /pods"
	})
}
