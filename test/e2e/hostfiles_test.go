//go:build e2e

package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Files of the node must not reach a pod or another local user through
// heartlet: the tests here attack the ways heartlet reads or writes files
// for pods.

// secretMarker returns a random marker and writes it to a root-only (0600)
// file of the node at path.
func secretMarker(t *testing.T, path string) string {
	t.Helper()
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	marker := "NODE-SECRET-" + hex.EncodeToString(b[:])
	if err := os.WriteFile(path, []byte(marker+"\n"), 0o600); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	return marker
}

// containerMessages returns every message in the pod's container statuses.
func containerMessages(p *v1.Pod) []string {
	var out []string
	add := func(s v1.ContainerState) {
		if s.Terminated != nil {
			out = append(out, s.Terminated.Message)
		}
		if s.Waiting != nil {
			out = append(out, s.Waiting.Message)
		}
	}
	for _, list := range [][]v1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, cs := range list {
			add(cs.State)
			add(cs.LastTerminationState)
		}
	}
	out = append(out, p.Status.Message)
	return out
}

// A container mounts a file of an emptyDir (subPath) at its
// terminationMessagePath; a second container keeps replacing that file in
// the emptyDir with a symbolic link to a root-only file of the node; the
// first writes its message and fails. The node's file must never appear in
// a status message: heartlet reads only the file it created for the
// attempt.
func TestSecurityTerminationMessageHostFile(t *testing.T) {
	h := startHeartlet(t)
	secretPath := filepath.Join(h.dir, "node-secret")
	marker := secretMarker(t, secretPath)

	const name = "term-symlink"
	h.addPod(t, name+".yaml", name, manifest(t, name, func(p *v1.Pod) {
		p.Spec.RestartPolicy = v1.RestartPolicyAlways
		p.Spec.Volumes = []v1.Volume{{Name: "shared", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
		shared := []v1.VolumeMount{{Name: "shared", MountPath: "/shared"}}
		prep := shContainer("prep", "echo -n placeholder > /shared/msg")
		prep.VolumeMounts = shared
		victim := shContainer("victim", "sleep 3; echo -n victim-own-message > /dev/termination-log; exit 3")
		victim.VolumeMounts = []v1.VolumeMount{{Name: "shared", MountPath: v1.TerminationMessagePathDefault, SubPath: "msg"}}
		swapper := shContainer("swapper", fmt.Sprintf(
			"while true; do ln -sfn %s /shared/msg.new && mv -f /shared/msg.new /shared/msg; sleep 0.1; done", secretPath))
		swapper.VolumeMounts = shared
		p.Spec.InitContainers = []v1.Container{prep}
		p.Spec.Containers = []v1.Container{victim, swapper}
	}))

	leaked := func(p *v1.Pod) (string, bool) {
		for _, m := range containerMessages(p) {
			if strings.Contains(m, marker) || strings.Contains(m, marker[:16]) {
				return m, true
			}
		}
		return "", false
	}
	var own bool
	var terminated time.Time
	deadline := time.Now().Add(podStartTimeout)
	for time.Now().Before(deadline) {
		p, err := h.pod(name)
		if err == nil && p != nil {
			if m, bad := leaked(p); bad {
				t.Fatalf("the node's root-only file reached the pod status: %q (%s)", m, describeStatus(p))
			}
			if cs := statusOf(p, "victim"); cs != nil {
				for _, st := range []v1.ContainerState{cs.State, cs.LastTerminationState} {
					if st.Terminated == nil || st.Terminated.ExitCode != 3 {
						continue
					}
					if terminated.IsZero() {
						terminated = time.Now()
						t.Logf("victim terminated: %+v", *st.Terminated)
					}
					own = own || st.Terminated.Message == "victim-own-message"
				}
			}
			// Keep watching for a while after the first exit: later
			// status writes and restarts must not leak either.
			if !terminated.IsZero() && time.Since(terminated) > 20*time.Second {
				break
			}
		}
		time.Sleep(pollInterval)
	}
	if terminated.IsZero() {
		t.Fatalf("the victim container never terminated with exit code 3: %s", h.describePod(name))
	}
	// Which of the two mounts at terminationMessagePath lies on top in
	// the container is the runtime's choice (containerd 1.6 orders mounts
	// with sort.Sort by depth, which promises no order for equal depths):
	// when the volume's file is on top, the container's message goes
	// there, and heartlet, which never reads a volume, reports none (seen
	// in three runs in a row on one day, after passing before). Logged,
	// not asserted; the leak is.
	t.Logf("the victim's own termination message reported: %v", own)
}

// describePod describes the status of static pod name, or why it cannot.
func (h *heartlet) describePod(name string) string {
	p, err := h.pod(name)
	switch {
	case err != nil:
		return err.Error()
	case p == nil:
		return "not in /pods"
	}
	return describeStatus(p)
}

// withUmask runs f with the process umask set to mask: heartlet started in
// f inherits it.
func withUmask(mask int, f func()) {
	old := syscall.Umask(mask)
	defer syscall.Umask(old)
	f()
}

// nobodyCanRead opens the path to the test's directory for other users (the
// temporary directories of the test are 0700 and would hide everything)
// and returns the regular files below root that user nobody (65534, no
// groups) can read. It first proves it can see a readable file.
func nobodyCanRead(t *testing.T, h *heartlet, root string) []string {
	t.Helper()
	for _, d := range []string{filepath.Dir(h.dir), h.dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	control := filepath.Join(h.dir, "readable-control")
	if err := os.WriteFile(control, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := readableAsNobody(t, []string{control}); len(got) != 1 {
		t.Fatalf("user nobody cannot read the control file %s: the check would prove nothing", control)
	}
	var files []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			files = append(files, p)
		}
		return nil
	})
	if len(files) == 0 {
		t.Fatalf("no file found below %s", root)
	}
	t.Logf("%d files below %s", len(files), root)
	return readableAsNobody(t, files)
}

// readableAsNobody returns those of files that user nobody can open and
// read a byte of.
func readableAsNobody(t *testing.T, files []string) []string {
	t.Helper()
	var out []string
	for len(files) > 0 {
		n := min(len(files), 200)
		args := append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c",
			`for f; do if head -c 1 "$f" >/dev/null 2>&1; then echo "$f"; fi; done`, "sh"}, files[:n]...)
		b, err := exec.Command("setpriv", args...).Output()
		if err != nil {
			t.Fatalf("setpriv as nobody: %v", err)
		}
		out = append(out, strings.Fields(string(b))...)
		files = files[n:]
	}
	return out
}

