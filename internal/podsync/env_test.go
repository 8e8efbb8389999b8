package podsync

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/heartlet/heartlet/internal/podworker"
)

// fakeVolumes serves ConfigMap data from memory and records Prepare.
type fakeVolumes struct {
	configMaps map[string]map[string]string
	prepared   int
	prepareErr error
	cleaned    []types.UID
}

var errMissing = errors.New("missing")

func (f *fakeVolumes) Prepare(context.Context, *v1.Pod) error { f.prepared++; return f.prepareErr }
func (f *fakeVolumes) MountsWithEnv(_ context.Context, pod *v1.Pod, c *v1.Container, _ map[string]string) ([]*runtimeapi.Mount, error) {
	var out []*runtimeapi.Mount
	for _, m := range c.VolumeMounts {
		if ref := imageVolumeRef(pod, m.Name); ref != "" { // as volume.Manager mounts an image volume
			out = append(out, &runtimeapi.Mount{ContainerPath: m.MountPath, Readonly: true,
				Image: &runtimeapi.ImageSpec{Image: ref, UserSpecifiedImage: ref}, ImageSubPath: m.SubPath})
			continue
		}
		out = append(out, &runtimeapi.Mount{ContainerPath: m.MountPath, HostPath: "/vol/" + m.Name})
	}
	return out, nil
}
func (f *fakeVolumes) Devices(_ context.Context, _ *v1.Pod, c *v1.Container) ([]*runtimeapi.Device, error) {
	var out []*runtimeapi.Device
	for _, d := range c.VolumeDevices {
		out = append(out, &runtimeapi.Device{ContainerPath: d.DevicePath, HostPath: "/dev-link/" + d.Name, Permissions: "mrw"})
	}
	return out, nil
}
func (f *fakeVolumes) Adopt(context.Context, *v1.Pod) error { return nil }
func (f *fakeVolumes) PodDirs() ([]types.UID, error)        { return nil, nil }
func (f *fakeVolumes) Cleanup(_ context.Context, uid types.UID) error {
	f.cleaned = append(f.cleaned, uid)
	return nil
}
func (f *fakeVolumes) ConfigMapValue(_ context.Context, ns, name, key string, optional bool) (string, bool, error) {
	d, ok := f.configMaps[ns+"/"+name]
	if v, found := d[key]; ok && found {
		return v, true, nil
	}
	if optional {
		return "", false, nil
	}
	return "", false, fmt.Errorf("configmap %s/%s key %s: %w", ns, name, key, errMissing)
}
func (f *fakeVolumes) SecretValue(ctx context.Context, ns, name, key string, optional bool) (string, bool, error) {
	return f.ConfigMapValue(ctx, ns, "secret-"+name, key, optional)
}
func (f *fakeVolumes) ConfigMapData(_ context.Context, ns, name string, optional bool) (map[string]string, error) {
	if d, ok := f.configMaps[ns+"/"+name]; ok {
		return d, nil
	}
	if optional {
		return nil, nil
	}
	return nil, fmt.Errorf("configmap %s/%s: %w", ns, name, errMissing)
}
func (f *fakeVolumes) SecretData(ctx context.Context, ns, name string, optional bool) (map[string]string, error) {
	return f.ConfigMapData(ctx, ns, "secret-"+name, optional)
}

func envMap(kvs []*runtimeapi.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		m[kv.Key] = string(kv.Value)
	}
	return m
}

func TestContainerEnvReferences(t *testing.T) {
	h := newHarness(t)
	vols := &fakeVolumes{configMaps: map[string]map[string]string{
		"default/cfg":        {"color": "blue", "size": "L"},
		"default/secret-pwd": {"password": "s3cret"},
	}}
	h.useVolumes(vols)
	h.syncer.opts.Allocatable = func() v1.ResourceList {
		return v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")}
	}
	optional := true
	pod := testPod(v1.RestartPolicyAlways, nil, "c")
	c := &pod.Spec.Containers[0]
	c.Resources.Limits = v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")}
	c.EnvFrom = []v1.EnvFromSource{{Prefix: "CFG_", ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}}
	c.Env = []v1.EnvVar{
		{Name: "COLOR", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}, Key: "color"}}},
		{Name: "PASSWORD", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "pwd"}, Key: "password"}}},
		{Name: "MAYBE", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "none"}, Key: "k", Optional: &optional}}},
		{Name: "MEM_MI", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}},
		{Name: "CPU", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.cpu"}}},
		{Name: "MIX", Value: "$(COLOR)-$(CFG_size)"},
	}
	env, err := h.syncer.containerEnv(h.ctx, pod, c, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := envMap(env)
	want := map[string]string{"CFG_color": "blue", "CFG_size": "L", "COLOR": "blue", "PASSWORD": "s3cret", "MEM_MI": "64", "CPU": "2", "MIX": "blue-L"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("env %s = %q, want %q", k, got[k], v)
		}
	}
	if _, set := got["MAYBE"]; set {
		t.Error("a missing optional key set the variable")
	}
}

