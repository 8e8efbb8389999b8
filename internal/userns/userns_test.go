package userns

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func userPod(uid string) *v1.Pod {
	f := false
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, UID: types.UID(uid)}, Spec: v1.PodSpec{HostUsers: &f}}
}

// newManager makes the pod directories of uids and a Manager over them.
func newManager(t *testing.T, dir string, cfg Config, uids ...string) *Manager {
	t.Helper()
	for _, u := range uids {
		if err := os.MkdirAll(filepath.Join(dir, u), 0o750); err != nil {
			t.Fatal(err)
		}
	}
	cfg.PodsDir = dir
	m, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m
}

func TestNewChecksTheRange(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string // in the error; "" for none
	}{
		{"default", Config{Range: DefaultRange, MaxPods: 110}, ""},
		{"subordinate IDs", Config{Range: Range{First: 1 << 20, Length: 110 * Block}, MaxPods: 110}, ""},
		{"maps the host's root", Config{Range: Range{First: 0, Length: 200 * Block}}, "must be at least 65536"},
		{"unaligned first", Config{Range: Range{First: Block + 1, Length: 200 * Block}}, "not a multiple"},
		{"unaligned length", Config{Range: Range{First: Block, Length: Block + 7}}, "not a multiple"},
		{"too few for maxPods", Config{Range: Range{First: Block, Length: 10 * Block}, MaxPods: 11}, "fewer than maxPods 11"},
		{"idsPerPod unaligned", Config{Range: DefaultRange, IDsPerPod: 1000}, "idsPerPod 1000"},
		{"idsPerPod too big for maxPods", Config{Range: Range{First: Block, Length: 20 * Block}, IDsPerPod: 2 * Block, MaxPods: 11}, "fewer than maxPods"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.PodsDir = t.TempDir()
			_, err := New(tt.cfg)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("New: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("New: got %v, want an error with %q", err, tt.want)
			}
		})
	}
}

func TestAllocateGivesDisjointRangesAndKeepsThem(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Range: Range{First: 4 * Block, Length: 3 * Block}, MaxPods: 3}
	m := newManager(t, dir, cfg, "a", "b", "c", "d")
	seen := map[uint32]string{}
	for _, u := range []string{"a", "b", "c"} {
		r, err := m.Allocate(userPod(u))
		if err != nil {
			t.Fatalf("Allocate(%s): %v", u, err)
		}
		if r.Length != Block || r.First < 4*Block || r.First >= 7*Block {
			t.Fatalf("Allocate(%s) = %+v, outside the node's range", u, r)
		}
		if other, dup := seen[r.First]; dup {
			t.Fatalf("pods %s and %s both got %d", other, u, r.First)
		}
		seen[r.First] = u
		again, err := m.Allocate(userPod(u))
		if err != nil || again != r {
			t.Fatalf("a second Allocate(%s) = %+v, %v; want %+v", u, again, err, r)
		}
	}
	if _, err := m.Allocate(userPod("d")); err == nil || !strings.Contains(err.Error(), "no free user namespace") {
		t.Fatalf("a fourth pod in a range of three: %v", err)
	}

	// A restart: a new Manager reads the three files and gives the
	// fourth pod nothing a running pod holds.
	ra, _ := m.Allocate(userPod("a"))
	m2 := newManager(t, dir, cfg)
	if got := m2.InUse(); got != 3 {
		t.Fatalf("after a restart %d pods hold ranges, want 3", got)
	}
	if _, err := m2.Allocate(userPod("d")); err == nil {
		t.Fatal("after a restart a fourth pod got a range that a running pod holds")
	}
	if err := m2.Release("a"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "a", FileName)); !os.IsNotExist(err) {
		t.Fatalf("the released pod's file is still there: %v", err)
	}
	rd, err := m2.Allocate(userPod("d"))
	if err != nil || rd != ra {
		t.Fatalf("Allocate(d) after a's release = %+v, %v; want a's old %+v", rd, err, ra)
	}
}