// checkMode fails the test when path's permission bits are not want.
func checkMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Errorf("%s: %v", path, err)
		return
	}
	if got := fi.Mode().Perm(); got != want {
		t.Errorf("%s: mode %#o, want %#o", path, got, want)
	}
}

// heartlet runs with umask 0 and a root directory someone made 0755: its
// root, pods and pod directories are 0750, its serving key 0600, and user
// nobody can read none of its files, while a non-root container still
// reads its downward API volume and writes its emptyDir.
func TestSecurityDataDirModes(t *testing.T) {
	var h *heartlet
	// The harness makes the root directory 0755 (newHeartlet) before
	// heartlet starts; heartlet narrows it as it starts, so it is not
	// checked here.
	withUmask(0, func() { h = startHeartlet(t) })

	const name = "dir-modes"
	h.addPod(t, name+".yaml", name, manifest(t, name, func(p *v1.Pod) {
		c := shContainer("app", "cat /info/name > /scratch/seen && echo -n container-wrote > /scratch/f && exec sleep 3600")
		c.SecurityContext = &v1.SecurityContext{RunAsUser: ptrTo(int64(1000)), RunAsGroup: ptrTo(int64(1000))}
		c.VolumeMounts = []v1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}, {Name: "info", MountPath: "/info"}}
		p.Spec.Containers = []v1.Container{c}
		p.Spec.Volumes = []v1.Volume{
			{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
			{Name: "info", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
				{Path: "name", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}},
			}}}},
		}
	}))
	pod := h.waitRunning(t, name)
	podDir := filepath.Join(h.rootDir, "pods", string(pod.UID))
	scratch := filepath.Join(podDir, "volumes", "kubernetes.io~empty-dir", "scratch")
	waitFor(t, 30*time.Second, "the container to write its emptyDir", func() (bool, string) {
		b, err := os.ReadFile(filepath.Join(scratch, "f"))
		return err == nil && string(b) == "container-wrote", fmt.Sprintf("%q %v", b, err)
	})
	if b, err := os.ReadFile(filepath.Join(scratch, "seen")); err != nil || strings.TrimSpace(string(b)) != staticPodName(name) {
		t.Errorf("the container read %q (%v) from its downward API volume, want %q", b, err, staticPodName(name))
	}

	checkMode(t, h.rootDir, 0o750)
	checkMode(t, filepath.Join(h.rootDir, "pods"), 0o750)
	checkMode(t, podDir, 0o750)
	checkMode(t, filepath.Join(podDir, "volumes"), 0o750)
	checkMode(t, filepath.Join(podDir, "containers"), 0o750)
	checkMode(t, filepath.Join(h.rootDir, "pki", "kubelet.key"), 0o600)
	if fi, err := os.Stat(filepath.Join(h.rootDir, "pki")); err != nil || fi.Mode().Perm()&0o022 != 0 {
		t.Errorf("cert dir: mode %v (%v), want no write for group or others", fi.Mode().Perm(), err)
	}
	if got := nobodyCanRead(t, h, h.rootDir); len(got) > 0 {
		t.Errorf("user nobody can read heartlet's files: %s", strings.Join(got, ", "))
	}
}

