//go:build e2e

package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const csiMockName = "csi-mock.heartlet.test"

// mockCall is one line of csimock's call log: upstream's mock driver
// service's gRPC call record.
type mockCall struct {
	Method  string
	Request map[string]any
	Error   string
}

// TestClusterCSIMock runs upstream's CSI mock driver service, the one the
// Kubernetes e2e tests check the kubelet with (hack/tools/kube/csimock),
// registered through the plugin registration API, and a claim of it
// provisioned by the test controller: heartlet's node calls for a pod's
// whole life are the sequence upstream's csi-mock tests expect of a
// kubelet (NodeStageVolume, NodePublishVolume, then NodeUnpublishVolume,
// NodeUnstageVolume, each once and successful), on upstream's paths, and
// with podInfoOnMount the publication carries the pod's name, namespace,
// UID, service account and ephemeral=false, as upstream's "should be
// passed when podInfoOnMount=true" expects.
func TestClusterCSIMock(t *testing.T) {
	mockBin, registrarBin := os.Getenv("HEARTLET_CSIMOCK_BIN"), os.Getenv("HEARTLET_CSI_REGISTRAR_BIN")
	if mockBin == "" || registrarBin == "" {
		t.Skip("HEARTLET_CSIMOCK_BIN or HEARTLET_CSI_REGISTRAR_BIN is not set (hack/test.sh sets them)")
	}
	h := startClusterHeartlet(t, clusterOptions{})
	sockDir, err := os.MkdirTemp("", "csimock")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(sockDir) })
	logDir := t.TempDir()
	socket, callLog := filepath.Join(sockDir, "csi.sock"), filepath.Join(logDir, "calls.jsonl")
	startLogged(t, logDir, "csimock", mockBin, "--endpoint", socket, "--calls", callLog, "--name", csiMockName, "--disable-attach")
	startLogged(t, logDir, "csi-registrar", registrarBin, "--csi-address", socket, "--driver-name", csiMockName,
		"--plugin-registration-path", filepath.Join(h.rootDir, "plugins_registry"))
	no, yes := false, true
	createObject(t, &storagev1.CSIDriver{
		TypeMeta:   metav1.TypeMeta{APIVersion: "storage.k8s.io/v1", Kind: "CSIDriver"},
		ObjectMeta: metav1.ObjectMeta{Name: csiMockName},
		Spec:       storagev1.CSIDriverSpec{AttachRequired: &no, PodInfoOnMount: &yes},
	}, "csidriver", csiMockName)
	waitFor(t, 60*time.Second, "the mock driver in the node's CSINode", func() (bool, string) {
		var cn storagev1.CSINode
		if err := getJSON(&cn, "csinode", clusterNode); err != nil {
			return false, err.Error()
		}
		for _, drv := range cn.Spec.Drivers {
			if drv.Name == csiMockName {
				// The mock reports its driver name as its node ID.
				return drv.NodeID == csiMockName, fmt.Sprintf("driver entry %+v", drv)
			}
		}
		return false, fmt.Sprintf("drivers %+v", cn.Spec.Drivers)
	})
	runCSIController(t, socket, csiMockName)
	class := csiMockName
	createClaim(t, "mock-claim", "", &class)
	var claim v1.PersistentVolumeClaim
	if err := getJSON(&claim, "pvc", "-n", "default", "mock-claim"); err != nil {
		t.Fatal(err)
	}
	pvName := claim.Spec.VolumeName

	createPod(t, claimPod("csi-mock-user", "mock-claim", sleeper, nil))
	p := waitAPIPodRunning(t, h, "csi-mock-user")
	deletePodAndWait(t, "csi-mock-user")

	tracked := []string{"NodeStageVolume", "NodePublishVolume", "NodeUnpublishVolume", "NodeUnstageVolume"}
	var calls []mockCall
	waitFor(t, 60*time.Second, "NodeUnstageVolume in the mock's call log", func() (bool, string) {
		calls = readMockCalls(t, callLog, tracked)
		var got []string
		for _, c := range calls {
			got = append(got, c.Method)
		}
		return slices.Contains(got, "NodeUnstageVolume"), strings.Join(got, ", ")
	})
	var got []string
	for _, c := range calls {
		entry := c.Method
		if c.Error != "" {
			entry += " (" + c.Error + ")"
		}
		got = append(got, entry)
	}
	if !slices.Equal(got, tracked) {
		t.Fatalf("node calls %v, want %v as upstream's kubelet makes them", got, tracked)
	}

	staging := fmt.Sprint(calls[0].Request["staging_target_path"])
	if !strings.HasPrefix(staging, filepath.Join(h.rootDir, "plugins", "kubernetes.io", "csi", csiMockName)+"/") || !strings.HasSuffix(staging, "/globalmount") {
		t.Errorf("staging path %s, want <root>/plugins/kubernetes.io/csi/%s/<sha>/globalmount", staging, csiMockName)
	}
	pub := calls[1].Request
	if want := csiTarget(h, string(p.UID), pvName); fmt.Sprint(pub["target_path"]) != want {
		t.Errorf("target path %v, want %s", pub["target_path"], want)
	}
	if fmt.Sprint(pub["staging_target_path"]) != staging {
		t.Errorf("publish staging path %v, want %s", pub["staging_target_path"], staging)
	}
	volCtx, _ := pub["volume_context"].(map[string]any)
	for k, want := range map[string]string{
		"csi.storage.k8s.io/pod.name":            "csi-mock-user",
		"csi.storage.k8s.io/pod.namespace":       "default",
		"csi.storage.k8s.io/pod.uid":             string(p.UID),
		"csi.storage.k8s.io/serviceAccount.name": "default",
		"csi.storage.k8s.io/ephemeral":           "false",
	} {
		if got := fmt.Sprint(volCtx[k]); got != want {
			t.Errorf("volume context %s = %q, want %q", k, got, want)
		}
	}
	if unpub := calls[2].Request; fmt.Sprint(unpub["target_path"]) != fmt.Sprint(pub["target_path"]) {
		t.Errorf("unpublished %v, published %v", unpub["target_path"], pub["target_path"])
	}
	if fmt.Sprint(calls[3].Request["staging_target_path"]) != staging {
		t.Errorf("unstaged %v, staged %s", calls[3].Request["staging_target_path"], staging)
	}
}

// readMockCalls reads the mock's call log, keeping the calls of the node
// methods named (by their short name).
func readMockCalls(t *testing.T, path string, methods []string) []mockCall {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []mockCall
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var c mockCall
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("call log line %q: %v", sc.Text(), err)
		}
		c.Method = c.Method[strings.LastIndex(c.Method, "/")+1:]
		if slices.Contains(methods, c.Method) {
			out = append(out, c)
		}
	}
	return out
}
