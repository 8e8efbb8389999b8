//go:build integration

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// clients are the three CSI services of a test driver.
type clients struct {
	csi.ControllerClient
	csi.NodeClient
}

func dial(t *testing.T, td *testDriver) clients {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+td.cfg.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dialing the driver: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	return clients{csi.NewControllerClient(conn), csi.NewNodeClient(conn)}
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func mountCap(flags ...string) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: "ext4", MountFlags: flags}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
}

func blockCap() *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
}

func wantCode(t *testing.T, what string, err error, code codes.Code) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("%s: got %v, want code %s", what, err, code)
	}
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// mountOptions returns the per-mount options of the mount at path.
func mountOptions(t *testing.T, path string) []string {
	t.Helper()
	ms, err := mountinfo.GetMounts(mountinfo.SingleEntryFilter(path))
	if err != nil || len(ms) == 0 {
		t.Fatalf("no mount at %s (%v)", path, err)
	}
	return strings.Split(ms[len(ms)-1].Options, ",")
}

// records reads the driver's record file.
func records(t *testing.T, td *testDriver) []callRecord {
	t.Helper()
	f, err := os.Open(td.cfg.RecordFile)
	if err != nil {
		t.Fatalf("opening the record file: %v", err)
	}
	defer f.Close()
	var out []callRecord
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r callRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("record line %q: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

func TestFilesystemVolume(t *testing.T) {
	td := startDriver(t, nil)
	c, ctx := dial(t, td), testContext(t)
	dir := filepath.Dir(td.cfg.Endpoint)
	vol, err := c.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-fs", VolumeCapabilities: []*csi.VolumeCapability{mountCap()},
		CapacityRange: &csi.CapacityRange{RequiredBytes: 8 << 20}})
	must(t, "CreateVolume", err)
	id := vol.GetVolume().GetVolumeId()
	if vol.GetVolume().GetCapacityBytes() != 8<<20 || vol.GetVolume().GetAccessibleTopology()[0].GetSegments()[td.cfg.TopologyKey] != td.cfg.NodeID {
		t.Fatalf("CreateVolume = %v", vol)
	}
	staging, rw, ro := filepath.Join(dir, "staging"), filepath.Join(dir, "pods", "a", "vol"), filepath.Join(dir, "pods", "b", "vol")
	_, err = c.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: mountCap("bogus")})
	wantCode(t, "NodeStageVolume with an unknown mount flag", err, codes.InvalidArgument)
	_, err = c.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, StagingTargetPath: staging, TargetPath: rw, VolumeCapability: mountCap()})
	wantCode(t, "NodePublishVolume before NodeStageVolume", err, codes.FailedPrecondition)
	_, err = c.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: mountCap("nosuid")})
	must(t, "NodeStageVolume", err)
	_, err = c.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, StagingTargetPath: staging, TargetPath: rw, VolumeCapability: mountCap("noexec")})
	must(t, "NodePublishVolume", err)
	_, err = c.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, StagingTargetPath: staging, TargetPath: ro, VolumeCapability: mountCap(), Readonly: true})
	must(t, "NodePublishVolume readonly", err)
	_, err = c.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, StagingTargetPath: staging, TargetPath: ro, VolumeCapability: mountCap()})
	wantCode(t, "NodePublishVolume of the same target read-write", err, codes.AlreadyExists)
	if o := mountOptions(t, rw); !slices.Contains(o, "noexec") || !slices.Contains(o, "rw") {
		t.Errorf("read-write target options %v, want rw and noexec", o)
	}
	if o := mountOptions(t, ro); !slices.Contains(o, "ro") {
		t.Errorf("read-only target options %v, want ro", o)
	}
	data := []byte(strings.Repeat("x", 64<<10))
	must(t, "writing through the read-write target", os.WriteFile(filepath.Join(rw, "data"), data, 0o644))
	got, err := os.ReadFile(filepath.Join(ro, "data"))
	if err != nil || string(got) != string(data) {
		t.Fatalf("reading through the read-only target: %d bytes, %v", len(got), err)
	}
	if err := os.WriteFile(filepath.Join(ro, "other"), data, 0o644); !errors.Is(err, unix.EROFS) {
		t.Fatalf("writing through the read-only target: %v, want EROFS", err)
	}
	st, err := c.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: id, VolumePath: rw})
	must(t, "NodeGetVolumeStats", err)
	bytes := st.GetUsage()[0]
	if bytes.GetUnit() != csi.VolumeUsage_BYTES || bytes.GetTotal() != 8<<20 || bytes.GetUsed() < int64(len(data)) || bytes.GetAvailable() != bytes.GetTotal()-bytes.GetUsed() {
		t.Errorf("byte usage %v after writing %d bytes", bytes, len(data))
	}
	if inodes := st.GetUsage()[1]; inodes.GetUnit() != csi.VolumeUsage_INODES || inodes.GetUsed() < 2 {
		t.Errorf("inode usage %v", inodes)
	}
	exp, err := c.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: id, CapacityRange: &csi.CapacityRange{RequiredBytes: 16 << 20}})
	must(t, "ControllerExpandVolume", err)
	if exp.GetCapacityBytes() != 16<<20 || !exp.GetNodeExpansionRequired() {
		t.Errorf("ControllerExpandVolume = %v", exp)
	}
	nexp, err := c.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: id, VolumePath: rw, CapacityRange: &csi.CapacityRange{RequiredBytes: 16 << 20}})
	must(t, "NodeExpandVolume", err)
	if nexp.GetCapacityBytes() != 16<<20 {
		t.Errorf("NodeExpandVolume = %v", nexp)
	}
	_, err = c.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: staging})
	wantCode(t, "NodeUnstageVolume while published", err, codes.FailedPrecondition)
	_, err = c.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "vol-unknown", TargetPath: rw})
	wantCode(t, "NodeUnpublishVolume of an unknown volume at a mounted target", err, codes.NotFound)
	if ok, _ := mounted(rw); !ok {
		t.Fatal("an unpublish naming another volume unmounted the target")
	}
	for _, p := range []string{rw, ro} {
		_, err = c.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: p})
		must(t, "NodeUnpublishVolume", err)
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("target %s left after NodeUnpublishVolume: %v", p, err)
		}
	}
	_, err = c.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: staging})
	must(t, "NodeUnstageVolume", err)
	if ok, _ := mounted(staging); ok {
		t.Errorf("staging path still mounted")
	}
	_, err = c.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id})
	must(t, "DeleteVolume", err)
	if _, err := os.Stat(stateDirs{td.cfg.StateDir}.volumeDir(id)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("volume directory left after DeleteVolume: %v", err)
	}
}