// In cluster mode the Secret and the projected service-account token of a
// pod are on the node below the root directory; user nobody can read none
// of them (nor any other file there), heartlet running with umask 0.
func TestClusterSecurityVolumeFilesClosed(t *testing.T) {
	var h *heartlet
	withUmask(0, func() { h = startClusterHeartlet(t, clusterOptions{}) })
	var b [8]byte
	_, _ = rand.Read(b[:])
	marker := "SECRET-" + hex.EncodeToString(b[:])
	secret := &v1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-closed-secret", Namespace: "default"},
		StringData: map[string]string{"password": marker},
	}
	createObject(t, secret, "secret", secret.Name)
	const name = "api-closed-volumes"
	createPod(t, apiPod(name, func(p *v1.Pod) {
		c := shContainer("main", "cat /etc/secret/password > /dev/termination-log; test -s /var/run/secrets/kubernetes.io/serviceaccount/token && exec sleep 3600")
		c.SecurityContext = &v1.SecurityContext{RunAsUser: ptrTo(int64(1000))}
		c.VolumeMounts = []v1.VolumeMount{{Name: "secret", MountPath: "/etc/secret"}}
		p.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: ptrTo(int64(1000))}
		p.Spec.Containers = []v1.Container{c}
		p.Spec.Volumes = []v1.Volume{{Name: "secret", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: secret.Name}}}}
	}))
	pod := waitAPIPodRunning(t, h, name)
	podDir := filepath.Join(h.rootDir, "pods", string(pod.UID))

	// The files are there (read as root): the check below is not vacuous.
	var secretFile, tokenFile string
	_ = filepath.WalkDir(podDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		switch {
		case strings.Contains(p, "kubernetes.io~secret") && filepath.Base(p) == "password":
			secretFile = p
		case strings.Contains(p, "kubernetes.io~projected") && filepath.Base(p) == "token":
			tokenFile = p
		}
		return nil
	})
	if data, err := os.ReadFile(secretFile); err != nil || string(data) != marker {
		t.Fatalf("secret file %q: %q %v", secretFile, data, err)
	}
	if data, err := os.ReadFile(tokenFile); err != nil || len(data) == 0 {
		t.Fatalf("token file %q: %v", tokenFile, err)
	}
	checkMode(t, h.rootDir, 0o750)
	checkMode(t, filepath.Join(h.rootDir, "pods"), 0o750)
	checkMode(t, podDir, 0o750)
	if got := nobodyCanRead(t, h, h.rootDir); len(got) > 0 {
		t.Errorf("user nobody can read heartlet's files: %s", strings.Join(got, ", "))
	}
}
