//go:build integration

package volume

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"
)

// TestIntegrationSecretOnTmpfs sets up a secret volume with the system
// mounter, so its files live on a real tmpfs, then cleans it up.
func TestIntegrationSecretOnTmpfs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: mounting tmpfs needs root")
	}
	root := t.TempDir()
	clk := testingclock.NewFakeClock(epoch)
	g := newFakeGetter(clk)
	g.setSecret(&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "creds"}, Data: map[string][]byte{"password": []byte("s3cret")}})
	m := New(Options{RootDir: root, Getter: g, Clock: clk})
	pod := newPod("it-1",
		v1.Volume{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "creds", DefaultMode: ptr(int32(0o400))}}},
		v1.Volume{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}},
	)
	ctx := context.Background()
	secretDir := filepath.Join(root, "pods/it-1/volumes/kubernetes.io~secret/s")
	memDir := filepath.Join(root, "pods/it-1/volumes/kubernetes.io~empty-dir/mem")
	t.Cleanup(func() {
		// Last resort so that the temporary directory can be removed.
		_ = unix.Unmount(secretDir, unix.MNT_DETACH)
		_ = unix.Unmount(memDir, unix.MNT_DETACH)
	})

	if err := m.Prepare(ctx, pod); err != nil {
		t.Skipf("skipping: cannot mount tmpfs here: %v", err)
	}
	for _, dir := range []string{secretDir, memDir} {
		var st unix.Statfs_t
		if err := unix.Statfs(dir, &st); err != nil {
			t.Fatal(err)
		}
		if st.Type != unix.TMPFS_MAGIC {
			t.Errorf("%s is not on tmpfs (type %#x)", dir, st.Type)
		}
	}
	mustEqualMap(t, readVolume(t, secretDir), map[string]string{"password": "s3cret"})
	if m := fileMode(t, filepath.Join(secretDir, "password")); m != 0o400 {
		t.Errorf("mode = %o, want 400", m)
	}
	// Idempotent on a real mount table: still one mount each.
	if err := m.Prepare(ctx, pod); err != nil {
		t.Fatal(err)
	}
	mps, err := NewSystemMounter().List()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mp := range mps {
		if mp.Path == secretDir || mp.Path == memDir {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d mounts on the two volume dirs after a second Prepare, want 2", n)
	}

	if err := m.Cleanup(ctx, pod.UID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "pods/it-1")); !os.IsNotExist(err) {
		t.Errorf("pod directory still there: %v", err)
	}
	mps, _ = NewSystemMounter().List()
	for _, mp := range mps {
		if mp.Path == secretDir || mp.Path == memDir {
			t.Errorf("%s still mounted", mp.Path)
		}
	}
	if err := m.Cleanup(ctx, pod.UID); err != nil {
		t.Errorf("second Cleanup = %v", err)
	}
}
