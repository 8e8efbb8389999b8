// Package resize is in-place pod resize (Kubernetes' InPlacePodVerticalScaling):
// the record of the resources allocated to each admitted pod, which survives a
// restart of heartlet; the decision whether a requested resize fits the node
// now, later or never; and the order in which an accepted resize is applied to
// the pod cgroup and the containers.
package resize

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/dump"
)

// StateFileName is the allocation record's file name in the root directory:
// the upstream kubelet's, in its format, so that a node switched from one to
// the other keeps its allocations.
const StateFileName = "allocated_pods_state"

// legacyVersion is the version of heartlet's own earlier format, which is
// still read (and replaced by the upstream format on the next write).
const legacyVersion = 1

// maxStateBytes bounds what is read from the state file.
const maxStateBytes = 4 << 20

// maxNameLen bounds pod UIDs and container names in the state file (a
// container name is a DNS label; a UID is far shorter).
const maxNameLen = 253

// Allocation is the resources allocated to a pod's containers, by name,
// and to the pod as a whole (its pod-level resources, spec.resources)
// under PodLevel.
type Allocation map[string]v1.ResourceRequirements

// PodLevel is the key of the pod-level resources in an Allocation; a
// colon is never part of a container name.
const PodLevel = ":pod"

// Equal reports whether a and b allocate the same resources.
func (a Allocation) Equal(b Allocation) bool {
	if len(a) != len(b) {
		return false
	}
	for name, r := range a {
		o, ok := b[name]
		if !ok || !apiequality.Semantic.DeepEqual(r, o) {
			return false
		}
	}
	return true
}

// resizable is the pod's containers that resize in place, as upstream
// 1.37 (InPlacePodVerticalScalingInitContainers is GA): every init
// container, sidecar or not, and every app container; not the ephemeral
// ones.
func resizable(pod *v1.Pod) []*v1.Container {
	out := make([]*v1.Container, 0, len(pod.Spec.InitContainers)+len(pod.Spec.Containers))
	for i := range pod.Spec.InitContainers {
		out = append(out, &pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		out = append(out, &pod.Spec.Containers[i])
	}
	return out
}

// FromPod is the allocation a pod asks for: its resizable containers'
// resources, and its pod-level resources if it has any.
func FromPod(pod *v1.Pod) Allocation {
	a := Allocation{}
	for _, c := range resizable(pod) {
		a[c.Name] = *c.Resources.DeepCopy()
	}
	if pod.Spec.Resources != nil {
		a[PodLevel] = *pod.Spec.Resources.DeepCopy()
	}
	return a
}

// checkpointFile is the on-disk form, the upstream kubelet v1.37.2's
// allocation checkpoint (pkg/kubelet/allocation/state, Checkpoint): the
// JSON of the entries as a string, and its checksum.
type checkpointFile struct {
	Data     string `json:"data"`
	Checksum uint64 `json:"checksum"`
}

// checkpointData is upstream's PodResourceCheckpointInfo.
type checkpointData struct {
	Entries map[types.UID]podEntry `json:"entries,omitempty"`
}

// podEntry is upstream's PodResourceInfo, whose fields carry no JSON tags.
type podEntry struct {
	ContainerResources map[string]v1.ResourceRequirements
	// PodLevelResources is what was allocated to the pod as a whole:
	// heartlet's PodLevel entry of the Allocation.
	PodLevelResources *v1.ResourceRequirements
	// EmptyDirVolumeLimits is what upstream allocated to the pod's
	// emptyDir volumes; heartlet keeps what it reads, so that it is there
	// when the upstream kubelet runs the node again, and sets none.
	EmptyDirVolumeLimits map[string]*resource.Quantity
}

// legacyFile is heartlet's earlier format.
type legacyFile struct {
	Version int                                              `json:"version"`
	Pods    map[types.UID]map[string]v1.ResourceRequirements `json:"pods"`
}

// upstreamOnly is the part of a pod's entry heartlet keeps without
// acting on it (see podEntry).
type upstreamOnly struct {
	emptyDir map[string]*resource.Quantity
}

// checksum is upstream's checkpoint checksum of data: FNV-32a over the
// k8s.io/utils/dump.ForHash rendering of the string
// (pkg/kubelet/checkpointmanager/checksum and pkg/util/hash in v1.37.2).
func checksum(data string) uint64 {
	h := fnv.New32a()
	fmt.Fprintf(h, "%v", dump.ForHash(data))
	return uint64(h.Sum32())
}

// decodeStrict decodes one JSON object into v, refusing unknown fields
// and trailing data.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("data after the object")
	}
	return nil
}

