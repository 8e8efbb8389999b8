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
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
)

// StateFileName is the allocation record's file name in the root directory.
const StateFileName = "allocated_pods_state"

// stateVersion is the only format version understood.
const stateVersion = 1

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

// stateFile is the on-disk form.
type stateFile struct {
	Version int                          `json:"version"`
	Pods    map[types.UID]map[string]res `json:"pods"`
}

type res struct {
	Requests v1.ResourceList `json:"requests,omitempty"`
	Limits   v1.ResourceList `json:"limits,omitempty"`
}

// ParseState parses a state file. It accepts only the current version,
// non-empty names of bounded length and well-formed quantities that are
// not negative.
func ParseState(data []byte) (map[types.UID]Allocation, error) {
	var f stateFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("parse allocation state: %w", err)
	}
	if dec.More() {
		return nil, errors.New("parse allocation state: data after the object")
	}
	if f.Version != stateVersion {
		return nil, fmt.Errorf("parse allocation state: version %d, want %d", f.Version, stateVersion)
	}
	out := make(map[types.UID]Allocation, len(f.Pods))
	for uid, cs := range f.Pods {
		if uid == "" || len(uid) > maxNameLen {
			return nil, fmt.Errorf("parse allocation state: bad pod UID %q", uid)
		}
		a := make(Allocation, len(cs))
		for name, r := range cs {
			if name == "" || len(name) > maxNameLen {
				return nil, fmt.Errorf("parse allocation state: pod %s: bad container name %q", uid, name)
			}
			for _, l := range []v1.ResourceList{r.Requests, r.Limits} {
				for rn, q := range l {
					if rn == "" || len(rn) > maxNameLen || q.Sign() < 0 {
						return nil, fmt.Errorf("parse allocation state: pod %s container %s: bad resource %q=%s", uid, name, rn, q.String())
					}
				}
			}
			a[name] = v1.ResourceRequirements{Requests: r.Requests, Limits: r.Limits}
		}
		out[uid] = a
	}
	return out, nil
}

func encodeState(pods map[types.UID]Allocation) ([]byte, error) {
	f := stateFile{Version: stateVersion, Pods: make(map[types.UID]map[string]res, len(pods))}
	for uid, a := range pods {
		cs := make(map[string]res, len(a))
		for name, r := range a {
			cs[name] = res{Requests: r.Requests, Limits: r.Limits}
		}
		f.Pods[uid] = cs
	}
	b, err := json.Marshal(f)
	if err != nil {
		return nil, fmt.Errorf("encode allocation state: %w", err)
	}
	return b, nil
}

// Store is the allocation record of the node's admitted pods, kept in a
// file so it survives a restart of heartlet. Every change is written to
// the file (atomically: a new file renamed over the old) before it is
// visible to Get. Its methods are safe for concurrent use.
type Store struct {
	path string

	mu   sync.Mutex
	pods map[types.UID]Allocation
}

// OpenStore reads the record at path; a missing file is an empty record.
// A file that cannot be parsed is an error: heartlet must not forget
// allocations it made.
func OpenStore(path string) (*Store, error) {
	s := &Store{path: path, pods: map[types.UID]Allocation{}}
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
	pods, err := ParseState(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	s.pods = pods
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
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.pods[uid]; ok && old.Equal(a) {
		return nil
	}
	next := maps.Clone(s.pods)
	cp := make(Allocation, len(a))
	for n, r := range a {
		cp[n] = *r.DeepCopy()
	}
	next[uid] = cp
	return s.commit(next)
}

// Remove forgets the pod's allocation; removing an unknown pod is no error.
func (s *Store) Remove(uid types.UID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.pods[uid]; !ok {
		return nil
	}
	next := maps.Clone(s.pods)
	delete(next, uid)
	return s.commit(next)
}

// RemoveOrphans forgets every pod not in keep.
func (s *Store) RemoveOrphans(keep map[types.UID]bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := maps.Clone(s.pods)
	maps.DeleteFunc(next, func(uid types.UID, _ Allocation) bool { return !keep[uid] })
	if len(next) == len(s.pods) {
		return nil
	}
	return s.commit(next)
}

// UIDs lists the pods with an allocation, sorted.
func (s *Store) UIDs() []types.UID {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.pods))
}

// commit writes next to the file and then makes it the record; s.mu is held.
func (s *Store) commit(next map[types.UID]Allocation) error {
	data, err := encodeState(next)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(s.path, data); err != nil {
		return err
	}
	s.pods = next
	return nil
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
