package podsync

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/heartlet/heartlet/internal/images"
)

// imageVolumeRef is the reference of pod's image volume name, "" when
// name is no image volume.
func imageVolumeRef(pod *v1.Pod, name string) string {
	for _, v := range pod.Spec.Volumes {
		if v.Name == name && v.Image != nil {
			return v.Image.Reference
		}
	}
	return ""
}

func TestImageVolumePullPolicy(t *testing.T) {
	for _, tc := range []struct {
		ref    string
		policy v1.PullPolicy
		want   v1.PullPolicy
	}{
		{"registry.local/tools:1", "", v1.PullIfNotPresent},
		{"registry.local/tools", "", v1.PullAlways},
		{"registry.local/tools:latest", "", v1.PullAlways},
		{"localhost:5000/tools", "", v1.PullAlways},
		{"localhost:5000/tools:2", "", v1.PullIfNotPresent},
		{"registry.local/tools@sha256:0123", "", v1.PullIfNotPresent},
		{"registry.local/tools:latest", v1.PullNever, v1.PullNever},
		{"registry.local/tools:1", v1.PullAlways, v1.PullAlways},
	} {
		got := imageVolumePullPolicy(&v1.ImageVolumeSource{Reference: tc.ref, PullPolicy: tc.policy})
		if got != tc.want {
			t.Errorf("%s with %q: policy %s, want %s", tc.ref, tc.policy, got, tc.want)
		}
	}
}

func imageVolumePod(ref string, policy v1.PullPolicy, mounts ...v1.VolumeMount) *v1.Pod {
	pod := testPod(v1.RestartPolicyAlways, nil, "c")
	pod.Spec.Containers[0].Image = "busybox:1.35"
	pod.Spec.Volumes = []v1.Volume{
		{Name: "tools", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: ref, PullPolicy: policy}}},
		{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
	}
	pod.Spec.Containers[0].VolumeMounts = mounts
	return pod
}

func TestImageVolumeMounted(t *testing.T) {
	for _, tc := range []struct {
		name       string
		ref        string
		policy     v1.PullPolicy
		subPath    string
		wantPolicy v1.PullPolicy
	}{
		{name: "tagged, default policy", ref: "registry.local/tools:1", wantPolicy: v1.PullIfNotPresent},
		{name: "untagged, default policy", ref: "registry.local/tools", wantPolicy: v1.PullAlways},
		{name: "Never, with subPath", ref: "registry.local/tools:1", policy: v1.PullNever, subPath: "usr/share", wantPolicy: v1.PullNever},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.useVolumes(&fakeVolumes{})
			pod := imageVolumePod(tc.ref, tc.policy,
				v1.VolumeMount{Name: "tools", MountPath: "/tools", SubPath: tc.subPath},
				v1.VolumeMount{Name: "data", MountPath: "/data"})
			h.sync(pod)
			var pulled []v1.Container
			for _, c := range h.images.ensured {
				if c.Image == tc.ref {
					pulled = append(pulled, c)
				}
			}
			if len(pulled) != 1 || pulled[0].ImagePullPolicy != tc.wantPolicy {
				t.Fatalf("image volume ensured as %+v, want once with policy %s", pulled, tc.wantPolicy)
			}
			want := h.fake.AddImage(tc.ref) // the id the fake gave it when ensured
			mounts := h.running("c").Config.GetMounts()
			var found bool
			for _, m := range mounts {
				if m.ContainerPath != "/tools" {
					if m.GetImage() != nil {
						t.Errorf("mount %s got an image", m.ContainerPath)
					}
					continue
				}
				found = true
				if m.GetImage().GetImage() != want || m.GetImage().GetUserSpecifiedImage() != tc.ref {
					t.Errorf("image %v, want %q (the pulled image) for %q", m.GetImage(), want, tc.ref)
				}
				if !m.Readonly || m.ImageSubPath != tc.subPath || m.HostPath != "" {
					t.Errorf("mount %v, want read-only, subPath %q, no host path", m, tc.subPath)
				}
			}
			if !found {
				t.Fatalf("no image mount in %v", mounts)
			}
		})
	}
}

func TestImageVolumePullFails(t *testing.T) {
	h := newHarness(t)
	h.useVolumes(&fakeVolumes{})
	const ref = "registry.local/missing:1"
	h.images.failWith(ref, fmt.Errorf("pull: %w", images.ErrImagePullBackOff))
	pod := imageVolumePod(ref, "", v1.VolumeMount{Name: "tools", MountPath: "/tools"})
	_, _ = h.syncer.SyncPod(h.ctx, 0, pod)
	if cs := h.containers("c"); len(cs) != 0 {
		t.Fatalf("container created without its image volume: %v", cs)
	}
	st, ok := h.status.GetPodStatus(pod.UID)
	if !ok || len(st.ContainerStatuses) != 1 || st.ContainerStatuses[0].State.Waiting == nil ||
		st.ContainerStatuses[0].State.Waiting.Reason != images.ErrImagePullBackOff.Error() {
		t.Fatalf("status %+v, want the container waiting in %s", st.ContainerStatuses, images.ErrImagePullBackOff)
	}
}

func TestResolveImageMountsRefusesUnpulled(t *testing.T) {
	pod := imageVolumePod("registry.local/tools:1", "", v1.VolumeMount{Name: "tools", MountPath: "/tools"})
	mounts, _ := (&fakeVolumes{}).MountsWithEnv(t.Context(), pod, &pod.Spec.Containers[0], nil)
	if err := resolveImageMounts(mounts, nil); err == nil {
		t.Fatal("an image mount whose image was not pulled was handed over")
	}
	if err := resolveImageMounts(mounts, map[string]string{"registry.local/tools:1": "sha256:abc"}); err != nil || mounts[0].Image.Image != "sha256:abc" {
		t.Fatalf("resolved %v, %v", mounts[0].Image, err)
	}
}
