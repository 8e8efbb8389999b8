package runtime

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// objectIndex remembers which sandboxes and containers belong to each pod,
// so that GetPodStatus asks the runtime for the status of each object
// without listing: a ListPodSandbox or ListContainers with a label filter
// costs the runtime in proportion to every object it has (containerd
// converts all of them, then filters), so one per pod sync made a burst of
// N pod starts cost the runtime N² work.
//
// The index is built from the full lists of ListPods (the PLEG's relist,
// every second) and kept current between them with the objects created and
// removed through the same Runtime. An object someone else creates appears
// at the next full list; one someone else removes answers NotFound to its
// status call and is dropped. Until the first full list the index knows
// nothing and GetPodStatus lists.
type objectIndex struct {
	mu     sync.Mutex
	primed bool
	// seq counts the changes recorded; a full list applies what it saw
	// together with the changes recorded after it started.
	seq  uint64
	pods map[types.UID]*podObjects
	// owner is the pod of every object indexed.
	owner map[string]types.UID
	// removed records the objects removed through the Runtime, with the
	// seq of the removal, so that a list that started before the removal
	// does not bring them back.
	removed map[string]uint64
}

// podObjects are one pod's objects, each with the seq it was recorded at
// through the Runtime (0 when it came from a full list).
type podObjects struct {
	sandboxes  map[string]uint64
	containers map[string]indexedContainer
}

type indexedContainer struct {
	// listed is what a ListContainers would report of the container, as
	// far as GetPodStatus reads it (its sandbox, and the labels,
	// annotations and image when the status call leaves them out).
	listed *runtimeapi.Container
	seq    uint64
}

func newObjectIndex() *objectIndex {
	return &objectIndex{pods: map[types.UID]*podObjects{}, owner: map[string]types.UID{}, removed: map[string]uint64{}}
}

func (x *objectIndex) pod(uid types.UID) *podObjects {
	p := x.pods[uid]
	if p == nil {
		p = &podObjects{sandboxes: map[string]uint64{}, containers: map[string]indexedContainer{}}
		x.pods[uid] = p
	}
	return p
}

// begin returns the mark a full list passes to replace.
func (x *objectIndex) begin() uint64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.seq
}

// addSandbox records a sandbox created through the Runtime.
func (x *objectIndex) addSandbox(uid types.UID, id string) {
	if uid == "" {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.seq++
	x.pod(uid).sandboxes[id] = x.seq
	x.owner[id] = uid
}

// addContainer records a container created through the Runtime.
func (x *objectIndex) addContainer(uid types.UID, c *runtimeapi.Container) {
	if uid == "" {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.seq++
	x.pod(uid).containers[c.GetId()] = indexedContainer{listed: c, seq: x.seq}
	x.owner[c.GetId()] = uid
}

// remove forgets an object removed through the Runtime, or found gone; a
// sandbox's containers go with it.
func (x *objectIndex) remove(id string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.seq++
	x.removed[id] = x.seq
	uid, ok := x.owner[id]
	if !ok {
		return
	}
	delete(x.owner, id)
	if p := x.pods[uid]; p != nil {
		if _, ok := p.sandboxes[id]; ok {
			// Removing a sandbox removes its containers.
			delete(p.sandboxes, id)
			for cid, c := range p.containers {
				if c.listed.GetPodSandboxId() == id {
					delete(p.containers, cid)
					delete(x.owner, cid)
					x.removed[cid] = x.seq
				}
			}
		}
		delete(p.containers, id)
		if len(p.sandboxes) == 0 && len(p.containers) == 0 {
			delete(x.pods, uid)
		}
	}
}

// replace makes the index what a full list begun at mark saw, plus what
// was recorded since mark, minus what was removed since.
func (x *objectIndex) replace(mark uint64, sandboxes []*runtimeapi.PodSandbox, containers []*runtimeapi.Container) {
	x.mu.Lock()
	defer x.mu.Unlock()
	old := x.pods
	x.pods = map[types.UID]*podObjects{}
	x.owner = map[string]types.UID{}
	gone := func(id string) bool {
		seq, ok := x.removed[id]
		return ok && seq > mark
	}
	for _, s := range sandboxes {
		uid := types.UID(s.GetLabels()[LabelPodUID])
		if uid == "" || gone(s.GetId()) {
			continue
		}
		x.pod(uid).sandboxes[s.GetId()] = 0
		x.owner[s.GetId()] = uid
	}
	for _, c := range containers {
		uid := types.UID(c.GetLabels()[LabelPodUID])
		if uid == "" || gone(c.GetId()) {
			continue
		}
		x.pod(uid).containers[c.GetId()] = indexedContainer{listed: c}
		x.owner[c.GetId()] = uid
	}
	for uid, p := range old {
		for id, seq := range p.sandboxes {
			if seq > mark {
				x.pod(uid).sandboxes[id] = seq
				x.owner[id] = uid
			}
		}
		for id, c := range p.containers {
			if c.seq > mark {
				x.pod(uid).containers[id] = c
				x.owner[id] = uid
			}
		}
	}
	for id, seq := range x.removed {
		if seq <= mark {
			delete(x.removed, id)
		}
	}
	x.primed = true
}

// lookup returns the IDs of the pod's sandboxes and its containers as
// listed; ok is false until a full list was applied.
func (x *objectIndex) lookup(uid types.UID) (sandboxIDs []string, containers []*runtimeapi.Container, ok bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.primed {
		return nil, nil, false
	}
	p := x.pods[uid]
	if p == nil {
		return nil, nil, true
	}
	for id := range p.sandboxes {
		sandboxIDs = append(sandboxIDs, id)
	}
	for _, c := range p.containers {
		containers = append(containers, c.listed)
	}
	return sandboxIDs, containers, true
}
