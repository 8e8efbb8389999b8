package volume

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/heartlet/heartlet/internal/expansion"
)

// Mounts returns the CRI mounts of the container's volumeMounts, in order.
// configMap, secret, downwardAPI and projected volumes are always mounted
// read-only. A subPath is opened inside its volume and bind-mounted below
// <RootDir>/pods/<uid>/volume-subpaths, and that mount is what the runtime
// gets (see subpath.go: missing directories are created with the volume
// directory's mode; ".." elements, absolute paths and symbolic links
// leading out of the volume are refused with ErrInvalidSubPath). A
// subPathExpr is expanded with the environment the container spec gives
// literally or through pod and node fields, then handled as a subPath; use
// MountsWithEnv when it references ConfigMaps or Secrets. Volumes must
// have been prepared. Calls for one pod are serialized with Prepare and
// Cleanup.
func (m *Manager) Mounts(ctx context.Context, pod *v1.Pod, c *v1.Container) ([]*runtimeapi.Mount, error) {
	return m.MountsWithEnv(ctx, pod, c, nil)
}

// MountsWithEnv is Mounts with the container's resolved environment for
// subPathExpr expansion; a nil env is computed as Mounts does.
func (m *Manager) MountsWithEnv(ctx context.Context, pod *v1.Pod, c *v1.Container, env map[string]string) ([]*runtimeapi.Mount, error) {
	st := m.acquire(pod.UID)
	defer st.mu.Unlock()
	vols := make(map[string]*v1.Volume, len(pod.Spec.Volumes))
	for i := range pod.Spec.Volumes {
		vols[pod.Spec.Volumes[i].Name] = &pod.Spec.Volumes[i]
	}
	out := make([]*runtimeapi.Mount, 0, len(c.VolumeMounts))
	for i := range c.VolumeMounts {
		vm := &c.VolumeMounts[i]
		v := vols[vm.Name]
		if v == nil {
			return nil, fmt.Errorf("cannot find volume %q to mount into container %q", vm.Name, c.Name)
		}
		if v.Image != nil {
			mnt, err := m.imageMount(pod, c, vm, v, env)
			if err != nil {
				return nil, fmt.Errorf("volumeMount %q of container %q: %w", vm.Name, c.Name, err)
			}
			out = append(out, mnt)
			continue
		}
		var (
			hostPath string
			readOnly bool
			err      error
		)
		if m.pluginFor(v) != nil {
			hostPath, readOnly, err = pluginPath(st, v)
		} else {
			hostPath, readOnly, err = m.volumePath(pod, v)
		}
		if err != nil {
			return nil, fmt.Errorf("volume %q of container %q: %w", vm.Name, c.Name, err)
		}

		subPath := vm.SubPath
		if vm.SubPathExpr != "" {
			if env == nil {
				env = m.specEnv(pod, c)
			}
			subPath, err = expandSubPathExpr(vm.SubPathExpr, env)
			if err != nil {
				return nil, fmt.Errorf("volumeMount %q of container %q: subPathExpr %q: %w", vm.Name, c.Name, vm.SubPathExpr, err)
			}
		}
		if subPath != "" {
			if err := validateSubPath(subPath); err != nil {
				return nil, fmt.Errorf("volumeMount %q of container %q: %w", vm.Name, c.Name, err)
			}
			target, err := m.subPathTarget(pod, vm.Name, c.Name, i)
			if err != nil {
				return nil, fmt.Errorf("volumeMount %q of container %q: %w", vm.Name, c.Name, err)
			}
			hostPath, err = m.bindSubPath(ctx, hostPath, subPath, target)
			if err != nil {
				return nil, fmt.Errorf("volumeMount %q of container %q: %w", vm.Name, c.Name, err)
			}
		}

		prop, err := propagation(vm, c)
		if err != nil {
			return nil, fmt.Errorf("volumeMount %q of container %q: %w", vm.Name, c.Name, err)
		}
		mnt := &runtimeapi.Mount{
			ContainerPath: vm.MountPath,
			HostPath:      hostPath,
			Readonly:      vm.ReadOnly || readOnly,
			Propagation:   prop,
		}
		if vm.RecursiveReadOnly != nil && *vm.RecursiveReadOnly == v1.RecursiveReadOnlyEnabled {
			if !mnt.Readonly || prop != runtimeapi.MountPropagation_PROPAGATION_PRIVATE {
				return nil, fmt.Errorf("volumeMount %q of container %q: recursiveReadOnly Enabled needs readOnly and no mount propagation", vm.Name, c.Name)
			}
			mnt.RecursiveReadOnly = true
		}
		if len(vm.BindMountOptions) > 0 {
			mnt.MountOptions = append([]string(nil), vm.BindMountOptions...)
		}
		out = append(out, mnt)
	}
	return out, nil
}

// volumePath returns the host path of a volume and whether it is always
// mounted read-only.
func (m *Manager) volumePath(pod *v1.Pod, v *v1.Volume) (string, bool, error) {
	switch {
	case v.HostPath != nil:
		return v.HostPath.Path, false, nil
	case v.EmptyDir != nil:
		return m.volumeDir(pod.UID, PluginEmptyDir, v.Name), false, nil
	}
	if plugin, _ := contentPlugin(v); plugin != "" {
		return m.volumeDir(pod.UID, plugin, v.Name), true, nil
	}
	return "", false, fmt.Errorf("volume type %s: %w", sourceName(&v.VolumeSource), ErrUnsupported)
}

