package main

import (
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func testDriverConfig() *driver {
	cfg := defaultConfig()
	cfg.NodeID = "node-a"
	cfg.MaxVolumeSize = 1 << 30
	return &driver{cfg: cfg}
}

func TestParseMountFlags(t *testing.T) {
	for _, tc := range []struct {
		flags []string
		want  uintptr
		ok    bool
	}{
		{nil, 0, true},
		{[]string{"ro", "noexec", "nosuid"}, unix.MS_RDONLY | unix.MS_NOEXEC | unix.MS_NOSUID, true},
		{[]string{"defaults", "rw"}, 0, true},
		{[]string{"noatime", "bogus"}, 0, false},
		{[]string{"uid=1000"}, 0, false}, // filesystem options cannot apply to a bind mount
	} {
		got, err := parseMountFlags(tc.flags)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("parseMountFlags(%v) = %#x, %v; want %#x, ok=%t", tc.flags, got, err, tc.want, tc.ok)
		}
	}
}

func TestCapacityFor(t *testing.T) {
	d := testDriverConfig()
	for _, tc := range []struct {
		name     string
		r        *csi.CapacityRange
		want     int64
		wantCode codes.Code
	}{
		{"no range", nil, defaultCapacity, codes.OK},
		{"required", &csi.CapacityRange{RequiredBytes: 5 << 20}, 5 << 20, codes.OK},
		{"limit below the default", &csi.CapacityRange{LimitBytes: 1 << 20}, 1 << 20, codes.OK},
		{"required above the limit", &csi.CapacityRange{RequiredBytes: 2 << 20, LimitBytes: 1 << 20}, 0, codes.InvalidArgument},
		{"negative", &csi.CapacityRange{RequiredBytes: -1}, 0, codes.InvalidArgument},
		{"too large", &csi.CapacityRange{RequiredBytes: 2 << 30}, 0, codes.OutOfRange},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := d.capacityFor(tc.r)
			if status.Code(err) != tc.wantCode || got != tc.want {
				t.Errorf("capacityFor = %d, %v; want %d, %s", got, err, tc.want, tc.wantCode)
			}
		})
	}
}

func TestCheckCapability(t *testing.T) {
	d := testDriverConfig()
	mode := func(m csi.VolumeCapability_AccessMode_Mode) *csi.VolumeCapability_AccessMode {
		return &csi.VolumeCapability_AccessMode{Mode: m}
	}
	mount := func(m *csi.VolumeCapability_MountVolume) *csi.VolumeCapability_Mount {
		return &csi.VolumeCapability_Mount{Mount: m}
	}
	block := &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}
	for _, tc := range []struct {
		name      string
		c         *csi.VolumeCapability
		wantBlock bool
		ok        bool
	}{
		{"mount", &csi.VolumeCapability{AccessType: mount(&csi.VolumeCapability_MountVolume{}), AccessMode: mode(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)}, false, true},
		{"ext4", &csi.VolumeCapability{AccessType: mount(&csi.VolumeCapability_MountVolume{FsType: "ext4"}), AccessMode: mode(csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER)}, false, true},
		{"block", &csi.VolumeCapability{AccessType: block, AccessMode: mode(csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY)}, true, true},
		{"xfs", &csi.VolumeCapability{AccessType: mount(&csi.VolumeCapability_MountVolume{FsType: "xfs"}), AccessMode: mode(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)}, false, false},
		{"unknown mount flag", &csi.VolumeCapability{AccessType: mount(&csi.VolumeCapability_MountVolume{MountFlags: []string{"x"}}), AccessMode: mode(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)}, false, false},
		{"mount group without the capability", &csi.VolumeCapability{AccessType: mount(&csi.VolumeCapability_MountVolume{VolumeMountGroup: "1000"}), AccessMode: mode(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)}, false, false},
		{"single writer mode", &csi.VolumeCapability{AccessType: block, AccessMode: mode(csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER)}, false, false},
		{"no access mode", &csi.VolumeCapability{AccessType: block}, false, false},
		{"no access type", &csi.VolumeCapability{AccessMode: mode(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)}, false, false},
		{"nil", nil, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := d.checkCapability(tc.c)
			if (err == nil) != tc.ok || (tc.ok && got != tc.wantBlock) {
				t.Errorf("checkCapability = %t, %v; want block=%t ok=%t", got, err, tc.wantBlock, tc.ok)
			}
			if err != nil && status.Code(err) != codes.InvalidArgument {
				t.Errorf("error code %s, want InvalidArgument", status.Code(err))
			}
		})
	}
}

func TestTopologyReachable(t *testing.T) {
	d := testDriverConfig()
	key := d.cfg.TopologyKey
	top := func(seg map[string]string) []*csi.Topology { return []*csi.Topology{{Segments: seg}} }
	for _, tc := range []struct {
		name string
		req  *csi.TopologyRequirement
		want bool
	}{
		{"none", nil, true},
		{"this node", &csi.TopologyRequirement{Requisite: top(map[string]string{key: "node-a"})}, true},
		{"another node", &csi.TopologyRequirement{Requisite: top(map[string]string{key: "node-b"})}, false},
		{"an unknown key too", &csi.TopologyRequirement{Requisite: top(map[string]string{key: "node-a", "zone": "z"})}, false},
		{"preferred only", &csi.TopologyRequirement{Preferred: top(map[string]string{key: "node-a"})}, true},
		{"preferred elsewhere", &csi.TopologyRequirement{Preferred: top(map[string]string{key: "node-b"})}, false},
	} {
		if got := d.topologyReachable(tc.req); got != tc.want {
			t.Errorf("%s: topologyReachable = %t, want %t", tc.name, got, tc.want)
		}
	}
}

func TestStateRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	s, err := loadState(path)
	if err != nil || len(s.Volumes) != 0 {
		t.Fatalf("loading a missing state: %v, %v", s, err)
	}
	s.Volumes["v1"] = &volume{ID: "v1", Name: "pvc-1", Capacity: 42, Block: true,
		Published: map[string]bool{"n": true}, Staged: map[string]string{"/s": "/dev/loop3"},
		Targets: map[string]target{"/t": {ReadOnly: true, StagingPath: "/s", Loop: "/dev/loop4"}}}
	if err := s.save(); err != nil {
		t.Fatal(err)
	}
	got, err := loadState(path)
	if err != nil {
		t.Fatal(err)
	}
	v := got.Volumes["v1"]
	if v == nil || v.Capacity != 42 || !v.Block || !v.Published["n"] || v.Staged["/s"] != "/dev/loop3" || v.Targets["/t"].Loop != "/dev/loop4" ||
		got.byName("pvc-1") != v || got.byName("pvc-2") != nil {
		t.Fatalf("state after a round trip: %+v", v)
	}
}

func TestVolumeIDIsStable(t *testing.T) {
	a, again, b := volumeID("pvc-a"), volumeID("pvc-a"), volumeID("pvc-b")
	if a != again || a == b {
		t.Fatal("volume IDs must be a function of the name")
	}
}
