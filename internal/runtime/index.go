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

// podObjects are one pod's objects.
type podObjects struct {
	sandboxes  map[string]*indexedSandbox
	containers map[string]*indexedContainer
}

// The index also keeps the last status read of each object, with the state
// the object was last known in: listed by a full list, changed through the
// Runtime (started, stopped) or reported by a container event. A status is
// reused while the object's known state is the status's own: the fields
// of a sandbox's or a container's status change only with its state (a
// sandbox's IPs and namespaces, a container's start time, exit code,
// reason, mounts), save a container's resources, which change only through
// UpdateContainerResources here. What changes the runtime makes on its own
// (a container exits, a sandbox's pause process dies) is seen at the next
// full list or container event, as the PLEG sees it; a status read before
// it is reported until then. A pod start then reads its sandbox's status
// once (SandboxIPs) instead of three times, its container's once instead
// of twice.

// indexedSandbox is one sandbox in the index.
type indexedSandbox struct {
	// seq is the change that recorded it through the Runtime (0 when it
	// came from a full list).
	seq uint64
	// state is the sandbox's last known state.
	state runtimeapi.PodSandboxState
	// status is the last status read, or nil.
	status *runtimeapi.PodSandboxStatus
	// version counts the entry's changes; a status read is kept only if
	// none happened while it was read.
	version uint64
}

type indexedContainer struct {
	// listed is what a ListContainers would report of the container, as
	// far as GetPodStatus reads it (its sandbox, and the labels,
	// annotations and image when the status call leaves them out).
	listed *runtimeapi.Container
	seq    uint64
	// state is the container's last known state.
	state   runtimeapi.ContainerState
	status  *runtimeapi.ContainerStatus
	version uint64
}

func newObjectIndex() *objectIndex {
	return &objectIndex{pods: map[types.UID]*podObjects{}, owner: map[string]types.UID{}, removed: map[string]uint64{}}
}