func TestBlockVolume(t *testing.T) {
	td := startDriver(t, nil)
	c, ctx := dial(t, td), testContext(t)
	dir := filepath.Dir(td.cfg.Endpoint)
	vol, err := c.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-block", VolumeCapabilities: []*csi.VolumeCapability{blockCap()},
		CapacityRange: &csi.CapacityRange{RequiredBytes: 16 << 20}})
	must(t, "CreateVolume", err)
	id := vol.GetVolume().GetVolumeId()
	staging, rw, ro := filepath.Join(dir, "staging"), filepath.Join(dir, "publish", "a"), filepath.Join(dir, "publish", "b")
	_, err = c.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: mountCap()})
	wantCode(t, "NodeStageVolume of a block volume as a filesystem", err, codes.InvalidArgument)
	_, err = c.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: blockCap()})
	must(t, "NodeStageVolume", err)
	_, err = c.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, StagingTargetPath: staging, TargetPath: rw, VolumeCapability: blockCap()})
	must(t, "NodePublishVolume", err)
	_, err = c.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, StagingTargetPath: staging, TargetPath: ro, VolumeCapability: blockCap(), Readonly: true})
	must(t, "NodePublishVolume readonly", err)
	f, err := os.OpenFile(rw, os.O_RDWR, 0)
	must(t, "opening the read-write device", err)
	_, err = f.WriteAt([]byte("heartlet"), 4096)
	must(t, "writing the device", err)
	must(t, "syncing the device", f.Sync())
	f.Close()
	if size := deviceSize(t, rw); size != 16<<20 {
		t.Errorf("device size %d, want %d", size, 16<<20)
	}
	rf, err := os.Open(ro)
	must(t, "opening the read-only device", err)
	buf := make([]byte, 8)
	_, err = rf.ReadAt(buf, 4096)
	rf.Close()
	if err != nil || string(buf) != "heartlet" {
		t.Fatalf("reading the read-only device: %q, %v", buf, err)
	}
	// A read-only loop device may open for writing, but never writes.
	if wf, err := os.OpenFile(ro, os.O_WRONLY, 0); err == nil {
		_, werr := wf.WriteAt([]byte("overwrite"), 4096)
		serr := wf.Sync()
		wf.Close()
		if werr == nil && serr == nil {
			t.Fatal("wrote the read-only device")
		}
	}
	_, err = c.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: id, CapacityRange: &csi.CapacityRange{RequiredBytes: 32 << 20}})
	must(t, "ControllerExpandVolume", err)
	_, err = c.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: id, VolumePath: rw, CapacityRange: &csi.CapacityRange{RequiredBytes: 32 << 20}})
	must(t, "NodeExpandVolume", err)
	if size := deviceSize(t, rw); size != 32<<20 {
		t.Errorf("device size after expansion %d, want %d", size, 32<<20)
	}
	var loops []string
	td2 := stateDirs{td.cfg.StateDir}
	st, err := loadState(td2.stateFile())
	must(t, "loading the state", err)
	for _, dev := range st.Volumes[id].Staged {
		loops = append(loops, dev)
	}
	loops = append(loops, st.Volumes[id].Targets[ro].Loop)
	for _, p := range []string{rw, ro} {
		_, err = c.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: p})
		must(t, "NodeUnpublishVolume", err)
	}
	_, err = c.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: staging})
	must(t, "NodeUnstageVolume", err)
	for _, dev := range loops {
		if b := loopBacking(dev); b == td2.blockFile(id) {
			t.Errorf("loop device %s still attached to the volume", dev)
		}
	}
	_, err = c.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id})
	must(t, "DeleteVolume", err)
}

