//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/heartlet/heartlet/test/csi/controller"
)

// The storage tests run the project's own CSI driver (test/csi/driver) and
// registrar (test/csi/registrar) next to a cluster-mode heartlet: the
// registrar puts <root>/plugins_registry/<driver>-reg.sock as
// node-driver-registrar does, and heartlet registers the driver, publishes
// it in the CSINode object, stages and publishes the pods' volumes.

const csiDriverName = "csi.heartlet.test"

// csiDriver is a running test driver and its registrar.
type csiDriver struct {
	socket     string
	recordPath string
}

// csiCall is one line of the driver's record file.
type csiCall struct {
	Method            string            `json:"method"`
	VolumeID          string            `json:"volumeID"`
	StagingTargetPath string            `json:"stagingTargetPath"`
	TargetPath        string            `json:"targetPath"`
	VolumeContext     map[string]string `json:"volumeContext"`
	CapacityBytes     int64             `json:"capacityBytes"`
	Error             string            `json:"error"`
}

// startCSIDriver starts the driver and its registrar for heartlet h, creates
// the CSIDriver object and waits until heartlet has published the driver in
// the node's CSINode. Everything stops and is removed when the test ends.
func startCSIDriver(t *testing.T, h *heartlet) *csiDriver {
	t.Helper()
	return startCSIDriverWith(t, h, false)
}

// startCSIDriverWith is startCSIDriver; with attach, the CSIDriver says
// attachRequired and the driver refuses volumes not attached to the node,
// and the test's attacher (test/csi/controller) attaches them.
func startCSIDriverWith(t *testing.T, h *heartlet, attach bool) *csiDriver {
	t.Helper()
	driverBin, registrarBin := os.Getenv("HEARTLET_CSI_DRIVER_BIN"), os.Getenv("HEARTLET_CSI_REGISTRAR_BIN")
	if driverBin == "" || registrarBin == "" {
		t.Skip("HEARTLET_CSI_DRIVER_BIN or HEARTLET_CSI_REGISTRAR_BIN is not set (hack/test.sh builds them)")
	}
	sockDir, err := os.MkdirTemp("", "csi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(sockDir) })
	stateDir := t.TempDir()
	logDir := t.TempDir()
	d := &csiDriver{socket: filepath.Join(sockDir, "csi.sock"), recordPath: filepath.Join(logDir, "calls.jsonl")}

	start := func(name, bin string, args ...string) { startLogged(t, logDir, name, bin, args...) }
	// Cleanups run last first: the driver's teardown after the driver.
	t.Cleanup(func() {
		if out, err := exec.Command(driverBin, "--teardown", "--state-dir", stateDir).CombinedOutput(); err != nil {
			t.Errorf("driver teardown: %v: %s", err, out)
		}
	})
	driverArgs := []string{"--endpoint", d.socket, "--name", csiDriverName, "--node-id", clusterNode,
		"--state-dir", stateDir, "--record", d.recordPath, "--backing-size", fmt.Sprint(512 << 20)}
	if attach {
		driverArgs = append(driverArgs, "--require-attach")
	}
	start("csi-driver", driverBin, driverArgs...)
	// Runs after the registrar's stop (cleanups run last first): heartlet
	// sees its registration socket go and unpublishes the driver; what a
	// test leaves behind must not let the next one see the driver as
	// registered before its own heartlet registered it.
	t.Cleanup(func() {
		if !h.running() {
			return
		}
		waitFor(t, 30*time.Second, "the driver gone from the node's CSINode and annotation once its registrar stopped", func() (bool, string) {
			var cn storagev1.CSINode
			if err := getJSON(&cn, "csinode", clusterNode); err != nil {
				return false, err.Error()
			}
			n, err := getNode()
			if err != nil {
				return false, err.Error()
			}
			ann := n.Annotations["csi.volume.kubernetes.io/nodeid"]
			listed := slices.ContainsFunc(cn.Spec.Drivers, func(d storagev1.CSINodeDriver) bool { return d.Name == csiDriverName })
			return !listed && !strings.Contains(ann, `"`+csiDriverName+`"`), fmt.Sprintf("CSINode drivers %+v, annotation %q", cn.Spec.Drivers, ann)
		})
	})
	start("csi-registrar", registrarBin, "--csi-address", d.socket, "--driver-name", csiDriverName,
		"--plugin-registration-path", filepath.Join(h.rootDir, "plugins_registry"))

	yes := true
	createObject(t, &storagev1.CSIDriver{
		TypeMeta:   metav1.TypeMeta{APIVersion: "storage.k8s.io/v1", Kind: "CSIDriver"},
		ObjectMeta: metav1.ObjectMeta{Name: csiDriverName},
		Spec: storagev1.CSIDriverSpec{
			AttachRequired: &attach, PodInfoOnMount: &yes,
			VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent, storagev1.VolumeLifecycleEphemeral},
		},
	}, "csidriver", csiDriverName)

	waitFor(t, 60*time.Second, "the driver in the node's CSINode", func() (bool, string) {
		var cn storagev1.CSINode
		if err := getJSON(&cn, "csinode", clusterNode); err != nil {
			return false, err.Error()
		}
		for _, drv := range cn.Spec.Drivers {
			if drv.Name == csiDriverName {
				return drv.NodeID == clusterNode, fmt.Sprintf("driver entry %+v", drv)
			}
		}
		return false, fmt.Sprintf("drivers %+v", cn.Spec.Drivers)
	})
	return d
}