// ParseState parses a state file: the upstream checkpoint, whose checksum
// must match, or heartlet's earlier format. It accepts non-empty names of
// bounded length and well-formed quantities that are not negative.
func ParseState(data []byte) (map[types.UID]Allocation, error) {
	pods, _, err := parseState(data)
	return pods, err
}

func parseState(data []byte) (map[types.UID]Allocation, map[types.UID]upstreamOnly, error) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, nil, fmt.Errorf("parse allocation state: %w", err)
	}
	if _, ok := probe["version"]; ok {
		return parseLegacy(data)
	}
	var f checkpointFile
	if err := decodeStrict(data, &f); err != nil {
		return nil, nil, fmt.Errorf("parse allocation state: %w", err)
	}
	if _, ok := probe["data"]; !ok {
		return nil, nil, errors.New("parse allocation state: no data")
	}
	if sum := checksum(f.Data); sum != f.Checksum {
		return nil, nil, fmt.Errorf("parse allocation state: checksum %d, the data's is %d (a corrupt file)", f.Checksum, sum)
	}
	var d checkpointData
	if err := decodeStrict([]byte(f.Data), &d); err != nil {
		return nil, nil, fmt.Errorf("parse allocation state data: %w", err)
	}
	pods := make(map[types.UID]Allocation, len(d.Entries))
	extra := map[types.UID]upstreamOnly{}
	for uid, e := range d.Entries {
		a, err := checkAllocation(uid, e.ContainerResources)
		if err != nil {
			return nil, nil, err
		}
		if e.PodLevelResources != nil {
			if err := checkLists(uid, "pod", *e.PodLevelResources); err != nil {
				return nil, nil, err
			}
		}
		for name, q := range e.EmptyDirVolumeLimits {
			if name == "" || len(name) > maxNameLen || (q != nil && q.Sign() < 0) {
				return nil, nil, fmt.Errorf("parse allocation state: pod %s: bad emptyDir limit %q", uid, name)
			}
		}
		if _, ok := a[PodLevel]; ok {
			return nil, nil, fmt.Errorf("parse allocation state: pod %s: bad container name %q", uid, PodLevel)
		}
		if e.PodLevelResources != nil {
			a[PodLevel] = *e.PodLevelResources
		}
		pods[uid] = a
		if e.EmptyDirVolumeLimits != nil {
			extra[uid] = upstreamOnly{emptyDir: e.EmptyDirVolumeLimits}
		}
	}
	return pods, extra, nil
}

func parseLegacy(data []byte) (map[types.UID]Allocation, map[types.UID]upstreamOnly, error) {
	var f legacyFile
	if err := decodeStrict(data, &f); err != nil {
		return nil, nil, fmt.Errorf("parse allocation state: %w", err)
	}
	if f.Version != legacyVersion {
		return nil, nil, fmt.Errorf("parse allocation state: version %d, want %d", f.Version, legacyVersion)
	}
	pods := make(map[types.UID]Allocation, len(f.Pods))
	for uid, cs := range f.Pods {
		a, err := checkAllocation(uid, cs)
		if err != nil {
			return nil, nil, err
		}
		pods[uid] = a
	}
	return pods, map[types.UID]upstreamOnly{}, nil
}