func deviceSize(t *testing.T, path string) int64 {
	t.Helper()
	f, err := os.Open(path)
	must(t, "opening the device", err)
	defer f.Close()
	size, err := f.Seek(0, io.SeekEnd)
	must(t, "seeking to the device's end", err)
	return size
}

func TestEphemeralVolumeAndPodInfo(t *testing.T) {
	td := startDriver(t, nil)
	c, ctx := dial(t, td), testContext(t)
	target := filepath.Join(filepath.Dir(td.cfg.Endpoint), "pod", "inline")
	vctx := map[string]string{
		ephemeralKey:                       "true",
		"size":                             "4Mi",
		"csi.storage.k8s.io/pod.name":      "web-0",
		"csi.storage.k8s.io/pod.namespace": "default",
		"csi.storage.k8s.io/serviceAccount.tokens": `{"aud":{"token":"t","expirationTimestamp":"2026-12-05T00:00:00Z"}}`,
	}
	_, err := c.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "csi-abc", TargetPath: target, VolumeCapability: mountCap(),
		VolumeContext: map[string]string{ephemeralKey: "true", "color": "blue"}})
	wantCode(t, "an ephemeral volume with an unknown attribute", err, codes.InvalidArgument)
	_, err = c.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "csi-abc", TargetPath: target, VolumeCapability: mountCap(), VolumeContext: vctx})
	must(t, "NodePublishVolume", err)
	must(t, "writing the inline volume", os.WriteFile(filepath.Join(target, "f"), []byte("x"), 0o644))
	st, err := c.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: "csi-abc", VolumePath: target})
	must(t, "NodeGetVolumeStats", err)
	if st.GetUsage()[0].GetTotal() != 4<<20 {
		t.Errorf("capacity %d, want the size attribute's 4Mi", st.GetUsage()[0].GetTotal())
	}
	_, err = c.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "csi-abc", TargetPath: target})
	must(t, "NodeUnpublishVolume", err)
	_, err = c.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "csi-abc", TargetPath: target})
	must(t, "repeating NodeUnpublishVolume of the deleted inline volume", err)
	if _, err := os.Stat(stateDirs{td.cfg.StateDir}.volumeDir("csi-abc")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the inline volume outlived its publication: %v", err)
	}
	var pub *callRecord
	for _, r := range records(t, td) {
		if r.Method == "NodePublishVolume" && r.Error == "" {
			pub = &r
		}
	}
	if pub == nil || pub.VolumeContext["csi.storage.k8s.io/pod.name"] != "web-0" || pub.VolumeContext["csi.storage.k8s.io/serviceAccount.tokens"] == "" || pub.TargetPath != target {
		t.Fatalf("recorded publication %+v", pub)
	}
}