// startLogged starts bin with args, its output in logDir/name.log (shown
// when the test fails); it is stopped (SIGTERM, then SIGKILL after 20 s)
// when the test ends.
func startLogged(t *testing.T, logDir, name, bin string, args ...string) {
	t.Helper()
	logFile, err := os.Create(filepath.Join(logDir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		_ = logFile.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logFile.Name())
			t.Logf("%s log:\n%s", name, b)
		}
	})
}

// runController runs the test provisioner, attacher and resizer of
// test/csi/controller for the driver until the test ends, and creates the
// driver's StorageClass, named after the driver, which allows expansion.
func (d *csiDriver) runController(t *testing.T) {
	t.Helper()
	runCSIController(t, d.socket, csiDriverName)
}

// runCSIController is runController for the driver named driverName
// serving CSI on socket.
func runCSIController(t *testing.T, socket, driverName string) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", adminKubeconfig)
	if err != nil {
		t.Fatalf("load %s: %v", adminKubeconfig, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := controller.Dial(socket)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- controller.Run(ctx, controller.Config{Client: cs, CSI: conn, DriverName: driverName})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && ctx.Err() == nil {
			t.Errorf("test controller: %v", err)
		}
		_ = conn.Close()
	})
	del, expand := v1.PersistentVolumeReclaimDelete, true
	createObject(t, &storagev1.StorageClass{
		TypeMeta:             metav1.TypeMeta{APIVersion: "storage.k8s.io/v1", Kind: "StorageClass"},
		ObjectMeta:           metav1.ObjectMeta{Name: driverName},
		Provisioner:          driverName,
		ReclaimPolicy:        &del,
		AllowVolumeExpansion: &expand,
	}, "storageclass", driverName)
}

// dynamicClaim creates a claim of the driver's StorageClass (with the
// access modes given, ReadWriteOnce without), waits until the
// provisioner's volume is bound to it, and returns the volume handle and
// the PV's name.
func (d *csiDriver) dynamicClaim(t *testing.T, claim string, modes ...v1.PersistentVolumeAccessMode) (handle, pvName string) {
	t.Helper()
	class := csiDriverName
	createClaim(t, claim, "", &class, modes...)
	var c v1.PersistentVolumeClaim
	if err := getJSON(&c, "pvc", "-n", "default", claim); err != nil {
		t.Fatal(err)
	}
	var pv v1.PersistentVolume
	if err := getJSON(&pv, "pv", c.Spec.VolumeName); err != nil {
		t.Fatal(err)
	}
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != csiDriverName {
		t.Fatalf("claim %s bound to %s, not a volume of %s", claim, pv.Name, csiDriverName)
	}
	return pv.Spec.CSI.VolumeHandle, pv.Name
}

// calls reads the driver's record file.
func (d *csiDriver) calls(t *testing.T) []csiCall {
	t.Helper()
	f, err := os.Open(d.recordPath)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []csiCall
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var c csiCall
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("record line %q: %v", sc.Text(), err)
		}
		out = append(out, c)
	}
	return out
}

