package kubeletsetup

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/heartlet/heartlet/internal/config"
	"github.com/heartlet/heartlet/internal/doctor"
	"github.com/heartlet/heartlet/internal/runtime"
)

// fakeRuntime answers the CRI calls the report makes.
type fakeRuntime struct {
	driver runtimeapi.CgroupDriver
	pods   []*runtime.PodStatus
}

func (f *fakeRuntime) Version(context.Context) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{RuntimeName: "containerd", RuntimeVersion: "2.1.0", RuntimeApiVersion: "v1"}, nil
}

func (f *fakeRuntime) StatusInfo(context.Context) (*runtimeapi.StatusResponse, error) {
	return &runtimeapi.StatusResponse{}, nil
}

func (f *fakeRuntime) RuntimeConfig(context.Context) (*runtimeapi.RuntimeConfigResponse, error) {
	return &runtimeapi.RuntimeConfigResponse{Linux: &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: f.driver}}, nil
}

func (f *fakeRuntime) ImageFsInfo(context.Context) ([]runtime.FsUsage, error) { return nil, nil }

func (f *fakeRuntime) ListPods(context.Context) ([]*runtime.PodStatus, error) { return f.pods, nil }

const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
staticPodPath: /etc/kubernetes/manifests
`

const staticPod = `apiVersion: v1
kind: Pod
metadata: {name: etcd, namespace: kube-system}
spec:
  containers:
  - name: etcd
    image: registry.k8s.io/etcd:3.6
`

const credentialProviders = `apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
- name: ecr-credential-provider
  matchImages: ["*.dkr.ecr.*.amazonaws.com"]
  defaultCacheDuration: 12h
  apiVersion: credentialprovider.kubelet.k8s.io/v1
- name: gcr-credential-provider
  matchImages: ["gcr.io"]
  defaultCacheDuration: 12h
  apiVersion: credentialprovider.kubelet.k8s.io/v1