func TestMissingConfigMapKeyIsCreateContainerConfigError(t *testing.T) {
	h := newHarness(t)
	vols := &fakeVolumes{}
	h.useVolumes(vols)
	pod := testPod(v1.RestartPolicyAlways, nil, "c")
	pod.Spec.Containers[0].Image = "busybox:1.35"
	pod.Spec.Containers[0].Env = []v1.EnvVar{{Name: "X", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "gone"}, Key: "k"}}}}
	if _, err := h.syncer.SyncPod(h.ctx, podworker.UpdateCreate, pod); err == nil {
		t.Fatal("sync with a missing ConfigMap key succeeded")
	}
	st, _ := h.status.GetPodStatus(pod.UID)
	if w := findStatus(st, "c").State.Waiting; w == nil || w.Reason != ReasonCreateContainerConfigError {
		t.Errorf("state = %+v, want waiting %s", findStatus(st, "c").State, ReasonCreateContainerConfigError)
	}
	if len(h.containers("c")) != 0 {
		t.Error("a container was created despite the configuration error")
	}
}

func TestVolumesPreparedAndMounted(t *testing.T) {
	h := newHarness(t)
	vols := &fakeVolumes{}
	h.useVolumes(vols)
	pod := testPod(v1.RestartPolicyAlways, nil, "c")
	pod.Spec.Containers[0].Image = "busybox:1.35"
	pod.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
	pod.Spec.Containers[0].VolumeDevices = []v1.VolumeDevice{{Name: "disk", DevicePath: "/dev/xvda"}}
	h.sync(pod)
	if vols.prepared == 0 {
		t.Error("volumes were not prepared")
	}
	m := h.running("c").Config.GetMounts()
	if len(m) != 1 || m[0].ContainerPath != "/data" || m[0].HostPath != "/vol/data" {
		t.Errorf("mounts = %v", m)
	}
	d := h.running("c").Config.GetDevices()
	if len(d) != 1 || d[0].ContainerPath != "/dev/xvda" || d[0].HostPath != "/dev-link/disk" || d[0].Permissions != "mrw" {
		t.Errorf("devices = %v", d)
	}

	if err := h.syncer.SyncTerminatingPod(h.ctx, pod, 1); err != nil {
		t.Fatal(err)
	}
	if err := h.syncer.SyncTerminatedPod(h.ctx, pod); err != nil {
		t.Fatal(err)
	}
	if len(vols.cleaned) != 1 || vols.cleaned[0] != pod.UID {
		t.Errorf("volumes cleaned up for %v, want the terminated pod", vols.cleaned)
	}

	failing := testPod(v1.RestartPolicyAlways, nil, "d")
	failing.UID = "uid2"
	failing.Spec.Volumes = pod.Spec.Volumes
	vols.prepareErr = errMissing
	if _, err := h.syncer.SyncPod(h.ctx, podworker.UpdateCreate, failing); !errors.Is(err, errMissing) {
		t.Errorf("SyncPod error = %v, want the volume error", err)
	}
	if len(h.containers("d")) != 0 {
		t.Error("container started although its volumes failed")
	}
}

type fakeServiceEnv struct {
	env []v1.EnvVar
	err error
}

func (f fakeServiceEnv) ServiceEnv(*v1.Pod) ([]v1.EnvVar, error) { return f.env, f.err }

// Service variables come last, give way to the container's own (env and
// envFrom), and may be referenced with $(NAME), as upstream.
func TestContainerEnvServices(t *testing.T) {
	h := newHarness(t)
	h.syncer.opts.Env = &fakeVolumes{configMaps: map[string]map[string]string{"default/cfg": {"WEB_SERVICE_PORT": "from-cm"}}}
	h.syncer.opts.ServiceEnv = fakeServiceEnv{env: []v1.EnvVar{
		{Name: "KUBERNETES_SERVICE_HOST", Value: "10.0.0.1"},
		{Name: "WEB_SERVICE_HOST", Value: "10.0.0.3"},
		{Name: "WEB_SERVICE_PORT", Value: "80"},
	}}
	pod := testPod(v1.RestartPolicyAlways, nil, "c")
	c := &pod.Spec.Containers[0]
	c.EnvFrom = []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}}
	c.Env = []v1.EnvVar{
		{Name: "URL", Value: "http://$(WEB_SERVICE_HOST):$(WEB_SERVICE_PORT)"},
		{Name: "WEB_SERVICE_HOST", Value: "mine"},
	}
	env, err := h.syncer.containerEnv(h.ctx, pod, c, nil)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, kv := range env {
		keys = append(keys, kv.Key)
	}
	if want := []string{"WEB_SERVICE_PORT", "URL", "WEB_SERVICE_HOST", "KUBERNETES_SERVICE_HOST"}; !slices.Equal(keys, want) {
		t.Errorf("keys %q, want %q", keys, want)
	}
	got := envMap(env)
	want := map[string]string{"WEB_SERVICE_PORT": "from-cm", "URL": "http://10.0.0.3:from-cm", "WEB_SERVICE_HOST": "mine", "KUBERNETES_SERVICE_HOST": "10.0.0.1"}
	if !maps.Equal(got, want) {
		t.Errorf("env %v, want %v", got, want)
	}

	h.syncer.opts.ServiceEnv = fakeServiceEnv{err: errors.New("not synced")}
	if _, err := h.syncer.containerEnv(h.ctx, pod, c, nil); err == nil {
		t.Error("a container was given an environment without its Service variables")
	}
}
