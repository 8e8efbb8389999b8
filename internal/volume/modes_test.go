package volume

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestContentModesAndOwners: the mode, owner and group of every file a
// configMap, secret, downwardAPI or projected volume shows, as upstream's
// volume plugins write them and SetVolumeOwnership adjusts them (fsGroup:
// the group, plus group read, as these volumes are read-only). The cases
// are those of upstream's e2e tests: test/e2e/common/storage/
// configmap_volume.go, secrets_volume.go, downwardapi_volume.go and
// projected_{configmap,secret,downwardapi}.go ("with defaultMode set",
// "with mappings and Item mode set", "as non-root with defaultMode and
// fsGroup set"), and test/e2e/auth/service_accounts.go ("should set
// ownership and permission when RunAsUser or FsGroup is present").
func TestContentModesAndOwners(t *testing.T) {
	requireRoot(t)
	cm := v1.LocalObjectReference{Name: "cfg"}
	name := v1.DownwardAPIVolumeFile{Path: "podname", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}
	token := v1.VolumeProjection{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token"}}
	projected := func(mode *int32, srcs ...v1.VolumeProjection) v1.VolumeSource {
		if mode == nil {
			mode = ptr(int32(0o644)) // the API's default
		}
		return v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{DefaultMode: mode, Sources: srcs}}
	}
	tests := []struct {
		name      string
		vol       v1.VolumeSource
		plugin    string
		fsGroup   *int64
		runAsUser *int64
		file      string
		wantMode  os.FileMode
		wantUID   uint32
		wantGID   uint32
	}{
		{name: "configMap default", plugin: PluginConfigMap, file: "key", wantMode: 0o644,
			vol: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: cm}}},
		{name: "configMap defaultMode 0400", plugin: PluginConfigMap, file: "key", wantMode: 0o400,
			vol: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: cm, DefaultMode: ptr(int32(0o400))}}},
		{name: "configMap item mode 0400", plugin: PluginConfigMap, file: "path/to/key", wantMode: 0o400,
			vol: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: cm,
				Items: []v1.KeyToPath{{Key: "key", Path: "path/to/key", Mode: ptr(int32(0o400))}}}}},
		{name: "configMap defaultMode 0440 with fsGroup", plugin: PluginConfigMap, file: "key", fsGroup: ptr(int64(1001)), runAsUser: ptr(int64(1000)),
			wantMode: 0o440, wantGID: 1001,
			vol: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: cm, DefaultMode: ptr(int32(0o440))}}},
		{name: "configMap defaultMode 0400 with fsGroup gains group read", plugin: PluginConfigMap, file: "key", fsGroup: ptr(int64(1001)),
			wantMode: 0o440, wantGID: 1001,
			vol: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: cm, DefaultMode: ptr(int32(0o400))}}},
		{name: "secret default", plugin: PluginSecret, file: "password", wantMode: 0o644,
			vol: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "sec"}}},
		{name: "secret defaultMode 0400", plugin: PluginSecret, file: "password", wantMode: 0o400,
			vol: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "sec", DefaultMode: ptr(int32(0o400))}}},
		{name: "secret defaultMode 0440 with fsGroup", plugin: PluginSecret, file: "password", fsGroup: ptr(int64(1001)), runAsUser: ptr(int64(1000)),
			wantMode: 0o440, wantGID: 1001,
			vol: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "sec", DefaultMode: ptr(int32(0o440))}}},
		{name: "secret item mode 0600 with fsGroup", plugin: PluginSecret, file: "new-path", fsGroup: ptr(int64(1001)),
			wantMode: 0o640, wantGID: 1001,
			vol: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "sec",
				Items: []v1.KeyToPath{{Key: "password", Path: "new-path", Mode: ptr(int32(0o600))}}}}},
		{name: "downwardAPI defaultMode 0400", plugin: PluginDownwardAPI, file: "podname", wantMode: 0o400,
			vol: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{DefaultMode: ptr(int32(0o400)), Items: []v1.DownwardAPIVolumeFile{name}}}},
		{name: "downwardAPI item mode 0400 with fsGroup", plugin: PluginDownwardAPI, file: "podname", fsGroup: ptr(int64(1001)),
			wantMode: 0o440, wantGID: 1001,
			vol: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
				{Path: "podname", FieldRef: name.FieldRef, Mode: ptr(int32(0o400))}}}}},
		{name: "projected configMap defaultMode 0400", plugin: PluginProjected, file: "key", wantMode: 0o400,
			vol: projected(ptr(int32(0o400)), v1.VolumeProjection{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: cm}})},
		{name: "projected secret item mode 0400", plugin: PluginProjected, file: "new-path", wantMode: 0o400,
			vol: projected(nil, v1.VolumeProjection{Secret: &v1.SecretProjection{LocalObjectReference: v1.LocalObjectReference{Name: "sec"},
				Items: []v1.KeyToPath{{Key: "password", Path: "new-path", Mode: ptr(int32(0o400))}}}})},
		{name: "projected downwardAPI with fsGroup", plugin: PluginProjected, file: "podname", fsGroup: ptr(int64(1001)),
			wantMode: 0o644, wantGID: 1001,
			vol: projected(nil, v1.VolumeProjection{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{name}}})},
		{name: "projected token, neither runAsUser nor fsGroup", plugin: PluginProjected, file: "token", wantMode: 0o644,
			vol: projected(nil, token)},
		{name: "projected token, runAsUser", plugin: PluginProjected, file: "token", runAsUser: ptr(int64(1000)),
			wantMode: 0o600, wantUID: 1000,
			vol: projected(nil, token)},
		{name: "projected token, fsGroup", plugin: PluginProjected, file: "token", fsGroup: ptr(int64(10000)),
			wantMode: 0o640, wantGID: 10000,
			vol: projected(nil, token)},
		{name: "projected token, runAsUser and fsGroup", plugin: PluginProjected, file: "token", runAsUser: ptr(int64(1000)), fsGroup: ptr(int64(10000)),
			wantMode: 0o640, wantUID: 1000, wantGID: 10000,
			vol: projected(nil, token)},
		{name: "projected configMap next to the token keeps root", plugin: PluginProjected, file: "key", runAsUser: ptr(int64(1000)),
			wantMode: 0o644,
			vol:      projected(nil, token, v1.VolumeProjection{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: cm}})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, true)
			e.getter.setConfigMap(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "cfg"}, Data: map[string]string{"key": "value"}})
			e.getter.setSecret(&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "sec"}, Data: map[string][]byte{"password": []byte("s3cret")}})
			pod := newPod("u1", v1.Volume{Name: "v", VolumeSource: tc.vol})
			pod.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: tc.fsGroup, RunAsUser: tc.runAsUser}
			ctx := context.Background()
			if err := e.m.Prepare(ctx, pod); err != nil {
				t.Fatalf("Prepare: %v", err)
			}
			path := filepath.Join(e.m.volumeDir(pod.UID, tc.plugin, "v"), tc.file)
			check := func(when string) {
				fi, err := os.Stat(path) // through the links, as ls -lL in the container
				if err != nil {
					t.Fatal(err)
				}
				st := fi.Sys().(*syscall.Stat_t)
				if fi.Mode() != tc.wantMode || st.Uid != tc.wantUID || st.Gid != tc.wantGID {
					t.Errorf("%s: %s is %v %d:%d, want %v %d:%d", when, tc.file, fi.Mode(), st.Uid, st.Gid, tc.wantMode, tc.wantUID, tc.wantGID)
				}
			}
			check("first Prepare")
			// A second Prepare finds the files as it wrote them and leaves
			// them alone.
			before, _ := os.Readlink(filepath.Join(filepath.Dir(path), dataDirName))
			if err := e.m.Prepare(ctx, pod); err != nil {
				t.Fatalf("second Prepare: %v", err)
			}
			check("second Prepare")
			if tc.file == filepath.Base(tc.file) {
				if after, _ := os.Readlink(filepath.Join(filepath.Dir(path), dataDirName)); after != before {
					t.Errorf("second Prepare rewrote the volume: %q -> %q", before, after)
				}
			}
		})
	}
}