func TestMappingMapsFromZero(t *testing.T) {
	m := newManager(t, t.TempDir(), Config{Range: DefaultRange}, "p")
	pod := userPod("p")
	if _, err := m.Mapping(pod); err == nil {
		t.Fatal("Mapping of a pod with no range yet succeeded")
	}
	r, err := m.Allocate(pod)
	if err != nil {
		t.Fatal(err)
	}
	got, err := m.Mapping(pod)
	if err != nil {
		t.Fatal(err)
	}
	want := &runtimeapi.IDMapping{HostId: r.First, ContainerId: 0, Length: Block}
	if got.Mode != runtimeapi.NamespaceMode_POD || len(got.Uids) != 1 || len(got.Gids) != 1 ||
		got.Uids[0].String() != want.String() || got.Gids[0].String() != want.String() {
		t.Fatalf("Mapping = %v, want POD mode with %v for users and groups", got, want)
	}
}

// A pod directory's file is the node agent's record, but a crafted or
// stale one must never make two pods share IDs, nor give a pod IDs
// outside the node's range (such as the host's root).
func TestRecordedRangesAreChecked(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]string
		wantErr string
	}{
		{"the host's root", map[string]string{"x": `{"uidMappings":[{"hostId":0,"containerId":0,"length":65536}],"gidMappings":[{"hostId":0,"containerId":0,"length":65536}]}`}, "outside the node's range"},
		{"two pods, one range", map[string]string{
			"x": `{"uidMappings":[{"hostId":131072,"containerId":0,"length":65536}],"gidMappings":[{"hostId":131072,"containerId":0,"length":65536}]}`,
			"y": `{"uidMappings":[{"hostId":131072,"containerId":0,"length":65536}],"gidMappings":[{"hostId":131072,"containerId":0,"length":65536}]}`,
		}, "overlap"},
		{"users and groups differ", map[string]string{"x": `{"uidMappings":[{"hostId":131072,"containerId":0,"length":65536}],"gidMappings":[{"hostId":196608,"containerId":0,"length":65536}]}`}, "differ"},
		{"root not mapped", map[string]string{"x": `{"uidMappings":[{"hostId":131072,"containerId":1,"length":65536}],"gidMappings":[{"hostId":131072,"containerId":1,"length":65536}]}`}, "ID 0"},
		{"half a slot", map[string]string{"x": `{"uidMappings":[{"hostId":131072,"containerId":0,"length":32768}],"gidMappings":[{"hostId":131072,"containerId":0,"length":32768}]}`}, "do not fit"},
		{"not JSON", map[string]string{"x": `{`}, "invalid"},
		{"a larger range", map[string]string{"x": `{"uidMappings":[{"hostId":131072,"containerId":0,"length":131072}],"gidMappings":[{"hostId":131072,"containerId":0,"length":131072}]}`}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for uid, content := range tt.files {
				if err := os.MkdirAll(filepath.Join(dir, uid), 0o750); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, uid, FileName), []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			_, err := New(Config{PodsDir: dir, Range: Range{First: Block, Length: 100 * Block}})
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("New: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("New: got %v, want an error with %q", err, tt.wantErr)
			}
		})
	}
}

// A file written by the upstream kubelet (its format, read where it
// writes it: the file "userns" in the pod directory) is read as is, so a
// pod keeps its IDs when the node switches agents.
func TestUpstreamFileIsKept(t *testing.T) {
	dir := t.TempDir()
	upstream := `{"uidMappings":[{"hostId":1966080,"containerId":0,"length":65536}],"gidMappings":[{"hostId":1966080,"containerId":0,"length":65536}]}`
	if err := os.MkdirAll(filepath.Join(dir, "p"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "p", FileName), []byte(upstream), 0o600); err != nil {
		t.Fatal(err)
	}
	m := newManager(t, dir, Config{Range: DefaultRange, MaxPods: 110})
	r, err := m.Allocate(userPod("p"))
	if err != nil || r != (Range{First: 1966080, Length: Block}) {
		t.Fatalf("Allocate = %+v, %v; want the recorded 1966080+65536", r, err)
	}
	// And heartlet writes the same shape.
	m.Release("p")
	if _, err := m.Allocate(userPod("p")); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "p", FileName))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(data); err != nil || !strings.Contains(string(data), `"uidMappings":[{"hostId":`) {
		t.Fatalf("written file %s: %v", data, err)
	}
}

