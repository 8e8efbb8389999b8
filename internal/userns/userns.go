// Package userns gives each pod that sets hostUsers: false a user
// namespace of its own: a range of host user and group IDs, disjoint from
// every other pod's, that the runtime maps to IDs 0..n-1 in the pod.
//
// As upstream's kubelet, the node's IDs come from the subordinate ID
// ranges of the user "kubelet" in /etc/subuid and /etc/subgid, or, when it
// has none, from 65536 to the top of the 32-bit ID space; each pod gets
// userNamespaces.idsPerPod IDs (65536 by default), and the range it got is
// written to the file "userns" in the pod's directory, in upstream's
// format, so that it survives a restart of the node agent (either agent's:
// the upstream kubelet and heartlet read each other's files).
package userns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Block is the unit of user namespace sizes and offsets: 65536 IDs, the
// IDs of a 16-bit system.
const Block = 1 << 16

// FileName is the file in a pod's directory that records its mapping.
const FileName = "userns"

// Range is a range of host IDs: [First, First+Length).
type Range struct {
	First, Length uint32
}

// DefaultRange is every ID from 65536 up, as upstream uses when the
// "kubelet" user has no subordinate IDs: the host's own 16-bit IDs (root
// among them) are never given to a pod.
var DefaultRange = Range{First: Block, Length: 1<<32 - Block}

// Config configures a Manager.
type Config struct {
	// PodsDir holds the pod directories: <root-dir>/pods.
	PodsDir string
	// Range is the host IDs the node gives to pods.
	Range Range
	// IDsPerPod is the size of each pod's range (idsPerPod); 0 is Block.
	IDsPerPod uint32
	// MaxPods is the node's maxPods: the range must hold that many pods.
	MaxPods int
}

// Manager allocates pods' ID ranges. It is safe for concurrent use.
type Manager struct {
	podsDir string
	first   uint32 // the first host ID of slot 0
	perPod  uint32
	slots   int

	mu    sync.Mutex
	used  map[int]types.UID // slot → the pod holding it
	byPod map[types.UID][]int
	// handlers are the runtime handlers that support user namespaces.
	handlers map[string]bool
}

// New checks cfg as upstream does (offsets and sizes multiples of Block,
// never the host's first 65536 IDs, room for MaxPods pods) and returns a
// Manager that knows the ranges recorded in the pod directories.
func New(cfg Config) (*Manager, error) {
	per := cfg.IDsPerPod
	if per == 0 {
		per = Block
	}
	r := cfg.Range
	switch {
	case per%Block != 0:
		return nil, fmt.Errorf("userNamespaces.idsPerPod %d is not a multiple of %d", per, Block)
	case r.First%Block != 0:
		return nil, fmt.Errorf("the node's first user namespace ID %d is not a multiple of %d", r.First, Block)
	case r.First < Block:
		// Mapping the host's low IDs would give pods the host's root.
		return nil, fmt.Errorf("the node's first user namespace ID %d must be at least %d", r.First, Block)
	case r.Length%Block != 0:
		return nil, fmt.Errorf("the node's user namespace ID range length %d is not a multiple of %d", r.Length, Block)
	case uint64(r.First)+uint64(r.Length) > 1<<32:
		return nil, fmt.Errorf("the node's user namespace ID range %d+%d exceeds the 32-bit ID space", r.First, r.Length)
	}
	slots := int(r.Length / per)
	if cfg.MaxPods > 0 && slots < cfg.MaxPods {
		return nil, fmt.Errorf("the node's user namespace IDs (%d from %d) hold %d pods of %d IDs, fewer than maxPods %d", r.Length, r.First, slots, per, cfg.MaxPods)
	}
	m := &Manager{
		podsDir: cfg.PodsDir,
		first:   r.First,
		perPod:  per,
		slots:   slots,
		used:    make(map[int]types.UID),
		byPod:   make(map[types.UID][]int),
	}
	if err := m.load(); err != nil {
		return nil, err
	}
	return m, nil
}

// SetHandlers records which runtime handlers support user namespaces, as
// the runtime reports them in its CRI status.
func (m *Manager) SetHandlers(h map[string]bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.handlers = h
}

