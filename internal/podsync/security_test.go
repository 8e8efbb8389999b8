package podsync

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/heartlet/heartlet/internal/podworker"
)

func p[T any](v T) *T { return &v }

var (
	unconfined     = &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}
	runtimeDefault = &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}
	podNamespaces  = &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD}
)

// want fills the fields every container security context has (pod
// namespaces, default masked and read-only paths, unconfined seccomp).
func want(sc *runtimeapi.LinuxContainerSecurityContext) *runtimeapi.LinuxContainerSecurityContext {
	if sc.NamespaceOptions == nil {
		sc.NamespaceOptions = podNamespaces
	}
	if sc.MaskedPaths == nil {
		sc.MaskedPaths = defaultMaskedPaths
		sc.ReadonlyPaths = defaultReadonlyPaths
	}
	if sc.Seccomp == nil {
		sc.Seccomp = unconfined
	}
	return sc
}

// Mapping of the effective security context, as upstream
// determineEffectiveSecurityContext (pkg/kubelet/kuberuntime) and
// DetermineEffectiveSecurityContext/AddNoNewPrivileges/
// ConvertToRuntimeMaskedPaths (pkg/securitycontext).
func TestLinuxContainerSecurity(t *testing.T) {
	unmasked := v1.UnmaskedProcMount
	defaultProc := v1.DefaultProcMount
	tests := []struct {
		name      string
		pod       *v1.PodSecurityContext
		c         *v1.SecurityContext
		hostNet   bool
		hostPID   bool
		sharePID  bool
		imageUID  *int64
		imageUser string
		seccompOn bool
		want      *runtimeapi.LinuxContainerSecurityContext
	}{
		{name: "nothing set, image root", imageUID: p(int64(0)), want: want(&runtimeapi.LinuxContainerSecurityContext{RunAsUser: &runtimeapi.Int64Value{Value: 0}})},
		{
			// The runtime needs a user with a group: the image's stands in.
			name: "runAsGroup alone takes the image's user", c: &v1.SecurityContext{RunAsGroup: p(int64(4000))}, imageUID: p(int64(0)),
			want: want(&runtimeapi.LinuxContainerSecurityContext{RunAsUser: &runtimeapi.Int64Value{Value: 0}, RunAsGroup: &runtimeapi.Int64Value{Value: 4000}}),
		},
		{name: "image user name", imageUser: "nobody", want: want(&runtimeapi.LinuxContainerSecurityContext{RunAsUsername: "nobody"})},
		{
			name: "pod user and groups are defaults",
			pod:  &v1.PodSecurityContext{RunAsUser: p(int64(1000)), RunAsGroup: p(int64(3000)), SupplementalGroups: []int64{5000, 5001}},
			want: want(&runtimeapi.LinuxContainerSecurityContext{
				RunAsUser: &runtimeapi.Int64Value{Value: 1000}, RunAsGroup: &runtimeapi.Int64Value{Value: 3000},
				SupplementalGroups: []int64{5000, 5001},
			}),
		},
		{
			name: "container overrides user and group",
			pod:  &v1.PodSecurityContext{RunAsUser: p(int64(1000)), RunAsGroup: p(int64(3000))},
			c:    &v1.SecurityContext{RunAsUser: p(int64(2000)), RunAsGroup: p(int64(4000))},
			want: want(&runtimeapi.LinuxContainerSecurityContext{RunAsUser: &runtimeapi.Int64Value{Value: 2000}, RunAsGroup: &runtimeapi.Int64Value{Value: 4000}}),
		},
		{
			name:     "fsGroup first among supplemental groups; Strict policy",
			pod:      &v1.PodSecurityContext{FSGroup: p(int64(2000)), SupplementalGroups: []int64{5000}, SupplementalGroupsPolicy: p(v1.SupplementalGroupsPolicyStrict)},
			imageUID: p(int64(0)),
			want: want(&runtimeapi.LinuxContainerSecurityContext{
				RunAsUser: &runtimeapi.Int64Value{Value: 0}, SupplementalGroups: []int64{2000, 5000},
				SupplementalGroupsPolicy: runtimeapi.SupplementalGroupsPolicy_Strict,
			}),
		},
		{
			name: "capabilities add and drop ALL",
			c:    &v1.SecurityContext{RunAsUser: p(int64(0)), Capabilities: &v1.Capabilities{Add: []v1.Capability{"NET_ADMIN"}, Drop: []v1.Capability{"ALL"}}},
			want: want(&runtimeapi.LinuxContainerSecurityContext{
				RunAsUser:    &runtimeapi.Int64Value{Value: 0},
				Capabilities: &runtimeapi.Capability{AddCapabilities: []string{"NET_ADMIN"}, DropCapabilities: []string{"ALL"}},
			}),
		},
		{
			name: "privileged, read-only root",
			c:    &v1.SecurityContext{RunAsUser: p(int64(0)), Privileged: p(true), ReadOnlyRootFilesystem: p(true)},
			want: want(&runtimeapi.LinuxContainerSecurityContext{RunAsUser: &runtimeapi.Int64Value{Value: 0}, Privileged: true, ReadonlyRootfs: true}),
		},
		{
			name: "allowPrivilegeEscalation false sets no_new_privs",
			c:    &v1.SecurityContext{RunAsUser: p(int64(1)), AllowPrivilegeEscalation: p(false)},
			want: want(&runtimeapi.LinuxContainerSecurityContext{RunAsUser: &runtimeapi.Int64Value{Value: 1}, NoNewPrivs: true}),
		},
		{
			name: "allowPrivilegeEscalation true does not",
			c:    &v1.SecurityContext{RunAsUser: p(int64(1)), AllowPrivilegeEscalation: p(true)},
			want: want(&runtimeapi.LinuxContainerSecurityContext{RunAsUser: &runtimeapi.Int64Value{Value: 1}}),
		},
		{
			name: "procMount Unmasked clears the paths",
			c:    &v1.SecurityContext{RunAsUser: p(int64(1)), ProcMount: &unmasked},
			want: want(&runtimeapi.LinuxContainerSecurityContext{RunAsUser: &runtimeapi.Int64Value{Value: 1}, MaskedPaths: []string{}, ReadonlyPaths: []string{}}),
		},
		{
			name: "procMount Default keeps them",
			c:    &v1.SecurityContext{RunAsUser: p(int64(1)), ProcMount: &defaultProc},
			want: want(&runtimeapi.LinuxContainerSecurityContext{RunAsUser: &runtimeapi.Int64Value{Value: 1}}),
		},
		{
			name:      "seccompDefault makes RuntimeDefault the default",
			seccompOn: true, imageUID: p(int64(0)),
			want: want(&runtimeapi.LinuxContainerSecurityContext{RunAsUser: &runtimeapi.Int64Value{Value: 0}, Seccomp: runtimeDefault}),
		},
		{
			name: "pod seccomp RuntimeDefault",
			pod:  &v1.PodSecurityContext{RunAsUser: p(int64(1)), SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}},
			want: want(&runtimeapi.LinuxContainerSecurityContext{RunAsUser: &runtimeapi.Int64Value{Value: 1}, Seccomp: runtimeDefault}),
		},
		{
			name: "container seccomp Unconfined overrides the pod and seccompDefault",
			pod:  &v1.PodSecurityContext{RunAsUser: p(int64(1)), SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}},
			c:    &v1.SecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeUnconfined}}, seccompOn: true,
			want: want(&runtimeapi.LinuxContainerSecurityContext{RunAsUser: &runtimeapi.Int64Value{Value: 1}}),
		},
		{
			name: "Localhost profile below the seccomp root",
			c:    &v1.SecurityContext{RunAsUser: p(int64(1)), SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: p("profiles/audit.json")}},
			want: want(&runtimeapi.LinuxContainerSecurityContext{
				RunAsUser: &runtimeapi.Int64Value{Value: 1},
				Seccomp:   &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: "/var/lib/kubelet/seccomp/profiles/audit.json"},
			}),
		},
		{
			name: "host namespaces", hostNet: true, hostPID: true,
			c: &v1.SecurityContext{RunAsUser: p(int64(1))},
			want: want(&runtimeapi.LinuxContainerSecurityContext{
				RunAsUser:        &runtimeapi.Int64Value{Value: 1},
				NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE, Pid: runtimeapi.NamespaceMode_NODE, Ipc: runtimeapi.NamespaceMode_POD},
			}),
		},
		{
			name: "shareProcessNamespace", sharePID: true,
			c: &v1.SecurityContext{RunAsUser: p(int64(1))},
			want: want(&runtimeapi.LinuxContainerSecurityContext{
				RunAsUser:        &runtimeapi.Int64Value{Value: 1},
				NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_POD, Ipc: runtimeapi.NamespaceMode_POD},
			}),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod(v1.RestartPolicyAlways, nil, "c")
			pod.Spec.SecurityContext = tc.pod
			pod.Spec.HostNetwork = tc.hostNet
			pod.Spec.HostPID = tc.hostPID
			if tc.sharePID {
				pod.Spec.ShareProcessNamespace = p(true)
			}
			c := &pod.Spec.Containers[0]
			c.SecurityContext = tc.c
			got, err := linuxContainerSecurity(pod, effectiveSecurityContext(pod, c), tc.imageUID, tc.imageUser, "/var/lib/kubelet/seccomp", tc.seccompOn)
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(tc.want, got) {
				t.Errorf("security context:\n got %s\nwant %s", prototext.Format(got), prototext.Format(tc.want))
			}
			// proto.Equal does not tell nil from empty, the runtime does:
			// nil keeps its own defaults, empty masks nothing.
			if tc.want.MaskedPaths != nil && (got.MaskedPaths == nil || got.ReadonlyPaths == nil) {
				t.Errorf("masked/read-only paths are nil, want them set (empty for Unmasked)")
			}
		})
	}
}