// propagation maps a volumeMount's mountPropagation to the CRI value.
func propagation(vm *v1.VolumeMount, c *v1.Container) (runtimeapi.MountPropagation, error) {
	if vm.MountPropagation == nil {
		return runtimeapi.MountPropagation_PROPAGATION_PRIVATE, nil
	}
	switch mode := *vm.MountPropagation; mode {
	case v1.MountPropagationNone:
		return runtimeapi.MountPropagation_PROPAGATION_PRIVATE, nil
	case v1.MountPropagationHostToContainer:
		return runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER, nil
	case v1.MountPropagationBidirectional:
		sc := c.SecurityContext
		if sc == nil || sc.Privileged == nil || !*sc.Privileged {
			return 0, errors.New("mountPropagation Bidirectional is available only to privileged containers")
		}
		return runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL, nil
	default:
		return 0, fmt.Errorf("invalid mountPropagation mode %q", mode)
	}
}

// validateSubPath checks the form of a subPath: relative, with no ".."
// element and no NUL byte.
func validateSubPath(sub string) error {
	switch {
	case filepath.IsAbs(sub):
		return fmt.Errorf("%w: %q must not be an absolute path", ErrInvalidSubPath, sub)
	case strings.IndexByte(sub, 0) >= 0:
		return fmt.Errorf("%w: %q must not contain a NUL byte", ErrInvalidSubPath, sub)
	}
	for _, e := range strings.Split(sub, "/") {
		if e == ".." {
			return fmt.Errorf("%w: %q must not contain '..'", ErrInvalidSubPath, sub)
		}
	}
	return nil
}

// expandSubPathExpr expands $(VAR) references with env ($$ escapes a
// dollar sign); a reference to a variable that is unset or empty is an
// error, as upstream treats it.
func expandSubPathExpr(expr string, env map[string]string) (string, error) {
	missing := map[string]bool{}
	out := expansion.Expand(expr, func(name string) (string, bool) {
		v, ok := env[name]
		if !ok || v == "" {
			missing[name] = true
		}
		return v, true
	})
	if len(missing) > 0 {
		names := make([]string, 0, len(missing))
		for n := range missing {
			names = append(names, n)
		}
		sort.Strings(names)
		return "", fmt.Errorf("missing value for %s", strings.Join(names, ", "))
	}
	return out, nil
}

// specEnv is the container's environment as far as the spec gives it
// without the API: literal values (expanded with the variables before
// them) and fieldRef/resourceFieldRef values. configMapKeyRef and
// secretKeyRef variables and envFrom are left out.
func (m *Manager) specEnv(pod *v1.Pod, c *v1.Container) map[string]string {
	env := map[string]string{}
	lookup := func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = expansion.Expand(e.Value, lookup)
		case e.ValueFrom.FieldRef != nil:
			if v, err := m.envFieldValue(pod, e.ValueFrom.FieldRef.FieldPath); err == nil {
				env[e.Name] = v
			}
		case e.ValueFrom.ResourceFieldRef != nil:
			if v, err := ContainerResourceValue(pod, c.Name, e.ValueFrom.ResourceFieldRef, m.allocatable()); err == nil {
				env[e.Name] = v
			}
		}
	}
	return env
}

// envFieldValue is podFieldValue plus the fields environment variables may
// reference beyond metadata.
func (m *Manager) envFieldValue(pod *v1.Pod, path string) (string, error) {
	switch path {
	case "spec.nodeName":
		if pod.Spec.NodeName != "" {
			return pod.Spec.NodeName, nil
		}
		return m.opts.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP":
		if len(m.opts.NodeIPs) > 0 {
			return m.opts.NodeIPs[0], nil
		}
		return pod.Status.HostIP, nil
	case "status.hostIPs":
		if len(m.opts.NodeIPs) > 0 {
			return strings.Join(m.opts.NodeIPs, ","), nil
		}
		return pod.Status.HostIP, nil
	case "status.podIP":
		return pod.Status.PodIP, nil
	case "status.podIPs":
		ips := make([]string, 0, len(pod.Status.PodIPs))
		for _, ip := range pod.Status.PodIPs {
			ips = append(ips, ip.IP)
		}
		return strings.Join(ips, ","), nil
	}
	return podFieldValue(pod, path)
}

// imageMount is the CRI mount of an image volume: the runtime mounts the
// image (Image.UserSpecifiedImage is the volume's reference; the caller
// that made the image present replaces Image.Image with the runtime's
// reference) read-only, and the subPath, checked as any other, is the
// directory of the image that is mounted (ImageSubPath), resolved by the
// runtime inside the image.
func (m *Manager) imageMount(pod *v1.Pod, c *v1.Container, vm *v1.VolumeMount, v *v1.Volume, env map[string]string) (*runtimeapi.Mount, error) {
	subPath := vm.SubPath
	if vm.SubPathExpr != "" {
		if env == nil {
			env = m.specEnv(pod, c)
		}
		var err error
		subPath, err = expandSubPathExpr(vm.SubPathExpr, env)
		if err != nil {
			return nil, fmt.Errorf("subPathExpr %q: %w", vm.SubPathExpr, err)
		}
	}
	if subPath != "" {
		if err := validateSubPath(subPath); err != nil {
			return nil, err
		}
	}
	prop, err := propagation(vm, c)
	if err != nil {
		return nil, err
	}
	mnt := &runtimeapi.Mount{
		ContainerPath: vm.MountPath,
		Readonly:      true,
		Propagation:   prop,
		Image:         &runtimeapi.ImageSpec{Image: v.Image.Reference, UserSpecifiedImage: v.Image.Reference},
		ImageSubPath:  subPath,
	}
	if vm.RecursiveReadOnly != nil && *vm.RecursiveReadOnly == v1.RecursiveReadOnlyEnabled {
		if prop != runtimeapi.MountPropagation_PROPAGATION_PRIVATE {
			return nil, errors.New("recursiveReadOnly Enabled needs no mount propagation")
		}
		mnt.RecursiveReadOnly = true
	}
	return mnt, nil
}