// HandlerSupports tells whether the runtime handler runs pods in user
// namespaces.
func (m *Manager) HandlerSupports(handler string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.handlers[handler]
}

// load records the range of every pod directory that has a mapping file,
// so that no range is given twice after a restart.
func (m *Manager) load() error {
	uids, err := m.List(context.Background())
	if err != nil {
		return err
	}
	for _, uid := range uids {
		if _, err := m.recorded(uid); err != nil {
			return fmt.Errorf("pod %s: %w", uid, err)
		}
	}
	return nil
}

// List returns the pods that have a mapping file.
func (m *Manager) List(context.Context) ([]types.UID, error) {
	entries, err := os.ReadDir(m.podsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list pod directories: %w", err)
	}
	var out []types.UID
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if _, err := os.Lstat(filepath.Join(m.podsDir, e.Name(), FileName)); err == nil {
			out = append(out, types.UID(e.Name()))
		}
	}
	return out, nil
}

// Wants tells whether the pod asks for a user namespace of its own.
func Wants(pod *v1.Pod) bool {
	return pod.Spec.HostUsers != nil && !*pod.Spec.HostUsers
}

// Allocate gives the pod its range, or returns the one it has: the one in
// memory, else the one recorded in its directory. A new range is written
// to the pod's directory (which must exist) before it is returned.
func (m *Manager) Allocate(pod *v1.Pod) (Range, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok, err := m.recordedLocked(pod.UID); err != nil || ok {
		return r, err
	}
	slot := -1
	for i := 0; i < m.slots; i++ {
		if _, taken := m.used[i]; !taken {
			slot = i
			break
		}
	}
	if slot < 0 {
		return Range{}, fmt.Errorf("no free user namespace: all %d ranges of %d IDs are in use", m.slots, m.perPod)
	}
	r := Range{First: m.first + uint32(slot)*m.perPod, Length: m.perPod}
	if err := m.write(pod.UID, r); err != nil {
		return Range{}, err
	}
	m.used[slot] = pod.UID
	m.byPod[pod.UID] = []int{slot}
	return r, nil
}

// recorded is recordedLocked under the lock.
func (m *Manager) recorded(uid types.UID) (Range, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, _, err := m.recordedLocked(uid)
	return r, err
}

// recordedLocked returns the pod's range from memory or from its file,
// recording the latter; ok is false when it has none.
func (m *Manager) recordedLocked(uid types.UID) (r Range, ok bool, err error) {
	if slots, ok := m.byPod[uid]; ok {
		return m.rangeOf(slots), true, nil
	}
	data, err := os.ReadFile(filepath.Join(m.podsDir, string(uid), FileName))
	if errors.Is(err, fs.ErrNotExist) {
		return Range{}, false, nil
	}
	if err != nil {
		return Range{}, false, fmt.Errorf("read user namespace mapping: %w", err)
	}
	r, err = Parse(data)
	if err != nil {
		return Range{}, false, err
	}
	slots, err := m.slotsOf(r)
	if err != nil {
		return Range{}, false, err
	}
	for _, s := range slots {
		if other, taken := m.used[s]; taken && other != uid {
			return Range{}, false, fmt.Errorf("user namespace IDs %d+%d of pod %s overlap those of pod %s", r.First, r.Length, uid, other)
		}
	}
	for _, s := range slots {
		m.used[s] = uid
	}
	m.byPod[uid] = slots
	return r, true, nil
}

// rangeOf is the range a pod's slots stand for (slotsOf admits only
// ranges that are whole slots).
func (m *Manager) rangeOf(slots []int) Range {
	return Range{First: m.first + uint32(slots[0])*m.perPod, Length: uint32(len(slots)) * m.perPod}
}