func TestLocalhostSeccompNeedsProfile(t *testing.T) {
	_, err := seccompProfile(&v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost}, "/root/seccomp", false)
	if err == nil {
		t.Fatal("Localhost profile without a file accepted")
	}
}

// The effective context must not alias the pod's.
func TestEffectiveSecurityContextCopies(t *testing.T) {
	pod := testPod(v1.RestartPolicyAlways, nil, "c")
	pod.Spec.SecurityContext = &v1.PodSecurityContext{RunAsUser: p(int64(5))}
	eff := effectiveSecurityContext(pod, &pod.Spec.Containers[0])
	*eff.RunAsUser = 7
	if *pod.Spec.SecurityContext.RunAsUser != 5 {
		t.Error("effective security context aliases the pod's")
	}
}

// Messages of upstream verifyRunAsNonRoot
// (pkg/kubelet/kuberuntime/security_context_others.go).
func TestVerifyRunAsNonRoot(t *testing.T) {
	tests := []struct {
		name     string
		pod      *v1.PodSecurityContext
		c        *v1.SecurityContext
		uid      *int64
		username string
		wantErr  string
	}{
		{name: "not asked", uid: p(int64(0))},
		{name: "runAsNonRoot false", c: &v1.SecurityContext{RunAsNonRoot: p(false)}, uid: p(int64(0))},
		{
			name: "image root", pod: &v1.PodSecurityContext{RunAsNonRoot: p(true)}, uid: p(int64(0)),
			wantErr: `container has runAsNonRoot and image will run as root (pod: "p_default(uid1)", container: c)`,
		},
		{name: "image non-root", pod: &v1.PodSecurityContext{RunAsNonRoot: p(true)}, uid: p(int64(1000))},
		{name: "runAsUser non-root wins over image root", c: &v1.SecurityContext{RunAsNonRoot: p(true), RunAsUser: p(int64(1000))}, uid: p(int64(0))},
		{
			name: "runAsUser root", c: &v1.SecurityContext{RunAsNonRoot: p(true), RunAsUser: p(int64(0))},
			wantErr: `container's runAsUser breaks non-root policy (pod: "p_default(uid1)", container: c)`,
		},
		{
			name: "non-numeric image user", pod: &v1.PodSecurityContext{RunAsNonRoot: p(true)}, username: "app",
			wantErr: `container has runAsNonRoot and image has non-numeric user (app), cannot verify user is non-root (pod: "p_default(uid1)", container: c)`,
		},
		{
			name: "container false overrides pod true", pod: &v1.PodSecurityContext{RunAsNonRoot: p(true)},
			c: &v1.SecurityContext{RunAsNonRoot: p(false)}, uid: p(int64(0)),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod(v1.RestartPolicyAlways, nil, "c")
			pod.Spec.SecurityContext = tc.pod
			c := &pod.Spec.Containers[0]
			c.SecurityContext = tc.c
			err := verifyRunAsNonRoot(pod, c, effectiveSecurityContext(pod, c), tc.uid, tc.username)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.wantErr {
				t.Errorf("verifyRunAsNonRoot = %q, want %q", got, tc.wantErr)
			}
		})
	}
}

