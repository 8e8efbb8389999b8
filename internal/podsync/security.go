package podsync

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The paths the runtime masks and makes read-only in a container's /proc
// and /sys unless its procMount is Unmasked (upstream pkg/securitycontext,
// kept in step with the OCI runtimes' defaults).
var (
	defaultMaskedPaths = []string{
		"/proc/asound",
		"/proc/acpi",
		"/proc/kcore",
		"/proc/keys",
		"/proc/latency_stats",
		"/proc/timer_list",
		"/proc/timer_stats",
		"/proc/sched_debug",
		"/proc/scsi",
		"/sys/firmware",
		"/sys/devices/virtual/powercap",
	}
	defaultReadonlyPaths = []string{
		"/proc/bus",
		"/proc/fs",
		"/proc/irq",
		"/proc/sys",
		"/proc/sysrq-trigger",
	}
)

// errLocalhostProfile: a Localhost seccomp profile names no file.
var errLocalhostProfile = errors.New("localhostProfile must be set if seccompProfile type is Localhost")

// imageUserGetter is what the syncer needs of a runtime to learn the user
// an image runs as; runtime.Runtime implements it. A runtime without it
// is trusted to apply the image's user itself, and runAsNonRoot can then
// only be checked against runAsUser.
type imageUserGetter interface {
	ImageUser(ctx context.Context, image string) (uid *int64, username string, err error)
}

// effectiveSecurityContext merges the pod's security context (the
// defaults) and the container's (which wins field by field), as upstream
// DetermineEffectiveSecurityContext: the pod contributes user, group,
// runAsNonRoot and SELinux options; everything else is the container's.
// The result is never nil and never aliases the pod.
func effectiveSecurityContext(pod *v1.Pod, c *v1.Container) *v1.SecurityContext {
	eff := &v1.SecurityContext{}
	if psc := pod.Spec.SecurityContext; psc != nil {
		eff.RunAsUser = copyPtr(psc.RunAsUser)
		eff.RunAsGroup = copyPtr(psc.RunAsGroup)
		eff.RunAsNonRoot = copyPtr(psc.RunAsNonRoot)
		eff.SELinuxOptions = copyPtr(psc.SELinuxOptions)
		eff.SeccompProfile = copyPtr(psc.SeccompProfile)
	}
	csc := c.SecurityContext
	if csc == nil {
		return eff
	}
	override := func(dst **int64, src *int64) {
		if src != nil {
			*dst = copyPtr(src)
		}
	}
	override(&eff.RunAsUser, csc.RunAsUser)
	override(&eff.RunAsGroup, csc.RunAsGroup)
	if csc.RunAsNonRoot != nil {
		eff.RunAsNonRoot = copyPtr(csc.RunAsNonRoot)
	}
	if csc.SELinuxOptions != nil {
		eff.SELinuxOptions = copyPtr(csc.SELinuxOptions)
	}
	if csc.SeccompProfile != nil {
		eff.SeccompProfile = copyPtr(csc.SeccompProfile)
	}
	if csc.Capabilities != nil {
		eff.Capabilities = csc.Capabilities.DeepCopy()
	}
	eff.Privileged = copyPtr(csc.Privileged)
	eff.ReadOnlyRootFilesystem = copyPtr(csc.ReadOnlyRootFilesystem)
	eff.AllowPrivilegeEscalation = copyPtr(csc.AllowPrivilegeEscalation)
	eff.ProcMount = copyPtr(csc.ProcMount)
	return eff
}

func copyPtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// formatPod names a pod in messages as upstream's format.Pod does:
// name_namespace(uid).
func formatPod(pod *v1.Pod) string {
	return fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
}

// verifyRunAsNonRoot refuses a container that would run as root while its
// effective security context asks for runAsNonRoot, with upstream's
// messages. uid and username are the image's user; a non-numeric user
// cannot be verified and is refused.
func verifyRunAsNonRoot(pod *v1.Pod, c *v1.Container, eff *v1.SecurityContext, uid *int64, username string) error {
	if eff.RunAsNonRoot == nil || !*eff.RunAsNonRoot {
		return nil
	}
	if eff.RunAsUser != nil {
		if *eff.RunAsUser == 0 {
			return fmt.Errorf("container's runAsUser breaks non-root policy (pod: %q, container: %s)", formatPod(pod), c.Name)
		}
		return nil
	}
	switch {
	case uid == nil && username != "":
		return fmt.Errorf("container has runAsNonRoot and image has non-numeric user (%s), cannot verify user is non-root (pod: %q, container: %s)", username, formatPod(pod), c.Name)
	case uid == nil:
		return nil
	case *uid == 0:
		return fmt.Errorf("container has runAsNonRoot and image will run as root (pod: %q, container: %s)", formatPod(pod), c.Name)
	case *uid < 0 || *uid > math.MaxInt32:
		return fmt.Errorf("container has runAsNonRoot and image has an invalid user id (%d). (Must be 1-(%d)): must be between 0 and %d, inclusive (pod: %q, container: %s)",
			*uid, math.MaxInt32, math.MaxInt32, formatPod(pod), c.Name)
	}
	return nil
}

