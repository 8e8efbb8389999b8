package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// floorCgroup is the cgroup (in every hierarchy, cgroupfs layout) under
// which the floor-setup agent's pods get their pod cgroups.
const floorCgroup = "heartlet-bench-floor"

// podSetup is what the floor-setup agent adds to the floor's pods: what
// any agent serving the benchmark's pod sets up for it, as the kubelet and
// heartlet do, with no agent: a pod cgroup as the sandbox's cgroup parent,
// a memory-backed (tmpfs) service account token directory with a token,
// the CA and the namespace, a managed hosts file, the container's
// termination log file, the three mounted into the container, and the
// KUBERNETES_* service variables. The set-up and the clean-up are the
// benchmark's own CPU, counted in the machine's.
type podSetup struct {
	root string
}

func newPodSetup() (*podSetup, error) {
	root, err := os.MkdirTemp("", "heartlet-bench-floor-setup-")
	if err != nil {
		return nil, err
	}
	return &podSetup{root: root}, nil
}

// podFiles are one pod's files.
type podFiles struct {
	dir, hosts, termination, token string
}

// prepare makes the pod's files and mounts its token tmpfs.
func (s *podSetup) prepare(uid, namespace, name string) (*podFiles, error) {
	f := &podFiles{dir: filepath.Join(s.root, uid)}
	f.hosts = filepath.Join(f.dir, "etc-hosts")
	f.termination = filepath.Join(f.dir, "termination-log")
	f.token = filepath.Join(f.dir, "kube-api-access")
	if err := os.MkdirAll(f.token, 0o750); err != nil {
		return nil, err
	}
	if err := syscall.Mount("tmpfs", f.token, "tmpfs", 0, "size=16m"); err != nil {
		return nil, fmt.Errorf("mount the token tmpfs of pod %s: %w", name, err)
	}
	files := map[string]string{
		f.hosts: "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n" +
			"fe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n10.88.0.2\t" + name + "\n",
		f.termination:                       "",
		filepath.Join(f.token, "token"):     strings.Repeat("t", 1000),
		filepath.Join(f.token, "ca.crt"):    strings.Repeat("c", 1100),
		filepath.Join(f.token, "namespace"): namespace,
	}
	for path, content := range files {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// sandbox puts the sandbox in its pod cgroup.
func (s *podSetup) sandbox(cfg *runtimeapi.PodSandboxConfig, uid string) {
	cfg.Linux.CgroupParent = "/" + floorCgroup + "/pod" + uid
}

// container mounts the pod's files and sets the service variables.
func (s *podSetup) container(cfg *runtimeapi.ContainerConfig, f *podFiles) {
	cfg.Mounts = append(cfg.Mounts,
		&runtimeapi.Mount{ContainerPath: "/var/run/secrets/kubernetes.io/serviceaccount", HostPath: f.token, Readonly: true},
		&runtimeapi.Mount{ContainerPath: "/etc/hosts", HostPath: f.hosts},
		&runtimeapi.Mount{ContainerPath: "/dev/termination-log", HostPath: f.termination},
	)
	for _, kv := range [][2]string{
		{"KUBERNETES_SERVICE_HOST", "10.96.0.1"}, {"KUBERNETES_SERVICE_PORT", "443"}, {"KUBERNETES_SERVICE_PORT_HTTPS", "443"},
		{"KUBERNETES_PORT", "tcp://10.96.0.1:443"}, {"KUBERNETES_PORT_443_TCP", "tcp://10.96.0.1:443"},
		{"KUBERNETES_PORT_443_TCP_PROTO", "tcp"}, {"KUBERNETES_PORT_443_TCP_PORT", "443"}, {"KUBERNETES_PORT_443_TCP_ADDR", "10.96.0.1"},
	} {
		cfg.Envs = append(cfg.Envs, &runtimeapi.KeyValue{Key: kv[0], Value: []byte(kv[1])})
	}
}

// teardown unmounts and removes the pod's files and its pod cgroup, once
// its sandbox is removed.
func (s *podSetup) teardown(uid string) error {
	dir := filepath.Join(s.root, uid)
	var errs []error
	if err := syscall.Unmount(filepath.Join(dir, "kube-api-access"), 0); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
		errs = append(errs, fmt.Errorf("unmount the token tmpfs of pod %s: %w", uid, err))
	}
	if err := os.RemoveAll(dir); err != nil {
		errs = append(errs, err)
	}
	removeCgroup(filepath.Join(floorCgroup, "pod"+uid))
	return errors.Join(errs...)
}

// close removes what is left: every pod's files, the parent cgroup.
func (s *podSetup) close() {
	entries, _ := os.ReadDir(s.root)
	for _, e := range entries {
		_ = s.teardown(e.Name())
	}
	_ = os.RemoveAll(s.root)
	removeCgroup(floorCgroup)
}

// removeCgroup removes the cgroup rel in every hierarchy under
// /sys/fs/cgroup that has it.
func removeCgroup(rel string) {
	hierarchies, _ := os.ReadDir("/sys/fs/cgroup")
	for _, h := range hierarchies {
		_ = os.Remove(filepath.Join("/sys/fs/cgroup", h.Name(), rel))
	}
}