// succeeded lists the successful calls of a method, optionally for one
// volume.
func (d *csiDriver) succeeded(t *testing.T, method, volumeID string) []csiCall {
	var out []csiCall
	for _, c := range d.calls(t) {
		if c.Method == method && c.Error == "" && (volumeID == "" || c.VolumeID == volumeID) {
			out = append(out, c)
		}
	}
	return out
}

// waitCall waits for a successful call of method on the volume.
func (d *csiDriver) waitCall(t *testing.T, method, volumeID string) csiCall {
	t.Helper()
	var got csiCall
	waitFor(t, 90*time.Second, method+" of "+volumeID, func() (bool, string) {
		cs := d.succeeded(t, method, volumeID)
		if len(cs) == 0 {
			return false, fmt.Sprintf("calls: %+v", d.calls(t))
		}
		got = cs[len(cs)-1]
		return true, ""
	})
	return got
}

// provision creates a volume through the driver's controller service, as
// an external provisioner would, and a PersistentVolume and claim bound to
// each other; it returns the volume handle.
func (d *csiDriver) provision(t *testing.T, claim string) (handle, pvName string) {
	t.Helper()
	handle, pvName = d.provisionPV(t, claim)
	empty := ""
	createClaim(t, claim, pvName, &empty)
	return handle, pvName
}

// provisionPV creates a volume and its PersistentVolume, reserved for the
// claim default/claim (which may not exist yet).
func (d *csiDriver) provisionPV(t *testing.T, claim string) (handle, pvName string) {
	t.Helper()
	return d.provisionVolume(t, claim, 32<<20, v1.PersistentVolumeFilesystem)
}

// provisionVolume creates a volume of size bytes and volumeMode mode
// through the driver's controller service, as an external provisioner
// would, and its PersistentVolume, reserved for the claim default/claim.
func (d *csiDriver) provisionVolume(t *testing.T, claim string, size int64, mode v1.PersistentVolumeMode) (handle, pvName string) {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+d.socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	capability := &csipb.VolumeCapability{AccessMode: &csipb.VolumeCapability_AccessMode{Mode: csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}}
	if mode == v1.PersistentVolumeBlock {
		capability.AccessType = &csipb.VolumeCapability_Block{Block: &csipb.VolumeCapability_BlockVolume{}}
	} else {
		capability.AccessType = &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{}}
	}
	resp, err := csipb.NewControllerClient(conn).CreateVolume(ctx, &csipb.CreateVolumeRequest{
		Name:               "pvc-" + claim,
		CapacityRange:      &csipb.CapacityRange{RequiredBytes: size},
		VolumeCapabilities: []*csipb.VolumeCapability{capability},
	}, grpc.WaitForReady(true))
	if err != nil {
		t.Fatalf("CreateVolume: %v", err)
	}
	handle = resp.GetVolume().GetVolumeId()
	pvName = "pv-" + claim
	pv := &v1.PersistentVolume{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolume"},
		ObjectMeta: metav1.ObjectMeta{Name: pvName},
		Spec: v1.PersistentVolumeSpec{
			Capacity:                      v1.ResourceList{v1.ResourceStorage: *resource.NewQuantity(size, resource.BinarySI)},
			AccessModes:                   []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: v1.PersistentVolumeReclaimRetain,
			StorageClassName:              "",
			VolumeMode:                    &mode,
			ClaimRef:                      &v1.ObjectReference{Namespace: "default", Name: claim},
			PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{
				Driver: csiDriverName, VolumeHandle: handle, VolumeAttributes: resp.GetVolume().GetVolumeContext(),
			}},
		},
	}
	createObject(t, pv, "pv", pvName)
	return handle, pvName
}

// createClaim creates a claim for the volume pvName with the access
// modes given (ReadWriteOnce without) and waits until it is bound.
func createClaim(t *testing.T, claim, pvName string, class *string, modes ...v1.PersistentVolumeAccessMode) {
	t.Helper()
	if len(modes) == 0 {
		modes = []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}
	}
	createObject(t, &v1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: claim, Namespace: "default"},
		Spec: v1.PersistentVolumeClaimSpec{
			AccessModes:      modes,
			StorageClassName: class,
			VolumeName:       pvName,
			Resources:        v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("32Mi")}},
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

