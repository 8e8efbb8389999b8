package volume

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// After a restart, Adopt makes a running pod's volumes refreshed again
// without writing anything itself; a pod without a directory is not
// adopted, so no refresh creates its volumes.
func TestAdopt(t *testing.T) {
	ctx := t.Context()
	e := newEnv(t, true)
	cm := func(val string) *v1.ConfigMap {
		return &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "cfg"}, Data: map[string]string{"k": val}}
	}
	e.getter.setConfigMap(cm("v1"))
	vol := v1.Volume{Name: "c", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}}
	pod, absent := newPod("u1", vol), newPod("u2", vol)
	if err := e.m.Prepare(ctx, pod); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(e.root, "pods/u1/volumes/kubernetes.io~configmap/c")
	before := dataDirs(t, dir)

	// A new manager over the same root: heartlet restarted.
	restarted := New(e.m.opts)
	e.getter.setConfigMap(cm("v2"))
	for range 2 {
		if err := restarted.Adopt(ctx, pod); err != nil {
			t.Fatal(err)
		}
		if err := restarted.Adopt(ctx, absent); err != nil {
			t.Fatal(err)
		}
	}
	if got := dataDirs(t, dir); len(got) != 1 || got[0] != before[0] {
		t.Fatalf("Adopt rewrote the volume: data dirs %v, were %v", got, before)
	}
	if got := readVolume(t, dir)["k"]; got != "v1" {
		t.Fatalf("after Adopt k = %q, want the old v1", got)
	}
	restarted.Refresh(ctx)
	if got := readVolume(t, dir)["k"]; got != "v2" {
		t.Errorf("after a refresh of the adopted pod k = %q, want v2", got)
	}
	if _, err := os.Stat(filepath.Join(e.root, "pods/u2")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a pod without a directory got one: %v", err)
	}
	if err := restarted.Adopt(ctx, nil); err == nil {
		t.Error("Adopt of a nil pod succeeded")
	}
}
