package cgroups

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	ocgroups "github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/systemd"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// systemdManager is a Manager with the systemd driver on a fake layout;
// its D-Bus side is never reached by the tests that use it.
func systemdManager(t *testing.T, opts Options) *Manager {
	t.Helper()
	opts.Driver = DriverSystemd
	m, err := newUnchecked(opts)
	if err != nil {
		t.Fatalf("newUnchecked: %v", err)
	}
	return m
}

// The names are upstream's: CgroupName.ToSystemd of [kubepods burstable
// pod<uid>] with "-" escaped as "_" (pkg/kubelet/cm/cgroup_manager_linux.go),
// and the cgroup_parent the kubelet passes in the sandbox config with the
// systemd driver is the pod's slice name.
func TestSystemdNames(t *testing.T) {
	m := systemdManager(t, Options{Root: fakeV1(t)})
	const uid = "0f6c9b4e-1d2a-4c55-9a3e-2b8f1d7c6e11"
	const esc = "0f6c9b4e_1d2a_4c55_9a3e_2b8f1d7c6e11"
	tests := []struct {
		res        v1.ResourceRequirements
		wantParent string
		wantPath   string
	}{
		{guaranteed, "kubepods-pod" + esc + ".slice", "/kubepods.slice/kubepods-pod" + esc + ".slice"},
		{burstable, "kubepods-burstable-pod" + esc + ".slice", "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + esc + ".slice"},
		{bestEffort, "kubepods-besteffort-pod" + esc + ".slice", "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + esc + ".slice"},
	}
	for _, tt := range tests {
		p := testPod(uid, tt.res)
		if got := m.PodCgroupParent(p); got != tt.wantParent {
			t.Errorf("PodCgroupParent(%s pod) = %q, want %q", qosOf(p), got, tt.wantParent)
		}
		if got := m.PodCgroupPath(p); got != tt.wantPath {
			t.Errorf("PodCgroupPath(%s pod) = %q, want %q", qosOf(p), got, tt.wantPath)
		}
	}
	if got, want := m.qosPaths(), []string{
		"/kubepods.slice",
		"/kubepods.slice/kubepods-burstable.slice",
		"/kubepods.slice/kubepods-besteffort.slice",
	}; !reflect.DeepEqual(got, want) {
		t.Errorf("qosPaths() = %v, want %v", got, want)
	}
	if got := m.Driver(); got != DriverSystemd {
		t.Errorf("Driver() = %q, want systemd", got)
	}
	// The cgroupfs driver keeps its paths, and its parent is the path.
	fs := newManager(t, Options{Root: fakeV1(t)})
	p := testPod(uid, burstable)
	if got, want := fs.PodCgroupParent(p), "/kubepods/burstable/pod"+uid; got != want || fs.PodCgroupPath(p) != want {
		t.Errorf("cgroupfs PodCgroupParent = %q, PodCgroupPath = %q, want %q", got, fs.PodCgroupPath(p), want)
	}
	if got := fs.Driver(); got != DriverCgroupfs {
		t.Errorf("Driver() = %q, want cgroupfs", got)
	}
}

// runc expands the pod's slice name to the path heartlet creates, so the
// containers land in heartlet's slices.
func TestSystemdPathMatchesRunc(t *testing.T) {
	m := systemdManager(t, Options{Root: fakeV1(t)})
	for _, p := range []*v1.Pod{testPod("a-b-c", guaranteed), testPod("a-b-c", burstable), testPod("x", bestEffort)} {
		got, err := systemd.ExpandSlice(m.PodCgroupParent(p))
		if err != nil {
			t.Fatalf("runc ExpandSlice(%q): %v", m.PodCgroupParent(p), err)
		}
		if want := m.PodCgroupPath(p); got != want {
			t.Errorf("runc expands %q to %q, heartlet creates %q", m.PodCgroupParent(p), got, want)
		}
	}
}

func qosOf(p *v1.Pod) string { return string(p.UID) + "/" + p.Spec.Containers[0].Name }

func TestSliceConfig(t *testing.T) {
	tests := []struct {
		path, name, parent string
	}{
		{"/kubepods.slice", "kubepods.slice", "-.slice"},
		{"/kubepods.slice/kubepods-burstable.slice", "kubepods-burstable.slice", "kubepods.slice"},
		{"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice", "kubepods-burstable-pod1.slice", "kubepods-burstable.slice"},
		{"/system.slice", "system.slice", "-.slice"},
	}
	for _, tt := range tests {
		c := sliceConfig(tt.path, nil)
		if c.Name != tt.name || c.Parent != tt.parent || !c.Systemd {
			t.Errorf("sliceConfig(%q) = name %q parent %q systemd %t, want %q %q true", tt.path, c.Name, c.Parent, c.Systemd, tt.name, tt.parent)
		}
		if c.Resources == nil || !c.Resources.SkipDevices {
			t.Errorf("sliceConfig(%q) would let runc set a device policy on the slice", tt.path)
		}
	}
}

func TestSystemdResources(t *testing.T) {
	tests := []struct {
		name string
		in   Resources
		want ocgroups.Resources
	}{
		{"nothing set leaves everything", Resources{}, ocgroups.Resources{}},
		{"limits", Resources{CPUShares: ptr(uint64(512)), CPUQuota: ptr(int64(50000)), CPUPeriod: ptr(uint64(100000)), Memory: ptr(int64(128 << 20)), PidsMax: ptr(int64(100))},
			ocgroups.Resources{CpuShares: 512, CpuQuota: 50000, CpuPeriod: 100000, Memory: 128 << 20, PidsLimit: ptr(int64(100))}},
		{"unlimited stays unlimited", Resources{CPUQuota: ptr(int64(-1)), Memory: ptr(int64(-1)), PidsMax: ptr(int64(-1))},
			ocgroups.Resources{CpuQuota: -1, Memory: -1, PidsLimit: ptr(int64(-1))}},
		// Zero is "leave" for runc: a zero limit must become unlimited,
		// never "no change".
		{"zero limits are unlimited", Resources{CPUQuota: ptr(int64(0)), Memory: ptr(int64(0)), PidsMax: ptr(int64(0))},
			ocgroups.Resources{CpuQuota: -1, Memory: -1, PidsLimit: ptr(int64(-1))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := systemdResources(tt.in)
			want := tt.want
			want.SkipDevices, want.SkipFreezeOnSet = true, true
			if !reflect.DeepEqual(*got, want) {
				t.Errorf("systemdResources(%+v) = %+v, want %+v", tt.in, *got, want)
			}
		})
	}
}

// The pod limits reach systemd as the properties upstream's do: runc turns
// the resources into MemoryLimit, CPUShares, CPUQuotaPerSecUSec and
// TasksMax. Checked on the values runc receives, since the properties
// themselves need a D-Bus connection.
func TestSystemdPodResources(t *testing.T) {
	m := systemdManager(t, Options{Root: fakeV1(t), PodPidsLimit: 64})
	got := systemdResources(m.PodResources(testPod("g", guaranteed)))
	if got.Memory != 128<<20 || got.CpuShares != 512 || got.CpuQuota != 50000 || got.CpuPeriod != 100000 || got.PidsLimit == nil || *got.PidsLimit != 64 {
		t.Errorf("guaranteed pod: %+v, want memory 128Mi, 512 shares, quota 50000/100000, 64 tasks", *got)
	}
	got = systemdResources(m.PodResources(testPod("b", bestEffort)))
	if got.Memory != -1 || got.CpuShares != 2 || got.CpuQuota != -1 {
		t.Errorf("besteffort pod: %+v, want unlimited memory and quota, 2 shares", *got)
	}
	if got.PidsLimit == nil || *got.PidsLimit != 64 {
		t.Errorf("besteffort pod: pids limit %v, want 64", got.PidsLimit)
	}
}

func TestCheckSystemdRoot(t *testing.T) {
	for _, root := range []string{"", "/", "//"} {
		if err := CheckSystemdRoot(root); err != nil {
			t.Errorf("CheckSystemdRoot(%q) = %v, want nil", root, err)
		}
	}
	for _, root := range []string{"/kube", "/kube.slice", "/a/b"} {
		if err := CheckSystemdRoot(root); err == nil || !strings.Contains(err.Error(), "cgroupRoot") {
			t.Errorf("CheckSystemdRoot(%q) = %v, want an error naming cgroupRoot", root, err)
		}
	}
}

func TestCheckDriver(t *testing.T) {
	for _, d := range []string{"", "cgroupfs", "systemd"} {
		if err := CheckDriver(d); err != nil {
			t.Errorf("CheckDriver(%q) = %v", d, err)
		}
	}
	for _, d := range []string{"Systemd", "cgroup", "none"} {
		if err := CheckDriver(d); err == nil {
			t.Errorf("CheckDriver(%q) = nil, want an error", d)
		}
	}
}

// Without systemd as init the driver is refused at start with the reason.
func TestNewSystemdWithoutSystemd(t *testing.T) {
	if systemd.IsRunningSystemd() {
		t.Skip("systemd runs as init here; the node container test covers the driver")
	}
	_, err := New(Options{Root: fakeV1(t), Driver: DriverSystemd})
	if err == nil || !strings.Contains(err.Error(), "systemd is not running") {
		t.Fatalf("New(systemd) without systemd = %v, want an error saying systemd is not running", err)
	}
}

// Listing and the busy check read the slices' directories.
func TestSystemdListAdoptBusy(t *testing.T) {
	ctx := context.Background()
	root := fakeV1(t)
	m := systemdManager(t, Options{Root: root})
	const uid = "1a-2b"
	podDir := filepath.Join(root, "memory", "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1a_2b.slice")
	mustWrite(t, filepath.Join(podDir, "cri-containerd-abc.scope", fileProcs), "77\n")
	mustMkdir(t, filepath.Join(root, "cpu", "kubepods.slice/kubepods-pod3c.slice"))
	mustMkdir(t, filepath.Join(root, "pids", "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod4d_5e.slice"))
	// Not pod slices.
	mustMkdir(t, filepath.Join(root, "cpu", "kubepods.slice/kubepods-burstable.slice"))
	mustMkdir(t, filepath.Join(root, "cpu", "kubepods.slice/kubepods-burstable.slice/cri-containerd-1.scope"))
	mustMkdir(t, filepath.Join(root, "cpu", "kubepods/burstable/pod9"))

	got, err := m.ListPods(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []types.UID{uid, "3c", "4d-5e"}; !reflect.DeepEqual(got, want) {
		t.Errorf("ListPods() = %v, want %v", got, want)
	}
	// A container still runs: nothing is stopped, whatever the driver.
	err = m.RemovePod(ctx, uid)
	if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "kubepods-burstable-pod1a_2b.slice") {
		t.Errorf("RemovePod of a busy pod = %v, want ErrBusy naming its slice", err)
	}
	if !exists(podDir) {
		t.Error("a busy pod's slice was removed")
	}
}

func TestResolveDriver(t *testing.T) {
	tests := []struct {
		name                    string
		configured, theirs, src string
		fromCRI                 bool
		want, wantErr           string
	}{
		{"runtime silent keeps the configured", "systemd", "", "", false, "systemd", ""},
		{"default is cgroupfs", "", "", "", false, "cgroupfs", ""},
		{"agree", "systemd", "systemd", "containerd", false, "systemd", ""},
		{"agree on the default", "", "cgroupfs", "containerd", false, "cgroupfs", ""},
		{"containerd config disagrees", "systemd", "cgroupfs", `containerd runtime "runc" SystemdCgroup = false`, false, "", "SystemdCgroup = true"},
		{"containerd config disagrees the other way", "cgroupfs", "systemd", `containerd runtime "runc" SystemdCgroup = true`, false, "", "set cgroupDriver: systemd"},
		{"CRI RuntimeConfig wins", "cgroupfs", "systemd", "CRI RuntimeConfig", true, "systemd", ""},
		{"unknown runtime driver", "cgroupfs", "weird", "CRI", true, "", "unknown cgroup driver"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ResolveDriver(tt.configured, tt.theirs, tt.src, tt.fromCRI)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ResolveDriver = %q, %v; want an error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("ResolveDriver = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestKubepodsAndPodPaths(t *testing.T) {
	if got := KubepodsPath(DriverSystemd, "/"); got != "/kubepods.slice" {
		t.Errorf("KubepodsPath(systemd) = %q", got)
	}
	if got := KubepodsPath(DriverCgroupfs, "/r"); got != "/r/kubepods" {
		t.Errorf("KubepodsPath(cgroupfs, /r) = %q", got)
	}
	if got, want := PodPaths(DriverSystemd, "", "1-2"), []string{
		"/kubepods.slice/kubepods-pod1_2.slice",
		"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1_2.slice",
		"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1_2.slice",
	}; !reflect.DeepEqual(got, want) {
		t.Errorf("PodPaths(systemd) = %v, want %v", got, want)
	}
	if got, want := PodPaths("", "/", "1-2"), []string{"/kubepods/pod1-2", "/kubepods/burstable/pod1-2", "/kubepods/besteffort/pod1-2"}; !reflect.DeepEqual(got, want) {
		t.Errorf("PodPaths(cgroupfs) = %v, want %v", got, want)
	}
}