func TestFSUser(t *testing.T) {
	u := func(v int64) *v1.SecurityContext { return &v1.SecurityContext{RunAsUser: &v} }
	tests := []struct {
		name string
		pod  *int64
		init []*v1.SecurityContext
		apps []*v1.SecurityContext
		eph  []*v1.SecurityContext
		want *int64
	}{
		{name: "none", apps: []*v1.SecurityContext{nil}},
		{name: "pod's", pod: ptr(int64(1000)), apps: []*v1.SecurityContext{nil, nil}, want: ptr(int64(1000))},
		{name: "containers agree", apps: []*v1.SecurityContext{u(7), u(7)}, init: []*v1.SecurityContext{u(7)}, want: ptr(int64(7))},
		{name: "container overrides the pod's to the same", pod: ptr(int64(5)), apps: []*v1.SecurityContext{u(5), nil}, want: ptr(int64(5))},
		{name: "containers differ", apps: []*v1.SecurityContext{u(7), u(8)}},
		{name: "one container without", apps: []*v1.SecurityContext{u(7), nil}},
		{name: "init container differs", pod: ptr(int64(5)), init: []*v1.SecurityContext{u(0)}, apps: []*v1.SecurityContext{nil}},
		{name: "ephemeral container differs", pod: ptr(int64(5)), apps: []*v1.SecurityContext{nil}, eph: []*v1.SecurityContext{u(0)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := &v1.Pod{Spec: v1.PodSpec{SecurityContext: &v1.PodSecurityContext{RunAsUser: tc.pod}}}
			for _, sc := range tc.init {
				pod.Spec.InitContainers = append(pod.Spec.InitContainers, v1.Container{SecurityContext: sc})
			}
			for _, sc := range tc.apps {
				pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{SecurityContext: sc})
			}
			for _, sc := range tc.eph {
				pod.Spec.EphemeralContainers = append(pod.Spec.EphemeralContainers, v1.EphemeralContainer{EphemeralContainerCommon: v1.EphemeralContainerCommon{SecurityContext: sc}})
			}
			got := fsUser(pod)
			if (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) {
				t.Errorf("fsUser = %v, want %v", deref(got), deref(tc.want))
			}
		})
	}
}

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}