// containerSecurityContext is the CRI security context of container c:
// it reads the image's user when the spec names none, refuses root under
// runAsNonRoot, and maps the effective security context.
func (s *Syncer) containerSecurityContext(ctx context.Context, pod *v1.Pod, c *v1.Container, image string) (*runtimeapi.LinuxContainerSecurityContext, error) {
	eff := effectiveSecurityContext(pod, c)
	var (
		uid      *int64
		username string
		known    bool
	)
	if g, ok := s.rt.(imageUserGetter); ok && eff.RunAsUser == nil {
		var err error
		uid, username, err = g.ImageUser(ctx, image)
		if err != nil {
			return nil, fmt.Errorf("get image user of %s: %w", c.Image, err)
		}
		known = true
	}
	if known || eff.RunAsUser != nil {
		if err := verifyRunAsNonRoot(pod, c, eff, uid, username); err != nil {
			return nil, err
		}
	}
	return linuxContainerSecurity(pod, eff, uid, username, s.opts.SeccompProfileRoot, s.opts.SeccompDefault)
}

// linuxContainerSecurity maps an effective security context to CRI, as
// upstream's determineEffectiveSecurityContext: the image's user stands in
// for an unset runAsUser; fsGroup then the pod's supplementalGroups are
// added to the groups; no_new_privs is set only when
// allowPrivilegeEscalation is false; procMount Default keeps the masked
// and read-only paths, Unmasked clears them.
func linuxContainerSecurity(pod *v1.Pod, eff *v1.SecurityContext, imageUID *int64, imageUser, seccompRoot string, seccompDefault bool) (*runtimeapi.LinuxContainerSecurityContext, error) {
	sc := &runtimeapi.LinuxContainerSecurityContext{
		Capabilities:   runtimeCapabilities(eff.Capabilities),
		SelinuxOptions: runtimeSELinux(eff.SELinuxOptions),
		Privileged:     eff.Privileged != nil && *eff.Privileged,
		ReadonlyRootfs: eff.ReadOnlyRootFilesystem != nil && *eff.ReadOnlyRootFilesystem,
		NoNewPrivs:     eff.AllowPrivilegeEscalation != nil && !*eff.AllowPrivilegeEscalation,
	}
	seccomp, err := seccompProfile(eff.SeccompProfile, seccompRoot, seccompDefault)
	if err != nil {
		return nil, err
	}
	sc.Seccomp = seccomp
	if eff.RunAsUser != nil {
		sc.RunAsUser = &runtimeapi.Int64Value{Value: *eff.RunAsUser}
	} else {
		if imageUID != nil {
			sc.RunAsUser = &runtimeapi.Int64Value{Value: *imageUID}
		}
		sc.RunAsUsername = imageUser
	}
	if eff.RunAsGroup != nil {
		sc.RunAsGroup = &runtimeapi.Int64Value{Value: *eff.RunAsGroup}
	}
	sc.NamespaceOptions = namespaceOptions(pod)
	sc.SupplementalGroups, sc.SupplementalGroupsPolicy = supplementalGroups(pod)
	if eff.ProcMount != nil && *eff.ProcMount == v1.UnmaskedProcMount {
		sc.MaskedPaths = []string{}
		sc.ReadonlyPaths = []string{}
	} else {
		sc.MaskedPaths = append([]string(nil), defaultMaskedPaths...)
		sc.ReadonlyPaths = append([]string(nil), defaultReadonlyPaths...)
	}
	return sc, nil
}