// claimPod is a pod that mounts claim at /data and runs script.
func claimPod(name, claim, script string, mutate func(*v1.Pod)) *v1.Pod {
	return apiPod(name, func(p *v1.Pod) {
		c := shContainer("main", script)
		c.VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
		p.Spec.Containers = []v1.Container{c}
		p.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{
			PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}
		if mutate != nil {
			mutate(p)
		}
	})
}

// csiTarget is the publish target of a pod's CSI volume, as upstream.
func csiTarget(h *heartlet, uid, name string) string {
	return filepath.Join(h.rootDir, "pods", uid, "volumes", "kubernetes.io~csi", name, "mount")
}

// csiStaging is the staging target of a volume, as upstream.
func csiStaging(h *heartlet, handle string) string {
	sum := sha256.Sum256([]byte(handle))
	return filepath.Join(h.rootDir, "plugins", "kubernetes.io", "csi", csiDriverName, hex.EncodeToString(sum[:]), "globalmount")
}

// isMounted reports whether path is a mount point on the host.
func isMounted(t *testing.T, path string) bool {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 5 && strings.ReplaceAll(f[4], "\\040", " ") == path {
			return true
		}
	}
	return false
}

// A pod writes to a dynamically provisioned CSI volume; the volume is
// staged once (upstream's global mount) and published into the pod's
// directory; once the pod is deleted it is unpublished and unstaged; a new
// pod on the same claim reads the data back.
func TestClusterCSIPersistent(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{})
	d := startCSIDriver(t, h)
	d.runController(t)
	handle, pvName := d.dynamicClaim(t, "csi-data")

	// The node annotation maps the driver to its node ID, as upstream.
	n, err := getNode()
	if err != nil {
		t.Fatal(err)
	}
	if got := n.Annotations["csi.volume.kubernetes.io/nodeid"]; !strings.Contains(got, `"`+csiDriverName+`":"`+clusterNode+`"`) {
		t.Errorf("node annotation csi.volume.kubernetes.io/nodeid = %q", got)
	}

	createPod(t, claimPod("csi-writer", "csi-data", "echo hello-csi > /data/greeting; "+sleeper, nil))
	p := waitAPIPodRunning(t, h, "csi-writer")
	target := csiTarget(h, string(p.UID), pvName)
	stage := d.waitCall(t, "NodeStageVolume", handle)
	if want := csiStaging(h, handle); stage.StagingTargetPath != want {
		t.Errorf("staging path %s, want %s", stage.StagingTargetPath, want)
	}
	pub := d.waitCall(t, "NodePublishVolume", handle)
	if pub.TargetPath != target || pub.StagingTargetPath != stage.StagingTargetPath {
		t.Errorf("published at %s from %s, want %s from the staging path", pub.TargetPath, pub.StagingTargetPath, target)
	}
	if pub.VolumeContext["csi.storage.k8s.io/pod.name"] != "csi-writer" || pub.VolumeContext["csi.storage.k8s.io/ephemeral"] != "false" {
		t.Errorf("volume context %v lacks the pod information (podInfoOnMount)", pub.VolumeContext)
	}
	waitFor(t, 30*time.Second, "the pod's file in the published volume", func() (bool, string) {
		b, err := os.ReadFile(filepath.Join(target, "greeting"))
		return err == nil && string(b) == "hello-csi\n", fmt.Sprintf("%q %v", b, err)
	})
	var vd map[string]string
	b, err := os.ReadFile(filepath.Join(filepath.Dir(target), "vol_data.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &vd); err != nil || vd["volumeHandle"] != handle || vd["driverName"] != csiDriverName || vd["specVolID"] != pvName {
		t.Errorf("vol_data.json = %s (%v)", b, err)
	}

	deletePodAndWait(t, "csi-writer")
	d.waitCall(t, "NodeUnpublishVolume", handle)
	d.waitCall(t, "NodeUnstageVolume", handle)
	if isMounted(t, target) || isMounted(t, stage.StagingTargetPath) {
		t.Errorf("still mounted after the pod went: target %v, staging %v", isMounted(t, target), isMounted(t, stage.StagingTargetPath))
	}

	out := t.TempDir()
	hostPathDir := v1.HostPathDirectory
	createPod(t, claimPod("csi-reader", "csi-data", "cat /data/greeting > /out/got; "+sleeper, func(p *v1.Pod) {
		p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, v1.VolumeMount{Name: "out", MountPath: "/out"})
		p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: "out", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: out, Type: &hostPathDir}}})
	}))
	waitAPIPodRunning(t, h, "csi-reader")
	waitFor(t, 30*time.Second, "the new pod to read the data back", func() (bool, string) {
		b, err := os.ReadFile(filepath.Join(out, "got"))
		return err == nil && string(b) == "hello-csi\n", fmt.Sprintf("%q %v", b, err)
	})
	if n := len(d.succeeded(t, "NodeStageVolume", handle)); n != 2 {
		t.Errorf("NodeStageVolume succeeded %d times for two pods one after the other, want 2", n)
	}
}