func TestHandler(t *testing.T) {
	dir := t.TempDir()
	m := newManager(t, dir, Config{Range: DefaultRange}, "p", "host")
	h := m.Handler()
	ctx := context.Background()
	hostPod := userPod("host")
	hostPod.Spec.HostUsers = nil
	if err := h.Prepare(ctx, hostPod); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "host", FileName)); !os.IsNotExist(err) {
		t.Fatal("a pod in the host user namespace got a range")
	}
	if err := h.Prepare(ctx, userPod("p")); err != nil {
		t.Fatal(err)
	}
	uids, err := h.(interface {
		List(context.Context) ([]types.UID, error)
	}).List(ctx)
	if err != nil || len(uids) != 1 || uids[0] != "p" {
		t.Fatalf("List = %v, %v; want [p]", uids, err)
	}
	if err := h.Cleanup(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	if m.InUse() != 0 {
		t.Fatal("Cleanup kept the range")
	}
	if err := h.Cleanup(ctx, "p"); err != nil {
		t.Fatalf("a second Cleanup: %v", err)
	}
}

func TestNodeRange(t *testing.T) {
	tests := []struct {
		name, subuid, subgid string
		want                 Range
		wantErr              string
	}{
		{"no files", "", "", DefaultRange, ""},
		{"other users only", "alice:100000:65536\n", "alice:100000:65536\n", DefaultRange, ""},
		{"kubelet", "# ids\nkubelet:655360:7208960\n", "kubelet:655360:7208960\n", Range{First: 655360, Length: 7208960}, ""},
		{"users and groups differ", "kubelet:655360:65536\n", "kubelet:720896:65536\n", Range{}, "different"},
		{"only users", "kubelet:655360:65536\n", "", Range{}, "only one"},
		{"two ranges", "kubelet:655360:65536\nkubelet:9000000:65536\n", "kubelet:655360:65536\n", Range{}, "exactly one"},
		{"bad line", "kubelet:x:1\n", "", Range{}, "line 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			u, g := filepath.Join(dir, "subuid"), filepath.Join(dir, "subgid")
			if tt.subuid != "" {
				os.WriteFile(u, []byte(tt.subuid), 0o644)
			}
			if tt.subgid != "" {
				os.WriteFile(g, []byte(tt.subgid), 0o644)
			}
			got, err := NodeRange(u, g)
			switch {
			case tt.wantErr == "" && (err != nil || got != tt.want):
				t.Fatalf("NodeRange = %+v, %v; want %+v", got, err, tt.want)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("NodeRange: got %v, want an error with %q", err, tt.wantErr)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"uidMappings":[{"hostId":131072,"containerId":0,"length":65536}],"gidMappings":[{"hostId":131072,"containerId":0,"length":65536}]}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Parse(data)
		if err == nil && r.Length == 0 {
			t.Fatalf("Parse(%q) accepted an empty mapping", data)
		}
		if err != nil {
			return
		}
		// Whatever a file says, a Manager never records it outside
		// its range.
		m := &Manager{first: Block, perPod: Block, slots: 10, used: map[int]types.UID{}, byPod: map[types.UID][]int{}}
		if slots, err := m.slotsOf(r); err == nil {
			for _, s := range slots {
				if s < 0 || s >= m.slots {
					t.Fatalf("slotsOf(%+v) = %v, outside 0..9", r, slots)
				}
			}
		}
	})
}

func FuzzParseSubIDs(f *testing.F) {
	f.Add([]byte("kubelet:65536:65536\n# c\n\nalice:1:2\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := ParseSubIDs(data)
		if err != nil {
			return
		}
		for _, rs := range out {
			for _, r := range rs {
				if uint64(r.First)+uint64(r.Length) > 1<<32 {
					t.Fatalf("range %+v exceeds the ID space", r)
				}
			}
		}
	})
}