func TestRequireAttachAndMountGroup(t *testing.T) {
	td := startDriver(t, func(c *config) { c.RequireAttach, c.VolumeMountGroup = true, true })
	c, ctx := dial(t, td), testContext(t)
	dir := filepath.Dir(td.cfg.Endpoint)
	vol, err := c.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-attach", VolumeCapabilities: []*csi.VolumeCapability{mountCap()}})
	must(t, "CreateVolume", err)
	id, staging := vol.GetVolume().GetVolumeId(), filepath.Join(dir, "staging")
	withGroup := mountCap()
	withGroup.GetMount().VolumeMountGroup = "4321"
	_, err = c.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: withGroup})
	wantCode(t, "NodeStageVolume before ControllerPublishVolume", err, codes.FailedPrecondition)
	pub, err := c.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: id, NodeId: td.cfg.NodeID, VolumeCapability: mountCap()})
	must(t, "ControllerPublishVolume", err)
	_, err = c.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: withGroup})
	wantCode(t, "NodeStageVolume without the publish context", err, codes.FailedPrecondition)
	_, err = c.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: withGroup, PublishContext: pub.GetPublishContext()})
	must(t, "NodeStageVolume", err)
	var st unix.Stat_t
	must(t, "stat of the staged volume", unix.Stat(staging, &st))
	if st.Gid != 4321 || st.Mode&unix.S_ISGID == 0 || st.Mode&0o070 != 0o070 {
		t.Errorf("staged volume root gid %d mode %o, want group 4321 with setgid and g+rwx", st.Gid, st.Mode)
	}
	_, err = c.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: staging})
	must(t, "NodeUnstageVolume", err)
	_, err = c.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: id, NodeId: td.cfg.NodeID})
	must(t, "ControllerUnpublishVolume", err)
}

func TestSurvivesRestart(t *testing.T) {
	td := startDriver(t, nil)
	c, ctx := dial(t, td), testContext(t)
	dir := filepath.Dir(td.cfg.Endpoint)
	vol, err := c.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-restart", VolumeCapabilities: []*csi.VolumeCapability{mountCap()}})
	must(t, "CreateVolume", err)
	id, staging, target := vol.GetVolume().GetVolumeId(), filepath.Join(dir, "staging"), filepath.Join(dir, "target")
	_, err = c.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: mountCap()})
	must(t, "NodeStageVolume", err)
	_, err = c.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, StagingTargetPath: staging, TargetPath: target, VolumeCapability: mountCap()})
	must(t, "NodePublishVolume", err)
	must(t, "writing", os.WriteFile(filepath.Join(target, "kept"), []byte("yes"), 0o644))

	td.restart(t)
	// A new connection: one made before the restart may still carry a
	// call into the stopped server's closing transport.
	c = dial(t, td)

	if b, err := os.ReadFile(filepath.Join(target, "kept")); err != nil || string(b) != "yes" {
		t.Fatalf("the published volume after the driver's restart: %q, %v", b, err)
	}
	_, err = c.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, StagingTargetPath: staging, TargetPath: target, VolumeCapability: mountCap()})
	must(t, "repeating NodePublishVolume after the restart", err)
	again, err := c.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-restart", VolumeCapabilities: []*csi.VolumeCapability{mountCap()}})
	must(t, "repeating CreateVolume after the restart", err)
	if again.GetVolume().GetVolumeId() != id {
		t.Fatalf("CreateVolume after the restart made a new volume %s, want %s", again.GetVolume().GetVolumeId(), id)
	}
	_, err = c.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target})
	must(t, "NodeUnpublishVolume", err)
	_, err = c.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: staging})
	must(t, "NodeUnstageVolume", err)
	if ok, _ := mounted(staging); ok {
		t.Fatal("staging path still mounted after NodeUnstageVolume")
	}
}