// checkAllocation validates one pod's container allocations.
func checkAllocation(uid types.UID, cs map[string]v1.ResourceRequirements) (Allocation, error) {
	if uid == "" || len(uid) > maxNameLen {
		return nil, fmt.Errorf("parse allocation state: bad pod UID %q", uid)
	}
	a := make(Allocation, len(cs))
	for name, r := range cs {
		if name == "" || len(name) > maxNameLen {
			return nil, fmt.Errorf("parse allocation state: pod %s: bad container name %q", uid, name)
		}
		if err := checkLists(uid, name, r); err != nil {
			return nil, err
		}
		a[name] = r
	}
	return a, nil
}

func checkLists(uid types.UID, name string, r v1.ResourceRequirements) error {
	for _, l := range []v1.ResourceList{r.Requests, r.Limits} {
		for rn, q := range l {
			if rn == "" || len(rn) > maxNameLen || q.Sign() < 0 {
				return fmt.Errorf("parse allocation state: pod %s container %s: bad resource %q=%s", uid, name, rn, q.String())
			}
		}
	}
	return nil
}

// encodeState renders the record as the upstream checkpoint.
func encodeState(pods map[types.UID]Allocation, extra map[types.UID]upstreamOnly) ([]byte, error) {
	d := checkpointData{Entries: make(map[types.UID]podEntry, len(pods))}
	for uid, a := range pods {
		e := podEntry{ContainerResources: make(map[string]v1.ResourceRequirements, len(a))}
		for name, r := range a {
			if name == PodLevel {
				e.PodLevelResources = r.DeepCopy()
				continue
			}
			e.ContainerResources[name] = r
		}
		if x, ok := extra[uid]; ok {
			e.EmptyDirVolumeLimits = x.emptyDir
		}
		d.Entries[uid] = e
	}
	inner, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("encode allocation state: %w", err)
	}
	f := checkpointFile{Data: string(inner), Checksum: checksum(string(inner))}
	b, err := json.Marshal(f)
	if err != nil {
		return nil, fmt.Errorf("encode allocation state: %w", err)
	}
	return b, nil
}

// Store is the allocation record of the node's admitted pods, kept in a
// file so it survives a restart of heartlet. Every change is written to
// the file (atomically: a new file renamed over the old) before it is
// visible to Get and before the call that made it returns. Changes made
// while a write is under way are written together by the next one (a
// group commit): a burst of N admissions writes the file a few times, not
// N times, each write being the whole record. Its methods are safe for
// concurrent use.
type Store struct {
	path string
	// writeFile writes the file (writeFileAtomic; tests replace it).
	writeFile func(path string, data []byte) error

	// wmu is held by the one caller writing the file.
	wmu sync.Mutex

	mu   sync.Mutex
	pods map[types.UID]Allocation
	// extra is what upstream recorded beside the containers' allocations,
	// kept for the pods still in the record.
	extra map[types.UID]upstreamOnly
	// queue is the changes not yet written, in the order they were made.
	queue []*change
}

// change is one change of the record waiting to be written: apply makes
// it on a copy of the record; done receives the outcome of its write.
type change struct {
	apply func(pods map[types.UID]Allocation)
	done  chan error
}

// OpenStore reads the record at path; a missing file is an empty record.
// A file that cannot be parsed is an error: heartlet must not forget
// allocations it made.
func OpenStore(path string) (*Store, error) {
	s := &Store{path: path, writeFile: writeFileAtomic, pods: map[types.UID]Allocation{}, extra: map[types.UID]upstreamOnly{}}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open allocation state: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxStateBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read allocation state %s: %w", path, err)
	}
	if len(data) > maxStateBytes {
		return nil, fmt.Errorf("read allocation state %s: larger than %d bytes", path, maxStateBytes)
	}
	pods, extra, err := parseState(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	s.pods, s.extra = pods, extra
	return s, nil
}