`

// findings are the lines of a report as "check level text" for matching.
func findings(lines []doctor.Line) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = l.Check + " " + string(l.Level) + " " + l.Found
	}
	return out
}

func has(lines []doctor.Line, check string, level doctor.Level, text string) bool {
	for _, l := range lines {
		if l.Check == check && l.Level == level && strings.Contains(l.Found, text) {
			return true
		}
	}
	return false
}

func TestReport(t *testing.T) {
	apiPod := func(name string, mutate func(*v1.Pod)) v1.Pod {
		p := v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
			Spec: v1.PodSpec{NodeName: "node1", Containers: []v1.Container{{Name: "c", Image: "busybox"}}}}
		if mutate != nil {
			mutate(&p)
		}
		return p
	}
	type want struct {
		check string
		level doctor.Level
		text  string
	}
	for _, tc := range []struct {
		name     string
		files    map[string]string
		args     []string
		rt       *fakeRuntime
		pods     []v1.Pod
		podsErr  error
		want     []want
		notWant  []want
		failed   bool
		setupDir func(t *testing.T, root string)
	}{{
		name:  "a node heartlet runs as the kubelet does",
		files: map[string]string{"/var/lib/kubelet/config.yaml": kubeletConfig, "/etc/kubernetes/manifests/etcd.yaml": staticPod},
		args:  []string{"--config=/var/lib/kubelet/config.yaml", "--hostname-override=node1"},
		rt:    &fakeRuntime{driver: runtimeapi.CgroupDriver_CGROUPFS},
		want: []want{
			{"flags", doctor.OK, "accepts every flag"},
			{"config", doctor.OK, "acts on every field"},
			{"feature-gates", doctor.OK, "no feature gate"},
			{"cgroup-driver", doctor.OK, "cgroupfs for both"},
			{"pods", doctor.OK, "1 pods checked (1 static, 0 from the API server, 0 running in the runtime)"},
			{"state", doctor.OK, "no CPU manager"},
			{"credential-providers", doctor.OK, "no image credential providers"},
		},
	}, {
		name: "fields, gates and flags heartlet does not act on are warnings",
		files: map[string]string{"/var/lib/kubelet/config.yaml": kubeletConfig + "cpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\nfeatureGates:\n  APIServingWithRoutine: true\n  APIResponseCompression: true\n",
			"/etc/kubernetes/manifests/etcd.yaml": staticPod},
		args: []string{"--config=/var/lib/kubelet/config.yaml", "--hostname-override=node1", "--container-runtime-endpoint=unix:///run/containerd/containerd.sock"},
		rt:   &fakeRuntime{driver: runtimeapi.CgroupDriver_CGROUPFS},
		want: []want{
			{"flags", doctor.Warning, "--container-runtime-endpoint is deprecated"},
			{"config", doctor.Warning, "cpuManagerPolicy = static (from the configuration file): heartlet does not act on it: no CPU manager"},
			{"feature-gates", doctor.Warning, "APIServingWithRoutine=true is set, the upstream default is false"},
		},
		notWant: []want{{"feature-gates", doctor.Warning, "APIResponseCompression"}},
	}, {
		name:    "a command line heartlet refuses",
		files:   map[string]string{"/var/lib/kubelet/config.yaml": kubeletConfig + "bogusField: 1\n"},
		args:    []string{"--config=/var/lib/kubelet/config.yaml"},
		want:    []want{{"flags", doctor.Error, "bogusField"}},
		notWant: []want{{"pods", doctor.OK, ""}},
		failed:  true,
	}, {
		name:   "cgroup driver differs from the runtime's",
		files:  map[string]string{"/var/lib/kubelet/config.yaml": kubeletConfig, "/etc/kubernetes/manifests/etcd.yaml": staticPod},
		args:   []string{"--config=/var/lib/kubelet/config.yaml", "--hostname-override=node1"},
		rt:     &fakeRuntime{driver: runtimeapi.CgroupDriver_SYSTEMD},
		want:   []want{{"cgroup-driver", doctor.Error, "the runtime uses the systemd cgroup driver"}},
		failed: true,
	}, {
		name: "pods with refused and not honoured fields, running pods not found",
		files: map[string]string{"/var/lib/kubelet/config.yaml": kubeletConfig,
			"/etc/kubernetes/manifests/etcd.yaml": strings.Replace(staticPod, "spec:\n", "spec:\n  hostUsers: false\n", 1),
			"/etc/kubernetes/manifests/bad.yaml":  "apiVersion: v1\nkind: Pod\nmetadata: {name: bad}\nspec: {containers: [{name: c}]}\n",
			"/etc/kubernetes/kubelet.conf":        "unused"},
		args: []string{"--config=/var/lib/kubelet/config.yaml", "--hostname-override=node1", "--kubeconfig=/etc/kubernetes/kubelet.conf"},
		rt: &fakeRuntime{driver: runtimeapi.CgroupDriver_CGROUPFS, pods: []*runtime.PodStatus{
			{UID: "uid-claims", Name: "claims", Namespace: "default"},
			{UID: "uid-ghost", Name: "ghost", Namespace: "default"},
		}},
		pods: []v1.Pod{
			apiPod("claims", func(p *v1.Pod) {
				p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu"}}
			}),
			apiPod("stopsignal", func(p *v1.Pod) {
				sig := v1.SIGUSR1
				p.Spec.Containers[0].Lifecycle = &v1.Lifecycle{StopSignal: &sig}
			}),
		},
		want: []want{
			{"pods", doctor.Error, "pod kube-system/etcd-node1 uses fields heartlet refuses: heartlet would fail it and stop its containers: spec.hostUsers"},
			{"pods", doctor.Error, "static pod manifest /etc/kubernetes/manifests/bad.yaml: heartlet rejects it"},
			{"pods", doctor.Error, "pod default/claims uses fields heartlet refuses"},
			{"pods", doctor.Warning, "pod default/stopsignal uses fields heartlet does not honour yet: spec.containers[c].lifecycle.stopSignal"},
			{"pods", doctor.Warning, "1 pods the runtime runs could not be checked (they are neither static pods nor bound to this node in the API server): default/ghost"},
		},
		failed: true,
	}, {
		name:    "no API server to read running pods from",
		files:   map[string]string{"/var/lib/kubelet/config.yaml": kubeletConfig, "/etc/kubernetes/manifests/etcd.yaml": staticPod},
		args:    []string{"--config=/var/lib/kubelet/config.yaml", "--hostname-override=node1", "--kubeconfig=/etc/kubernetes/kubelet.conf"},
		rt:      &fakeRuntime{driver: runtimeapi.CgroupDriver_CGROUPFS, pods: []*runtime.PodStatus{{UID: "u1", Name: "web", Namespace: "default"}}},
		podsErr: errors.New("connection refused"),
		want:    []want{{"pods", doctor.Warning, "1 pods the runtime runs could not be checked (reading the node's pods from the API server: connection refused): default/web"}},
	}, {
		name: "state files heartlet ignores, credential providers",
		files: map[string]string{"/var/lib/kubelet/config.yaml": kubeletConfig, "/etc/kubernetes/manifests/etcd.yaml": staticPod,
			"/var/lib/kubelet/cpu_manager_state":                                                       `{"policyName":"static","defaultCpuSet":"0-3","checksum":1}`,
			"/var/lib/kubelet/memory_manager_state":                                                    `{"policyName":"Static","machineState":{},"checksum":1}`,
			"/var/lib/kubelet/dra_manager_state":                                                       `{}`,
			"/etc/kubernetes/credential-providers.yaml":                                                credentialProviders,
			"/usr/libexec/kubernetes/kubelet-plugins/credential-provider/exec/gcr-credential-provider": "#!/bin/sh\n",
			"/usr/libexec/kubernetes/kubelet-plugins/credential-provider/exec/ecr-credential-provider": "#!/bin/sh\n",
		},
		args: []string{"--config=/var/lib/kubelet/config.yaml", "--hostname-override=node1",
			"--image-credential-provider-config=/etc/kubernetes/credential-providers.yaml",
			"--image-credential-provider-bin-dir=/usr/libexec/kubernetes/kubelet-plugins/credential-provider/exec"},
		rt: &fakeRuntime{driver: runtimeapi.CgroupDriver_CGROUPFS},
		setupDir: func(t *testing.T, root string) {
			for _, p := range []string{"gcr", "ecr"} {
				if err := os.Chmod(filepath.Join(root, "/usr/libexec/kubernetes/kubelet-plugins/credential-provider/exec/"+p+"-credential-provider"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			dir := filepath.Join(root, "var/lib/kubelet/device-plugins")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"kubelet.sock", "nvidia-gpu.sock"} {
				l, err := net.Listen("unix", filepath.Join(dir, name))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { l.Close() })
			}
		},
		want: []want{
			{"state", doctor.Warning, `cpu_manager_state: CPU manager policy "static"`},
			{"state", doctor.Warning, `memory_manager_state: memory manager policy "Static"`},
			{"state", doctor.Warning, "dra_manager_state"},
			{"state", doctor.Warning, "device plugins registered (nvidia-gpu.sock)"},
			{"credential-providers", doctor.OK, "credential provider ecr-credential-provider for *.dkr.ecr.*.amazonaws.com: heartlet runs it"},
			{"credential-providers", doctor.OK, "credential provider gcr-credential-provider"},
		},
		notWant: []want{{"state", doctor.Warning, "kubelet.sock"}},
	}, {
		name: "a credential provider without its program",
		files: map[string]string{"/var/lib/kubelet/config.yaml": kubeletConfig,
			"/etc/kubernetes/credential-providers.yaml": credentialProviders},
		args: []string{"--config=/var/lib/kubelet/config.yaml", "--hostname-override=node1",
			"--image-credential-provider-config=/etc/kubernetes/credential-providers.yaml",
			"--image-credential-provider-bin-dir=/usr/libexec/kubernetes/kubelet-plugins/credential-provider/exec"},
		want:   []want{{"flags", doctor.Error, `"ecr-credential-provider": no plugin in the bin dir`}},
		failed: true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			// Short: unix socket paths are limited to 108 bytes.
			root, err := os.MkdirTemp("", "ks")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(root) })
			writeFiles(t, root, tc.files)
			if tc.setupDir != nil {
				tc.setupDir(t, root)
			}
			in := Inputs{
				Node:   Node{Root: root},
				Source: &Source{Program: "/usr/bin/kubelet", Args: tc.args, From: "test"},
				Pods: func(_ context.Context, opts *config.Options) ([]v1.Pod, error) {
					return tc.pods, tc.podsErr
				},
			}
			if tc.rt != nil {
				in.ConnectRuntime = func(context.Context, *config.Options) (Runtime, error) { return tc.rt, nil }
			}
			lines := Report(context.Background(), in, 0)
			for _, w := range tc.want {
				if !has(lines, w.check, w.level, w.text) {
					t.Errorf("no %s %s %q in\n%s", w.check, w.level, w.text, strings.Join(findings(lines), "\n"))
				}
			}
			for _, w := range tc.notWant {
				if has(lines, w.check, w.level, w.text) {
					t.Errorf("unexpected %s %s %q in\n%s", w.check, w.level, w.text, strings.Join(findings(lines), "\n"))
				}
			}
			if got := doctor.Failed(lines); got != tc.failed {
				t.Errorf("Failed = %v, want %v:\n%s", got, tc.failed, strings.Join(findings(lines), "\n"))
			}
			for _, l := range lines {
				if l.Level == doctor.Error && l.Fix == "" {
					t.Errorf("an error without a fix: %s", l.Found)
				}
			}
		})
	}
}