// slotsOf lists the slots a range touches; the range must lie in the
// node's and start on a Block.
func (m *Manager) slotsOf(r Range) ([]int, error) {
	end := uint64(m.first) + uint64(m.slots)*uint64(m.perPod)
	if r.First%Block != 0 || r.Length == 0 || r.First < m.first || uint64(r.First)+uint64(r.Length) > end {
		return nil, fmt.Errorf("user namespace IDs %d+%d lie outside the node's range %d+%d", r.First, r.Length, m.first, uint64(m.slots)*uint64(m.perPod))
	}
	if r.Length != m.perPod {
		// A range of another size (another idsPerPod when it was
		// given) is kept as recorded; it must still fit whole slots,
		// or a neighbour could be given part of it.
		if (r.First-m.first)%m.perPod != 0 || r.Length%m.perPod != 0 {
			return nil, fmt.Errorf("user namespace IDs %d+%d do not fit this node's ranges of %d IDs", r.First, r.Length, m.perPod)
		}
	}
	first := int((r.First - m.first) / m.perPod)
	n := int((r.Length + m.perPod - 1) / m.perPod)
	out := make([]int, n)
	for i := range out {
		out[i] = first + i
	}
	return out, nil
}

// Mapping returns the CRI user namespace of a pod that asks for one: its
// recorded range, mapped from ID 0 for users and groups alike.
func (m *Manager) Mapping(pod *v1.Pod) (*runtimeapi.UserNamespace, error) {
	r, err := m.recorded(pod.UID)
	if err != nil {
		return nil, err
	}
	if r.Length == 0 {
		return nil, fmt.Errorf("pod %s has no user namespace IDs yet", pod.UID)
	}
	ids := []*runtimeapi.IDMapping{{HostId: r.First, ContainerId: 0, Length: r.Length}}
	gids := []*runtimeapi.IDMapping{{HostId: r.First, ContainerId: 0, Length: r.Length}}
	return &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD, Uids: ids, Gids: gids}, nil
}

// Release forgets the pod's range and removes its file.
func (m *Manager) Release(uid types.UID) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	err := os.Remove(filepath.Join(m.podsDir, string(uid), FileName))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove user namespace mapping: %w", err)
	}
	for _, s := range m.byPod[uid] {
		delete(m.used, s)
	}
	delete(m.byPod, uid)
	return nil
}

// InUse is the number of pods holding a range.
func (m *Manager) InUse() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.byPod)
}

// mapping is one line of the file, in upstream's JSON names.
type mapping struct {
	HostID      uint32 `json:"hostId"`
	ContainerID uint32 `json:"containerId"`
	Length      uint32 `json:"length"`
}

type file struct {
	UIDMappings []mapping `json:"uidMappings"`
	GIDMappings []mapping `json:"gidMappings"`
}

// Parse reads a mapping file. As upstream, it accepts only what a node
// agent writes: one mapping, the same for users and groups, from ID 0.
func Parse(data []byte) (Range, error) {
	var f file
	if err := json.Unmarshal(data, &f); err != nil {
		return Range{}, fmt.Errorf("invalid user namespace mapping file: %w", err)
	}
	switch {
	case len(f.UIDMappings) != 1 || len(f.GIDMappings) != 1:
		return Range{}, errors.New("invalid user namespace mapping file: want exactly one user and one group mapping")
	case f.UIDMappings[0] != f.GIDMappings[0]:
		return Range{}, errors.New("invalid user namespace mapping file: the user and group mappings differ")
	case f.UIDMappings[0].ContainerID != 0:
		return Range{}, errors.New("invalid user namespace mapping file: ID 0 is not mapped")
	case f.UIDMappings[0].Length == 0:
		return Range{}, errors.New("invalid user namespace mapping file: empty mapping")
	}
	return Range{First: f.UIDMappings[0].HostID, Length: f.UIDMappings[0].Length}, nil
}

// write records r in the pod's directory atomically and durably.
func (m *Manager) write(uid types.UID, r Range) error {
	mp := mapping{HostID: r.First, ContainerID: 0, Length: r.Length}
	data, err := json.Marshal(file{UIDMappings: []mapping{mp}, GIDMappings: []mapping{mp}})
	if err != nil {
		return err
	}
	dir := filepath.Join(m.podsDir, string(uid))
	tmp, err := os.CreateTemp(dir, "."+FileName+"-")
	if err != nil {
		return fmt.Errorf("write user namespace mapping: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write user namespace mapping: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write user namespace mapping: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write user namespace mapping: %w", err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, FileName)); err != nil {
		return fmt.Errorf("write user namespace mapping: %w", err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("write user namespace mapping: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("write user namespace mapping: %w", err)
	}
	return nil
}