// An inline ephemeral CSI volume is published (never staged) with the
// pod's information and unpublished when the pod goes.
func TestClusterCSIInline(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{})
	d := startCSIDriver(t, h)
	createPod(t, apiPod("csi-inline", func(p *v1.Pod) {
		c := shContainer("main", "echo inline > /scratch/f; "+sleeper)
		c.VolumeMounts = []v1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
		p.Spec.Containers = []v1.Container{c}
		p.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{
			Driver: csiDriverName, VolumeAttributes: map[string]string{"size": "16Mi"}}}}}
	}))
	p := waitAPIPodRunning(t, h, "csi-inline")
	target := csiTarget(h, string(p.UID), "scratch")
	pub := d.waitCall(t, "NodePublishVolume", "")
	if pub.TargetPath != target || pub.StagingTargetPath != "" {
		t.Errorf("published at %s (staging %q), want %s and no staging", pub.TargetPath, pub.StagingTargetPath, target)
	}
	if pub.VolumeContext["csi.storage.k8s.io/ephemeral"] != "true" || pub.VolumeContext["csi.storage.k8s.io/pod.uid"] != string(p.UID) {
		t.Errorf("volume context %v", pub.VolumeContext)
	}
	waitFor(t, 30*time.Second, "the pod's file in the inline volume", func() (bool, string) {
		b, err := os.ReadFile(filepath.Join(target, "f"))
		return err == nil && string(b) == "inline\n", fmt.Sprintf("%q %v", b, err)
	})
	deletePodAndWait(t, "csi-inline")
	d.waitCall(t, "NodeUnpublishVolume", pub.VolumeID)
	if n := len(d.succeeded(t, "NodeStageVolume", "")); n != 0 {
		t.Errorf("an inline volume was staged %d times", n)
	}
}