// A container that would run as root under runAsNonRoot waits with
// CreateContainerConfigError and the upstream message; with a non-root
// image user it runs as that user.
func TestSyncRunAsNonRoot(t *testing.T) {
	h := newHarness(t)
	pod := testPod(v1.RestartPolicyAlways, nil, "c")
	pod.Spec.Containers[0].Image = "busybox:1.35"
	pod.Spec.SecurityContext = &v1.PodSecurityContext{RunAsNonRoot: p(true)}
	if _, err := h.syncer.SyncPod(h.ctx, podworker.UpdateCreate, pod); err == nil {
		t.Fatal("SyncPod started a root container under runAsNonRoot")
	}
	st, _ := h.status.GetPodStatus(pod.UID)
	w := findStatus(st, "c").State.Waiting
	wantMsg := `container has runAsNonRoot and image will run as root (pod: "p_default(uid1)", container: c)`
	if w == nil || w.Reason != ReasonCreateContainerConfigError || w.Message != wantMsg {
		t.Fatalf("waiting = %+v, want %s %q", w, ReasonCreateContainerConfigError, wantMsg)
	}
	if n := len(h.containers("c")); n != 0 {
		t.Errorf("%d containers created, want 0", n)
	}

	h.fake.SetImageUser("busybox:1.35", p(int64(1000)), "")
	h.sync(pod)
	c := h.running("c")
	if u := c.Config.GetLinux().GetSecurityContext().GetRunAsUser(); u == nil || u.GetValue() != 1000 {
		t.Errorf("runAsUser = %v, want the image's 1000", u)
	}
}

