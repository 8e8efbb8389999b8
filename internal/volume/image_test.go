package volume

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestImageVolumeMounts(t *testing.T) {
	const ref = "registry.local/tools:1"
	img := v1.Volume{Name: "tools", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: ref, PullPolicy: v1.PullIfNotPresent}}}
	private := runtimeapi.MountPropagation_PROPAGATION_PRIVATE
	spec := &runtimeapi.ImageSpec{Image: ref, UserSpecifiedImage: ref}
	for _, tc := range []struct {
		name    string
		vm      v1.VolumeMount
		env     []v1.EnvVar
		want    *runtimeapi.Mount
		wantErr error
	}{
		{name: "whole image, read-only even when not asked",
			vm:   v1.VolumeMount{Name: "tools", MountPath: "/tools"},
			want: &runtimeapi.Mount{ContainerPath: "/tools", Readonly: true, Propagation: private, Image: spec}},
		{name: "subPath",
			vm:   v1.VolumeMount{Name: "tools", MountPath: "/bin2", SubPath: "usr/bin", ReadOnly: true},
			want: &runtimeapi.Mount{ContainerPath: "/bin2", Readonly: true, Propagation: private, Image: spec, ImageSubPath: "usr/bin"}},
		{name: "subPathExpr",
			vm:   v1.VolumeMount{Name: "tools", MountPath: "/d", SubPathExpr: "data/$(DIR)"},
			env:  []v1.EnvVar{{Name: "DIR", Value: "x"}},
			want: &runtimeapi.Mount{ContainerPath: "/d", Readonly: true, Propagation: private, Image: spec, ImageSubPath: "data/x"}},
		{name: "recursive read-only",
			vm:   v1.VolumeMount{Name: "tools", MountPath: "/r", ReadOnly: true, RecursiveReadOnly: ptr(v1.RecursiveReadOnlyEnabled)},
			want: &runtimeapi.Mount{ContainerPath: "/r", Readonly: true, RecursiveReadOnly: true, Propagation: private, Image: spec}},
		{name: "subPath escaping the image",
			vm:      v1.VolumeMount{Name: "tools", MountPath: "/x", SubPath: "../../etc"},
			wantErr: ErrInvalidSubPath},
		{name: "absolute subPath",
			vm:      v1.VolumeMount{Name: "tools", MountPath: "/x", SubPath: "/etc"},
			wantErr: ErrInvalidSubPath},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, false)
			pod := newPod("u1", img)
			pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{tc.vm}
			pod.Spec.Containers[0].Env = tc.env
			if err := e.m.Prepare(context.Background(), pod); err != nil {
				t.Fatal(err)
			}
			got, err := e.m.Mounts(context.Background(), pod, &pod.Spec.Containers[0])
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || !proto.Equal(got[0], tc.want) {
				t.Fatalf("mounts %v, want %v", got, tc.want)
			}
			// Nothing of an image volume is on the host: the runtime
			// mounts it, and no host path is handed over.
			if got[0].HostPath != "" {
				t.Errorf("host path %q given for an image volume", got[0].HostPath)
			}
			if _, err := os.Stat(filepath.Join(e.root, "pods/u1/volume-subpaths")); !os.IsNotExist(err) {
				t.Errorf("a subPath of an image volume was bound on the host: %v", err)
			}
		})
	}
}

func TestImageVolumeWithoutReference(t *testing.T) {
	e := newEnv(t, false)
	pod := newPod("u1", v1.Volume{Name: "tools", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{}}})
	if err := e.m.Prepare(context.Background(), pod); err == nil {
		t.Fatal("an image volume without a reference was set up")
	}
}