// A claim bound to a local PersistentVolume with this node's affinity is
// mounted and given to the pod's fsGroup; one with another node's
// affinity is refused with FailedMount naming the affinity.
func TestClusterLocalPV(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{})
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "seed"), []byte("seeded\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := ""
	localPV := func(name, node string) *v1.PersistentVolume {
		return &v1.PersistentVolume{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolume"},
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1.PersistentVolumeSpec{
				Capacity:                      v1.ResourceList{v1.ResourceStorage: resource.MustParse("32Mi")},
				AccessModes:                   []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: v1.PersistentVolumeReclaimRetain,
				StorageClassName:              "",
				PersistentVolumeSource:        v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: dir}},
				NodeAffinity: &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
					MatchExpressions: []v1.NodeSelectorRequirement{{Key: v1.LabelHostname, Operator: v1.NodeSelectorOpIn, Values: []string{node}}},
				}}}},
			},
		}
	}
	createObject(t, localPV("e2e-local-here", clusterNode), "pv", "e2e-local-here")
	createClaim(t, "local-here", "e2e-local-here", &empty)
	fsGroup := int64(4321)
	createPod(t, claimPod("local-pv", "local-here", "cat /data/seed > /data/copy; "+sleeper, func(p *v1.Pod) {
		p.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: &fsGroup}
	}))
	waitAPIPodRunning(t, h, "local-pv")
	waitFor(t, 30*time.Second, "the pod's copy in the local volume", func() (bool, string) {
		b, err := os.ReadFile(filepath.Join(dir, "copy"))
		return err == nil && string(b) == "seeded\n", fmt.Sprintf("%q %v", b, err)
	})
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); int64(st.Gid) != fsGroup {
		t.Errorf("local volume group %d, want fsGroup %d", st.Gid, fsGroup)
	}
	// Its stats: statfs of the path, under the claim, as upstream.
	waitFor(t, 30*time.Second, "the local volume's stats in the summary", func() (bool, string) {
		s, err := getSummary(t, "")
		if err != nil {
			return false, err.Error()
		}
		ps := summaryPod(s, "local-pv")
		if ps == nil {
			return false, "pod not in the summary"
		}
		for _, v := range ps.VolumeStats {
			if v.Name == "data" {
				ok := v.PVCRef != nil && v.PVCRef.Name == "local-here" && v.CapacityBytes != nil && *v.CapacityBytes > 0 && v.InodesUsed != nil
				return ok, fmt.Sprintf("%+v pvcRef %+v", v.FsStats, v.PVCRef)
			}
		}
		return false, fmt.Sprintf("volumes %+v", ps.VolumeStats)
	})

	createObject(t, localPV("e2e-local-there", "another-node"), "pv", "e2e-local-there")
	createClaim(t, "local-there", "e2e-local-there", &empty)
	// Bound to this node directly, past the scheduler's volume check.
	createPod(t, claimPod("local-pv-elsewhere", "local-there", sleeper, func(p *v1.Pod) { p.Spec.NodeName = clusterNode }))
	waitFor(t, 60*time.Second, "FailedMount about the node affinity", func() (bool, string) {
		evs, err := podEvents("local-pv-elsewhere", "FailedMount")
		if err != nil {
			return false, err.Error()
		}
		for _, e := range evs {
			if strings.Contains(e.Message, "node affinity") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("events %+v", evs)
	})
	if p, err := getAPIPod("local-pv-elsewhere"); err != nil || p.Status.Phase == v1.PodRunning {
		t.Errorf("the pod with another node's volume runs (%v)", err)
	}
}

// heartlet killed with -9 while CSI volumes are mounted: after its
// restart the running pod keeps its volume (never unpublished), and the
// volume of a pod deleted meanwhile is unpublished and unstaged.
func TestClusterCSIKillRestart(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{})
	d := startCSIDriver(t, h)
	keepHandle, keepPV := d.provision(t, "csi-keep")
	goneHandle, _ := d.provision(t, "csi-gone")
	createPod(t, claimPod("csi-keep", "csi-keep", "echo kept > /data/f; "+sleeper, nil))
	createPod(t, claimPod("csi-gone", "csi-gone", sleeper, nil))
	keep := waitAPIPodRunning(t, h, "csi-keep")
	waitAPIPodRunning(t, h, "csi-gone")
	keepTarget := csiTarget(h, string(keep.UID), keepPV)
	d.waitCall(t, "NodePublishVolume", keepHandle)
	d.waitCall(t, "NodePublishVolume", goneHandle)
	keepID := statusOf(keep, "main").ContainerID

	h.kill()
	if _, err := kubectl("delete", "pod", "-n", "default", "csi-gone", "--grace-period=0", "--force", "--wait=false"); err != nil {
		t.Fatal(err)
	}
	startCluster(t, h, clusterOptions{})

	d.waitCall(t, "NodeUnpublishVolume", goneHandle)
	d.waitCall(t, "NodeUnstageVolume", goneHandle)
	if cs := d.succeeded(t, "NodeUnpublishVolume", keepHandle); len(cs) != 0 {
		t.Errorf("the running pod's volume was unpublished: %+v", cs)
	}
	if cs := d.succeeded(t, "NodeUnstageVolume", keepHandle); len(cs) != 0 {
		t.Errorf("the running pod's volume was unstaged: %+v", cs)
	}
	if !isMounted(t, keepTarget) {
		t.Errorf("the running pod's volume %s is no longer mounted", keepTarget)
	}
	if b, err := os.ReadFile(filepath.Join(keepTarget, "f")); err != nil || string(b) != "kept\n" {
		t.Errorf("the running pod's data: %q %v", b, err)
	}
	p := waitAPIPodRunning(t, h, "csi-keep")
	if cs := statusOf(p, "main"); cs.ContainerID != keepID || cs.RestartCount != 0 {
		t.Errorf("the running pod's container changed: %s (restarts %d), was %s", cs.ContainerID, cs.RestartCount, keepID)
	}
	if slices.ContainsFunc(d.calls(t), func(c csiCall) bool { return c.Method == "NodePublishVolume" && c.Error != "" }) {
		t.Errorf("failed publications: %+v", d.calls(t))
	}
}