// Get returns the pod's allocation and whether there is one. The result
// is the caller's.
func (s *Store) Get(uid types.UID) (Allocation, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.pods[uid]
	if !ok {
		return nil, false
	}
	out := make(Allocation, len(a))
	for n, r := range a {
		out[n] = *r.DeepCopy()
	}
	return out, true
}

// Set records the pod's allocation.
func (s *Store) Set(uid types.UID, a Allocation) error {
	cp := make(Allocation, len(a))
	for n, r := range a {
		cp[n] = *r.DeepCopy()
	}
	s.mu.Lock()
	if old, ok := s.pods[uid]; ok && len(s.queue) == 0 && old.Equal(cp) {
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	return s.commit(func(pods map[types.UID]Allocation) { pods[uid] = cp })
}

// Remove forgets the pod's allocation; removing an unknown pod is no error.
func (s *Store) Remove(uid types.UID) error {
	s.mu.Lock()
	if _, ok := s.pods[uid]; !ok && len(s.queue) == 0 {
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	return s.commit(func(pods map[types.UID]Allocation) { delete(pods, uid) })
}

// RemoveOrphans forgets every pod not in keep.
func (s *Store) RemoveOrphans(keep map[types.UID]bool) error {
	s.mu.Lock()
	orphans := false
	for uid := range s.pods {
		if !keep[uid] {
			orphans = true
			break
		}
	}
	if !orphans && len(s.queue) == 0 {
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	return s.commit(func(pods map[types.UID]Allocation) {
		maps.DeleteFunc(pods, func(uid types.UID, _ Allocation) bool { return !keep[uid] })
	})
}

// UIDs lists the pods with an allocation, sorted.
func (s *Store) UIDs() []types.UID {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.pods))
}

// commit queues the change apply and returns once a write that holds it
// ended: its error, or nil once the change is in the file and the record.
// The caller that gets the write lock writes every change queued by then;
// a change whose write failed is not in the record.
func (s *Store) commit(apply func(pods map[types.UID]Allocation)) error {
	c := &change{apply: apply, done: make(chan error, 1)}
	s.mu.Lock()
	s.queue = append(s.queue, c)
	s.mu.Unlock()

	s.wmu.Lock()
	defer s.wmu.Unlock()
	select {
	case err := <-c.done: // written by the caller before
		return err
	default:
	}
	s.mu.Lock()
	batch := s.queue
	s.queue = nil
	next := maps.Clone(s.pods)
	extra := maps.Clone(s.extra)
	s.mu.Unlock()
	for _, b := range batch {
		b.apply(next)
	}
	maps.DeleteFunc(extra, func(uid types.UID, _ upstreamOnly) bool { _, ok := next[uid]; return !ok })
	err := s.write(next, extra)
	if err == nil {
		s.mu.Lock()
		s.pods, s.extra = next, extra
		s.mu.Unlock()
	}
	for _, b := range batch {
		b.done <- err
	}
	return <-c.done
}

// write writes the record next, with the upstream records extra, to the
// file.
func (s *Store) write(next map[types.UID]Allocation, extra map[types.UID]upstreamOnly) error {
	data, err := encodeState(next, extra)
	if err != nil {
		return err
	}
	return s.writeFile(s.path, data)
}

// writeFileAtomic writes data to a new file beside path, syncs it and
// renames it over path, then syncs the directory, so a crash leaves either
// the old file or the new one.
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write allocation state: %w", err)
	}
	name := tmp.Name()
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(name)
		}
	}()
	if err := tmp.Chmod(0o600); err != nil {
		return fmt.Errorf("write allocation state: %w", err)
	}
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("write allocation state: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("write allocation state: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write allocation state: %w", err)
	}
	if err := os.Rename(name, path); err != nil {
		return fmt.Errorf("write allocation state: %w", err)
	}
	ok = true
	if d, err := os.Open(dir); err == nil {
		syncErr := d.Sync()
		d.Close()
		if syncErr != nil {
			return fmt.Errorf("write allocation state: sync %s: %w", dir, syncErr)
		}
	}
	return nil
}