// The sandbox carries the pod's user, groups (fsGroup first), sysctls and
// seccomp profile, and is privileged when a container is (containerd
// refuses privileged containers in an unprivileged sandbox).
func TestSandboxSecurity(t *testing.T) {
	h := newHarness(t)
	pod := testPod(v1.RestartPolicyAlways, []string{"init"}, "c")
	pod.Spec.InitContainers[0].SecurityContext = &v1.SecurityContext{Privileged: p(true)}
	pod.Spec.SecurityContext = &v1.PodSecurityContext{
		RunAsUser: p(int64(1000)), RunAsGroup: p(int64(3000)), FSGroup: p(int64(2000)), SupplementalGroups: []int64{4000},
		SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault},
		Sysctls:        []v1.Sysctl{{Name: "kernel.shm_rmid_forced", Value: "1"}},
	}
	cfg, err := h.syncer.sandboxConfig(pod, 0)
	if err != nil {
		t.Fatal(err)
	}
	wantSC := &runtimeapi.LinuxSandboxSecurityContext{
		NamespaceOptions:   podNamespaces,
		RunAsUser:          &runtimeapi.Int64Value{Value: 1000},
		RunAsGroup:         &runtimeapi.Int64Value{Value: 3000},
		SupplementalGroups: []int64{2000, 4000},
		Privileged:         true,
		Seccomp:            runtimeDefault,
	}
	if got := cfg.GetLinux().GetSecurityContext(); !proto.Equal(wantSC, got) {
		t.Errorf("sandbox security context:\n got %s\nwant %s", prototext.Format(got), prototext.Format(wantSC))
	}
	if got := cfg.GetLinux().GetSysctls(); got["kernel.shm_rmid_forced"] != "1" || len(got) != 1 {
		t.Errorf("sysctls = %v", got)
	}

	pod.Spec.SecurityContext.SeccompProfile = &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost}
	if _, err := h.syncer.sandboxConfig(pod, 0); err == nil || !strings.Contains(err.Error(), "localhostProfile") {
		t.Errorf("sandboxConfig with an empty Localhost profile = %v, want an error", err)
	}
}
