//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A driver whose CSIDriver sets requiresRepublish and asks for a token gets
// NodePublishVolume again while the pod runs, at the same target with a new
// token, from the pod's syncs (syncFrequency 10 s here), and never after
// the volume is unpublished.
func TestClusterCSIRepublish(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{config: "syncFrequency: 10s\n"})
	d := startCSIDriver(t, h)
	// The helpers' CSIDriver, replaced by one that asks for republishing.
	if _, err := kubectl("delete", "csidriver", csiDriverName, "--wait=true"); err != nil {
		t.Fatal(err)
	}
	no, yes := false, true
	createObject(t, &storagev1.CSIDriver{
		TypeMeta:   metav1.TypeMeta{APIVersion: "storage.k8s.io/v1", Kind: "CSIDriver"},
		ObjectMeta: metav1.ObjectMeta{Name: csiDriverName},
		Spec: storagev1.CSIDriverSpec{
			AttachRequired: &no, PodInfoOnMount: &yes, RequiresRepublish: &yes,
			TokenRequests:        []storagev1.TokenRequest{{Audience: "heartlet-e2e"}},
			VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecycleEphemeral},
		},
	}, "csidriver", csiDriverName)
	createPod(t, apiPod("csi-republish", func(p *v1.Pod) {
		c := shContainer("main", sleeper)
		c.VolumeMounts = []v1.VolumeMount{{Name: "secrets", MountPath: "/secrets"}}
		p.Spec.Containers = []v1.Container{c}
		p.Spec.Volumes = []v1.Volume{{Name: "secrets", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: csiDriverName}}}}
	}))
	p := waitAPIPodRunning(t, h, "csi-republish")
	target := csiTarget(h, string(p.UID), "secrets")
	token := func(c csiCall) string {
		var tokens map[string]struct {
			Token string `json:"token"`
		}
		if err := json.Unmarshal([]byte(c.VolumeContext["csi.storage.k8s.io/serviceAccount.tokens"]), &tokens); err != nil {
			t.Fatalf("tokens in the volume context %v: %v", c.VolumeContext, err)
		}
		return tokens["heartlet-e2e"].Token
	}
	var pubs []csiCall
	waitFor(t, 90*time.Second, "NodePublishVolume again with a new token", func() (bool, string) {
		pubs = d.succeeded(t, "NodePublishVolume", "")
		return len(pubs) >= 2, fmt.Sprintf("%d publishes: %+v", len(pubs), d.calls(t))
	})
	for i, c := range pubs[:2] {
		if c.TargetPath != target || token(c) == "" {
			t.Errorf("publish %d at %s with token %q, want %s with a token", i, c.TargetPath, token(c), target)
		}
	}
	if token(pubs[0]) == token(pubs[1]) {
		t.Error("the republication has the first publication's token")
	}
	if pubs[0].VolumeID != pubs[1].VolumeID || pubs[1].VolumeContext["csi.storage.k8s.io/pod.uid"] != string(p.UID) {
		t.Errorf("republished %s with context %v, want %s with the pod's information", pubs[1].VolumeID, pubs[1].VolumeContext, pubs[0].VolumeID)
	}

	deletePodAndWait(t, "csi-republish")
	d.waitCall(t, "NodeUnpublishVolume", pubs[0].VolumeID)
	n := len(d.succeeded(t, "NodePublishVolume", ""))
	time.Sleep(15 * time.Second) // more than a sync and the interval
	if after := len(d.succeeded(t, "NodePublishVolume", "")); after != n {
		t.Errorf("%d publishes after the pod went, want none", after-n)
	}
}