// supplementalGroups lists the pod's extra groups, fsGroup first, and the
// policy that merges them with the image's groups (Merge unless the pod
// asks for Strict).
func supplementalGroups(pod *v1.Pod) ([]int64, runtimeapi.SupplementalGroupsPolicy) {
	psc := pod.Spec.SecurityContext
	if psc == nil {
		return nil, runtimeapi.SupplementalGroupsPolicy_Merge
	}
	var groups []int64
	if psc.FSGroup != nil {
		groups = append(groups, *psc.FSGroup)
	}
	groups = append(groups, psc.SupplementalGroups...)
	policy := runtimeapi.SupplementalGroupsPolicy_Merge
	if psc.SupplementalGroupsPolicy != nil && *psc.SupplementalGroupsPolicy == v1.SupplementalGroupsPolicyStrict {
		policy = runtimeapi.SupplementalGroupsPolicy_Strict
	}
	return groups, policy
}

// sandboxSecurity is the CRI security context of the pod sandbox: the
// pod's namespaces, user, groups and seccomp profile; it is privileged
// when any container is, which runtimes require to start privileged
// containers in it.
func (s *Syncer) sandboxSecurity(pod *v1.Pod) (*runtimeapi.LinuxSandboxSecurityContext, error) {
	sc := &runtimeapi.LinuxSandboxSecurityContext{
		NamespaceOptions: namespaceOptions(pod),
		Privileged:       hasPrivileged(pod),
	}
	var profile *v1.SeccompProfile
	if psc := pod.Spec.SecurityContext; psc != nil {
		if psc.RunAsUser != nil {
			sc.RunAsUser = &runtimeapi.Int64Value{Value: *psc.RunAsUser}
		}
		if psc.RunAsGroup != nil {
			sc.RunAsGroup = &runtimeapi.Int64Value{Value: *psc.RunAsGroup}
		}
		sc.SelinuxOptions = runtimeSELinux(psc.SELinuxOptions)
		profile = psc.SeccompProfile
	}
	sc.SupplementalGroups, sc.SupplementalGroupsPolicy = supplementalGroups(pod)
	seccomp, err := seccompProfile(profile, s.opts.SeccompProfileRoot, s.opts.SeccompDefault)
	if err != nil {
		return nil, err
	}
	sc.Seccomp = seccomp
	return sc, nil
}

func hasPrivileged(pod *v1.Pod) bool {
	for _, c := range allContainers(pod) {
		if c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged {
			return true
		}
	}
	return false
}

// seccompProfile maps a seccomp profile as upstream: RuntimeDefault, a
// Localhost file below root, Unconfined; no profile means RuntimeDefault
// with seccompDefault, else Unconfined.
func seccompProfile(p *v1.SeccompProfile, root string, seccompDefault bool) (*runtimeapi.SecurityProfile, error) {
	if p == nil {
		if seccompDefault {
			return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, nil
		}
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, nil
	}
	switch p.Type {
	case v1.SeccompProfileTypeRuntimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, nil
	case v1.SeccompProfileTypeLocalhost:
		if p.LocalhostProfile == nil || *p.LocalhostProfile == "" {
			return nil, errLocalhostProfile
		}
		return &runtimeapi.SecurityProfile{
			ProfileType:  runtimeapi.SecurityProfile_Localhost,
			LocalhostRef: filepath.Join(root, *p.LocalhostProfile),
		}, nil
	}
	return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, nil
}

// runtimeCapabilities passes capability names through ("ALL" included:
// the runtime expands it).
func runtimeCapabilities(c *v1.Capabilities) *runtimeapi.Capability {
	if c == nil {
		return nil
	}
	out := &runtimeapi.Capability{}
	for _, a := range c.Add {
		out.AddCapabilities = append(out.AddCapabilities, string(a))
	}
	for _, d := range c.Drop {
		out.DropCapabilities = append(out.DropCapabilities, string(d))
	}
	return out
}

func runtimeSELinux(o *v1.SELinuxOptions) *runtimeapi.SELinuxOption {
	if o == nil {
		return nil
	}
	return &runtimeapi.SELinuxOption{User: o.User, Role: o.Role, Type: o.Type, Level: o.Level}
}

// podSysctls are the sysctls the runtime sets in the sandbox. Admission
// has checked them against the node's allowlist.
func podSysctls(pod *v1.Pod) map[string]string {
	if pod.Spec.SecurityContext == nil || len(pod.Spec.SecurityContext.Sysctls) == 0 {
		return nil
	}
	m := make(map[string]string, len(pod.Spec.SecurityContext.Sysctls))
	for _, s := range pod.Spec.SecurityContext.Sysctls {
		m[s.Name] = s.Value
	}
	return m
}