func (x *objectIndex) pod(uid types.UID) *podObjects {
	p := x.pods[uid]
	if p == nil {
		p = &podObjects{sandboxes: map[string]*indexedSandbox{}, containers: map[string]*indexedContainer{}}
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

// addSandbox records a sandbox created, and so ready, through the Runtime.
func (x *objectIndex) addSandbox(uid types.UID, id string) {
	if uid == "" {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.seq++
	x.pod(uid).sandboxes[id] = &indexedSandbox{seq: x.seq, state: runtimeapi.PodSandboxState_SANDBOX_READY}
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
	x.pod(uid).containers[c.GetId()] = &indexedContainer{listed: c, seq: x.seq, state: runtimeapi.ContainerState_CONTAINER_CREATED}
	x.owner[c.GetId()] = uid
}

// sandboxEntry and containerEntry return an object's entry, or nil. x.mu
// is held.
func (x *objectIndex) sandboxEntry(id string) *indexedSandbox {
	if p := x.pods[x.owner[id]]; p != nil {
		return p.sandboxes[id]
	}
	return nil
}

func (x *objectIndex) containerEntry(id string) *indexedContainer {
	if p := x.pods[x.owner[id]]; p != nil {
		return p.containers[id]
	}
	return nil
}

// setSandboxState records a sandbox's state (stopped through the Runtime,
// or reported by an event); a change of state forgets its status. A
// stopped sandbox's containers have exited.
func (x *objectIndex) setSandboxState(id string, state runtimeapi.PodSandboxState) {
	x.mu.Lock()
	defer x.mu.Unlock()
	e := x.sandboxEntry(id)
	if e == nil || e.state == state {
		return
	}
	e.state, e.status = state, nil
	e.version++
	if state != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		return
	}
	for _, c := range x.pods[x.owner[id]].containers {
		if c.listed.GetPodSandboxId() == id && c.state != runtimeapi.ContainerState_CONTAINER_EXITED {
			c.state, c.status = runtimeapi.ContainerState_CONTAINER_EXITED, nil
			c.version++
		}
	}
}

// setContainerState records a container's new state and forgets its
// status; with st, st is its status.
func (x *objectIndex) setContainerState(id string, state runtimeapi.ContainerState, st *runtimeapi.ContainerStatus) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if e := x.containerEntry(id); e != nil {
		e.state, e.status = state, st
		e.version++
	}
}

// forgetStatus drops the status kept of an object, whose status changed
// with its state unchanged (a container's resources).
func (x *objectIndex) forgetStatus(id string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if e := x.containerEntry(id); e != nil {
		e.status = nil
		e.version++
	}
	if e := x.sandboxEntry(id); e != nil {
		e.status = nil
		e.version++
	}
}

// keepSandboxStatus keeps st, read of the sandbox ref names, unless its
// entry changed since ref was taken.
func (x *objectIndex) keepSandboxStatus(ref sandboxRef, st *runtimeapi.PodSandboxStatus) {
	if ref.entry == nil {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if e := x.sandboxEntry(ref.id); e == ref.entry && e.version == ref.version {
		e.status = st
	}
}

// keepContainerStatus is keepSandboxStatus for a container.
func (x *objectIndex) keepContainerStatus(ref containerRef, st *runtimeapi.ContainerStatus) {
	if ref.entry == nil {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if e := x.containerEntry(ref.listed.GetId()); e == ref.entry && e.version == ref.version {
		e.status = st
	}
}

// keepSandboxStatusByID keeps st, a sandbox's status read outside
// GetPodStatus, when it is of the sandbox's known state.
func (x *objectIndex) keepSandboxStatusByID(st *runtimeapi.PodSandboxStatus) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if e := x.sandboxEntry(st.GetId()); e != nil && e.state == st.GetState() {
		e.status = st
	}
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
// was recorded since mark, minus what was removed since. The states are
// the listed ones; the statuses read are kept (they are reused only while
// of their object's state).
func (x *objectIndex) replace(mark uint64, sandboxes []*runtimeapi.PodSandbox, containers []*runtimeapi.Container) {
	x.mu.Lock()
	defer x.mu.Unlock()
	old := x.pods
	oldOwner := x.owner
	x.pods = map[types.UID]*podObjects{}
	x.owner = map[string]types.UID{}
	gone := func(id string) bool {
		seq, ok := x.removed[id]
		return ok && seq > mark
	}
	oldSandbox := func(id string) *indexedSandbox {
		if p := old[oldOwner[id]]; p != nil {
			return p.sandboxes[id]
		}
		return nil
	}
	oldContainer := func(id string) *indexedContainer {
		if p := old[oldOwner[id]]; p != nil {
			return p.containers[id]
		}
		return nil
	}
	for _, s := range sandboxes {
		uid := types.UID(s.GetLabels()[LabelPodUID])
		if uid == "" || gone(s.GetId()) {
			continue
		}
		e := &indexedSandbox{state: s.GetState()}
		if o := oldSandbox(s.GetId()); o != nil {
			e.status = o.status
		}
		x.pod(uid).sandboxes[s.GetId()] = e
		x.owner[s.GetId()] = uid
	}
	for _, c := range containers {
		uid := types.UID(c.GetLabels()[LabelPodUID])
		if uid == "" || gone(c.GetId()) {
			continue
		}
		e := &indexedContainer{listed: c, state: c.GetState()}
		if o := oldContainer(c.GetId()); o != nil {
			e.status = o.status
		}
		x.pod(uid).containers[c.GetId()] = e
		x.owner[c.GetId()] = uid
	}
	for uid, p := range old {
		for id, e := range p.sandboxes {
			if e.seq > mark {
				x.pod(uid).sandboxes[id] = e
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

// sandboxRef is one sandbox of a pod as the index knows it: cached is the
// status to reuse, nil when it must be read.
type sandboxRef struct {
	id      string
	entry   *indexedSandbox
	version uint64
	cached  *runtimeapi.PodSandboxStatus
}

// containerRef is one container of a pod as the index knows it.
type containerRef struct {
	listed  *runtimeapi.Container
	entry   *indexedContainer
	version uint64
	cached  *runtimeapi.ContainerStatus
}

// lookup returns the pod's sandboxes and containers as known; ok is false
// until a full list was applied.
func (x *objectIndex) lookup(uid types.UID) (sandboxes []sandboxRef, containers []containerRef, ok bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.primed {
		return nil, nil, false
	}
	p := x.pods[uid]
	if p == nil {
		return nil, nil, true
	}
	for id, e := range p.sandboxes {
		ref := sandboxRef{id: id, entry: e, version: e.version}
		if e.status != nil && e.status.GetState() == e.state {
			ref.cached = e.status
		}
		sandboxes = append(sandboxes, ref)
	}
	for _, c := range p.containers {
		ref := containerRef{listed: c.listed, entry: c, version: c.version}
		if c.status != nil && c.status.GetState() == c.state {
			ref.cached = c.status
		}
		containers = append(containers, ref)
	}
	return sandboxes, containers, true
}
