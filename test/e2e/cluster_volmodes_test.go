//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// statScript prints "path mode uid gid" for each file the container is
// shown (through the volumes' links), then for the subPath mount.
const statScript = `for f in /cm/key /secret/new-path /downward/podname /proj/token /proj/key /proj/podname; do
	stat -L -c '%n %A %u %g' $f
done
stat -c '%n %A %u %g' /sub`

// The modes, owners and groups of every content volume source and of a
// subPath heartlet creates, seen from inside the container, as upstream:
// test/e2e/common/storage/configmap_volume.go, secrets_volume.go,
// downwardapi_volume.go and projected_*.go ("with defaultMode set",
// "with mappings and Item mode set", "as non-root with defaultMode and
// fsGroup set": -r--r----- with the fsGroup), test/e2e/auth/
// service_accounts.go ("should set ownership and permission when
// RunAsUser or FsGroup is present": the token -rw------- for runAsUser,
// -rw-r----- with fsGroup, -rw-r--r-- with neither), and a missing
// subPath made with the volume directory's mode (kubelet makeMounts,
// SafeMakeDir): an emptyDir's drwxrwxrwx, drwxrwsrwx with the fsGroup.
func TestClusterVolumeModes(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{})
	cm := &v1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-volmodes-cm", Namespace: "default"},
		Data:       map[string]string{"key": "value"},
	}
	secret := &v1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-volmodes-secret", Namespace: "default"},
		StringData: map[string]string{"password": "s3cret"},
	}
	createObject(t, cm, "configmap", cm.Name)
	createObject(t, secret, "secret", secret.Name)

	podName := v1.DownwardAPIVolumeFile{Path: "podname", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}
	modesPod := func(name string, cmMode, itemMode, downwardMode *int32, sc *v1.PodSecurityContext) *v1.Pod {
		return apiPod(name, func(p *v1.Pod) {
			p.Spec.RestartPolicy = v1.RestartPolicyNever
			p.Spec.SecurityContext = sc
			c := shContainer("main", statScript)
			c.VolumeMounts = []v1.VolumeMount{
				{Name: "cm", MountPath: "/cm"},
				{Name: "secret", MountPath: "/secret"},
				{Name: "downward", MountPath: "/downward"},
				{Name: "proj", MountPath: "/proj"},
				{Name: "scratch", MountPath: "/sub", SubPath: "made/by/heartlet"},
			}
			p.Spec.Containers = []v1.Container{c}
			p.Spec.Volumes = []v1.Volume{
				{Name: "cm", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
					LocalObjectReference: v1.LocalObjectReference{Name: cm.Name}, DefaultMode: cmMode}}},
				{Name: "secret", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: secret.Name,
					Items: []v1.KeyToPath{{Key: "password", Path: "new-path", Mode: itemMode}}}}},
				{Name: "downward", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{
					DefaultMode: downwardMode, Items: []v1.DownwardAPIVolumeFile{podName}}}},
				{Name: "proj", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
					{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token"}},
					{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: cm.Name},
						Items: []v1.KeyToPath{{Key: "key", Path: "key", Mode: itemMode}}}},
					{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{podName}}},
				}}}},
				{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
			}
		})
	}

	tests := []struct {
		name string
		pod  *v1.Pod
		want map[string]string // path → "mode uid gid"
	}{
		{
			name: "api-volmodes-plain",
			pod:  modesPod("api-volmodes-plain", ptr.To[int32](0o400), ptr.To[int32](0o400), ptr.To[int32](0o400), nil),
			want: map[string]string{
				"/cm/key":           "-r-------- 0 0",
				"/secret/new-path":  "-r-------- 0 0",
				"/downward/podname": "-r-------- 0 0",
				"/proj/token":       "-rw-r--r-- 0 0",
				"/proj/key":         "-r-------- 0 0",
				"/proj/podname":     "-rw-r--r-- 0 0",
				"/sub":              "drwxrwxrwx 0 0",
			},
		},
		{
			name: "api-volmodes-fsgroup",
			pod: modesPod("api-volmodes-fsgroup", ptr.To[int32](0o440), ptr.To[int32](0o400), nil,
				&v1.PodSecurityContext{RunAsUser: ptr.To[int64](1000), FSGroup: ptr.To[int64](10000)}),
			want: map[string]string{
				"/cm/key":           "-r--r----- 0 10000",
				"/secret/new-path":  "-r--r----- 0 10000",
				"/downward/podname": "-rw-r--r-- 0 10000",
				"/proj/token":       "-rw-r----- 1000 10000",
				"/proj/key":         "-r--r----- 0 10000",
				"/proj/podname":     "-rw-r--r-- 0 10000",
				"/sub":              "drwxrwsrwx 0 10000",
			},
		},
	}
	for _, tc := range tests {
		createPod(t, tc.pod)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			waitAPIPod(t, h, tc.name, 2*time.Minute, "to succeed", func(p *v1.Pod) bool {
				return p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed
			})
			out := mustKubectl(t, "logs", "-n", "default", tc.name)
			got := map[string]string{}
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				if path, rest, ok := strings.Cut(line, " "); ok {
					got[path] = rest
				}
			}
			for path, want := range tc.want {
				if got[path] != want {
					t.Errorf("%s: %q, want %q", path, got[path], want)
				}
			}
			t.Logf("%s:\n%s", tc.name, out)
		})
	}
}