// A generic ephemeral volume: the ephemeral-volume controller creates the
// claim <pod>-<volume> owned by the pod, it binds to a CSI volume made for
// it, and heartlet stages and publishes it, then tears it down with the
// pod.
func TestClusterCSIGenericEphemeral(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{})
	d := startCSIDriver(t, h)
	handle, pvName := d.provisionPV(t, "gen-eph-scratch")
	empty := ""
	createPod(t, apiPod("gen-eph", func(p *v1.Pod) {
		c := shContainer("main", "echo generic > /scratch/f; "+sleeper)
		c.VolumeMounts = []v1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
		p.Spec.Containers = []v1.Container{c}
		p.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{
			VolumeClaimTemplate: &v1.PersistentVolumeClaimTemplate{Spec: v1.PersistentVolumeClaimSpec{
				AccessModes:      []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
				StorageClassName: &empty,
				VolumeName:       pvName,
				Resources:        v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("32Mi")}},
			}},
		}}}}
	}))
	p := waitAPIPodRunning(t, h, "gen-eph")
	target := csiTarget(h, string(p.UID), pvName)
	d.waitCall(t, "NodeStageVolume", handle)
	if pub := d.waitCall(t, "NodePublishVolume", handle); pub.TargetPath != target {
		t.Errorf("published at %s, want %s", pub.TargetPath, target)
	}
	waitFor(t, 30*time.Second, "the pod's file in the generic ephemeral volume", func() (bool, string) {
		b, err := os.ReadFile(filepath.Join(target, "f"))
		return err == nil && string(b) == "generic\n", fmt.Sprintf("%q %v", b, err)
	})
	deletePodAndWait(t, "gen-eph")
	d.waitCall(t, "NodeUnpublishVolume", handle)
	d.waitCall(t, "NodeUnstageVolume", handle)
}

// A driver that needs attaching: the attach-detach controller (the node
// says it manages its attachments) creates the VolumeAttachment, the
// test's attacher attaches it, and heartlet stages and publishes only then,
// with the attachment's publish context (the driver refuses the volume
// without it); the node reports the volume in use.
func TestClusterCSIAttach(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{})
	n, err := getNode()
	if err != nil {
		t.Fatal(err)
	}
	if n.Annotations["volumes.kubernetes.io/controller-managed-attach-detach"] != "true" {
		t.Fatalf("node annotations %v: the attach-detach controller would not attach its volumes", n.Annotations)
	}
	d := startCSIDriverWith(t, h, true)
	d.runController(t)
	handle, pvName := d.dynamicClaim(t, "csi-attached")
	createPod(t, claimPod("csi-attached", "csi-attached", "echo attached > /data/f; "+sleeper, nil))
	p := waitAPIPodRunning(t, h, "csi-attached")
	pub := d.waitCall(t, "NodePublishVolume", handle)
	if pub.TargetPath != csiTarget(h, string(p.UID), pvName) {
		t.Errorf("published at %s", pub.TargetPath)
	}
	unique := v1.UniqueVolumeName("kubernetes.io/csi/" + csiDriverName + "^" + handle)
	waitFor(t, 60*time.Second, "the volume in the node's volumesInUse", func() (bool, string) {
		n, err := getNode()
		if err != nil {
			return false, err.Error()
		}
		return slices.Contains(n.Status.VolumesInUse, unique), fmt.Sprintf("volumesInUse %v, volumesAttached %v", n.Status.VolumesInUse, n.Status.VolumesAttached)
	})
	deletePodAndWait(t, "csi-attached")
	d.waitCall(t, "NodeUnstageVolume", handle)
	waitFor(t, 60*time.Second, "the volume out of volumesInUse", func() (bool, string) {
		n, err := getNode()
		if err != nil {
			return false, err.Error()
		}
		return !slices.Contains(n.Status.VolumesInUse, unique), fmt.Sprintf("volumesInUse %v", n.Status.VolumesInUse)
	})
}
