package volume

import (
	"os"
	"strings"
	"testing"
)

const sampleMountinfo = `21 26 0:20 / /proc rw,relatime - proc proc rw
24 23 0:22 / /dev/shm rw,relatime shared:3 - tmpfs tmpfs rw,size=24683548k
90 26 0:50 / /var/lib/kubelet/pods/u1/volumes/kubernetes.io~secret/my\040secret rw,relatime master:1 shared:7 - tmpfs tmpfs rw,size=1024k
91 26 0:51 / /tmp/back\134slash rw - ext4 /dev/sda1 rw

`

func TestParseMountInfo(t *testing.T) {
	got, err := parseMountInfo([]byte(sampleMountinfo))
	if err != nil {
		t.Fatal(err)
	}
	want := []MountPoint{
		{"/proc", "proc"},
		{"/dev/shm", "tmpfs"},
		{"/var/lib/kubelet/pods/u1/volumes/kubernetes.io~secret/my secret", "tmpfs"},
		{`/tmp/back\slash`, "ext4"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("entry %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestParseMountInfoErrors(t *testing.T) {
	for _, in := range []string{
		"21 26 0:20 / /proc rw,relatime proc proc rw x\n",
		"21 26 0:20 / /proc rw\n",
		"21 26 0:20 / relative rw,relatime - proc proc rw\n",
		`21 26 0:20 / /bad\04 rw,relatime - proc proc rw` + "\n",
		`21 26 0:20 / /bad\999 rw,relatime - proc proc rw` + "\n",
	} {
		if _, err := parseMountInfo([]byte(in)); err == nil {
			t.Errorf("parseMountInfo(%q) succeeded", in)
		}
	}
}

func TestSystemMounterListsThisProcess(t *testing.T) {
	mps, err := NewSystemMounter().List()
	if err != nil {
		t.Skipf("skipping: no readable mount table: %v", err)
	}
	for _, mp := range mps {
		if mp.Path == "/" {
			return
		}
	}
	t.Errorf("root mount missing from %d entries", len(mps))
}

func FuzzParseMountInfo(f *testing.F) {
	f.Add([]byte(sampleMountinfo))
	f.Add([]byte("1 2 3:4 / /a\\0 - x y z\n"))
	f.Add([]byte("1 2 3:4 / /a - - - -\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		mps, err := parseMountInfo(data)
		if err != nil {
			return
		}
		for _, mp := range mps {
			if !strings.HasPrefix(mp.Path, "/") || mp.FSType == "" {
				t.Fatalf("bad entry %+v from %q", mp, data)
			}
		}
	})
}

// The system mounter's single-path check agrees with the mount table of
// this process, without root: a fresh directory is no mount point, /proc
// is one but not a tmpfs, and the system's tmpfs mounts the table lists
// are tmpfs mount points.
func TestSystemMounterIsMountPoint(t *testing.T) {
	sm := systemMounter{}
	dir := t.TempDir()
	tests := []struct {
		path, fstype    string
		wantMounted     bool
		wantOK          bool
		skipUnlessProcs bool
	}{
		{dir, "tmpfs", false, true, false},
		{dir, "", false, true, false},
		{dir + "/missing", "tmpfs", false, true, false},
		{"/", "", true, true, false},
		{"/proc", "", true, true, true},
		{"/proc", "tmpfs", false, true, true},
		{dir, "ext4", false, false, false}, // a type it does not know: read the table
	}
	mps, err := sm.List()
	if err != nil {
		t.Skipf("skipping: no readable mount table: %v", err)
	}
	listed := map[string][]string{}
	for _, mp := range mps {
		listed[mp.Path] = append(listed[mp.Path], mp.FSType)
	}
	for _, tt := range tests {
		if tt.skipUnlessProcs && len(listed["/proc"]) == 0 {
			continue
		}
		mounted, ok, err := sm.IsMountPoint(tt.path, tt.fstype)
		if err != nil || mounted != tt.wantMounted || ok != tt.wantOK {
			t.Errorf("IsMountPoint(%s, %q) = %v, %v, %v; want %v, %v, nil", tt.path, tt.fstype, mounted, ok, err, tt.wantMounted, tt.wantOK)
		}
	}
	// Mounts of the system, which stay while the test runs (pods' volumes
	// of a running node may not).
	for _, path := range []string{"/dev/shm", "/run", "/sys/fs/cgroup", "/tmp"} {
		types := listed[path]
		// The last mount at a path is the visible one.
		if len(types) == 0 || types[len(types)-1] != "tmpfs" {
			continue
		}
		if fi, err := os.Stat(path); err != nil || !fi.IsDir() {
			continue
		}
		mounted, ok, err := sm.IsMountPoint(path, "tmpfs")
		if err != nil || !ok || !mounted {
			t.Errorf("IsMountPoint(%s, tmpfs) = %v, %v, %v; the mount table has a tmpfs there", path, mounted, ok, err)
		}
	}
}
