package criclient

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	protobuf "google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// container is a container as the runtime lists it, with heartlet's labels
// and annotations.
func container(id string, state runtimeapi.ContainerState) *runtimeapi.Container {
	return &runtimeapi.Container{
		Id:           id,
		PodSandboxId: "sandbox-of-" + id,
		Metadata:     &runtimeapi.ContainerMetadata{Name: "c-" + id, Attempt: 1},
		Image:        &runtimeapi.ImageSpec{Image: "busybox"},
		ImageRef:     "sha256:" + id,
		State:        state,
		CreatedAt:    1_000,
		Labels:       map[string]string{"io.kubernetes.pod.uid": "uid-" + id, "io.kubernetes.container.name": "c-" + id},
		Annotations:  map[string]string{"io.kubernetes.container.hash": "1234", "io.kubernetes.container.restartCount": "0"},
	}
}

func containersByID(items []*runtimeapi.Container) map[string]*runtimeapi.Container {
	out := map[string]*runtimeapi.Container{}
	for _, c := range items {
		out[c.GetId()] = c
	}
	return out
}

// TestFullListsReuseUnchangedItems: through a gRPC runtime, a full
// ListContainers returns the very objects of the last full list for the
// containers whose encoding is unchanged, and decodes the changed and new
// ones; a filtered list decodes everything and leaves the cache alone.
func TestFullListsReuseUnchangedItems(t *testing.T) {
	var mu sync.Mutex
	var listed []*runtimeapi.Container
	set := func(items ...*runtimeapi.Container) {
		mu.Lock()
		defer mu.Unlock()
		listed = items
	}
	f := &fake{unary: map[string]unaryFunc{"ListContainers": func(context.Context, any) (any, error) {
		mu.Lock()
		defer mu.Unlock()
		return &runtimeapi.ListContainersResponse{Containers: listed}, nil
	}}}
	rs, _ := f.clients(t, 5*time.Second)
	ctx := context.Background()
	list := func(filter *runtimeapi.ContainerFilter, want ...*runtimeapi.Container) map[string]*runtimeapi.Container {
		t.Helper()
		got, err := rs.ListContainers(ctx, filter)
		if err != nil {
			t.Fatalf("ListContainers: %v", err)
		}
		if len(got) != len(want) {
			t.Fatalf("ListContainers returned %d containers, want %d", len(got), len(want))
		}
		for i := range want {
			if !protobuf.Equal(got[i], want[i]) {
				t.Fatalf("container %d: got %v, want %v", i, got[i], want[i])
			}
		}
		return containersByID(got)
	}

	a, b, c := container("a", runtimeapi.ContainerState_CONTAINER_RUNNING), container("b", runtimeapi.ContainerState_CONTAINER_RUNNING), container("c", runtimeapi.ContainerState_CONTAINER_RUNNING)
	set(a, b, c)
	first := list(nil, a, b, c)

	bExited := container("b", runtimeapi.ContainerState_CONTAINER_EXITED)
	d := container("d", runtimeapi.ContainerState_CONTAINER_CREATED)
	set(a, bExited, d)
	second := list(nil, a, bExited, d)
	if second["a"] != first["a"] {
		t.Error("unchanged container a was decoded anew, want the last list's object")
	}
	if second["b"] == first["b"] {
		t.Error("container b, whose state changed, is the last list's object")
	}
	if first["b"].GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("the last list's container b changed to %s", first["b"].GetState())
	}

	filtered := list(&runtimeapi.ContainerFilter{LabelSelector: map[string]string{"x": "y"}}, a, bExited, d)
	for id, got := range filtered {
		if got == second[id] {
			t.Errorf("filtered list: container %s is a cached object, want one decoded for it", id)
		}
	}

	third := list(nil, a, bExited, d)
	for id, got := range third {
		if got != second[id] {
			t.Errorf("container %s decoded anew after a filtered list, want the last full list's object", id)
		}
	}
}

// TestFullSandboxListsReuseUnchangedItems: ListPodSandbox as above.
func TestFullSandboxListsReuseUnchangedItems(t *testing.T) {
	sandbox := func(id string, state runtimeapi.PodSandboxState) *runtimeapi.PodSandbox {
		return &runtimeapi.PodSandbox{
			Id:        id,
			Metadata:  &runtimeapi.PodSandboxMetadata{Name: "p-" + id, Namespace: "ns", Uid: "uid-" + id},
			State:     state,
			CreatedAt: 1_000,
			Labels:    map[string]string{"io.kubernetes.pod.uid": "uid-" + id},
		}
	}
	var mu sync.Mutex
	items := []*runtimeapi.PodSandbox{sandbox("a", runtimeapi.PodSandboxState_SANDBOX_READY), sandbox("b", runtimeapi.PodSandboxState_SANDBOX_READY)}
	f := &fake{unary: map[string]unaryFunc{"ListPodSandbox": func(context.Context, any) (any, error) {
		mu.Lock()
		defer mu.Unlock()
		return &runtimeapi.ListPodSandboxResponse{Items: items}, nil
	}}}
	rs, _ := f.clients(t, 5*time.Second)
	first, err := rs.ListPodSandbox(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	items = []*runtimeapi.PodSandbox{items[0], sandbox("b", runtimeapi.PodSandboxState_SANDBOX_NOTREADY)}
	mu.Unlock()
	second, err := rs.ListPodSandbox(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != 2 || len(second) != 2 {
		t.Fatalf("lists of %d and %d sandboxes, want 2 and 2", len(first), len(second))
	}
	if second[0] != first[0] {
		t.Error("unchanged sandbox a was decoded anew, want the last list's object")
	}
	if second[1] == first[1] || second[1].GetState() != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		t.Errorf("sandbox b: got %v (the last list's object: %t), want a new NOTREADY one", second[1], second[1] == first[1])
	}
}

// encodeList is the encoding of a ListContainersResponse of items.
func encodeList(t testing.TB, items ...*runtimeapi.Container) []byte {
	t.Helper()
	b, err := protobuf.MarshalOptions{Deterministic: true}.Marshal(&runtimeapi.ListContainersResponse{Containers: items})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newContainerCache() *listCache[*runtimeapi.Container] {
	return newListCache(func() *runtimeapi.Container { return &runtimeapi.Container{} })
}

// TestCachedListDecode: the response's other fields are skipped, an empty
// response is an empty list, and a response that does not decode is an
// error that leaves the cache as it was.
func TestCachedListDecode(t *testing.T) {
	a := container("a", runtimeapi.ContainerState_CONTAINER_RUNNING)
	good := encodeList(t, a)
	withOther := protowire.AppendVarint(protowire.AppendTag(append([]byte(nil), good...), 7, protowire.VarintType), 42)
	withOther = protowire.AppendBytes(protowire.AppendTag(withOther, 8, protowire.BytesType), []byte("other"))
	for _, tt := range []struct {
		name    string
		data    []byte
		want    int // items; -1: an error
		reusesA bool
	}{
		{"the same list", good, 1, true},
		{"other fields skipped", withOther, 1, true},
		{"empty", nil, 0, false},
		{"truncated tag", []byte{0x80}, -1, false},
		{"truncated item", good[:len(good)-3], -1, false},
		{"an item that is not a container", protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte{0xff, 0xff}), -1, false},
		{"truncated other field", protowire.AppendTag(append([]byte(nil), good...), 9, protowire.BytesType), -1, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cache := newContainerCache()
			first := &cachedList[*runtimeapi.Container]{cache: cache}
			if err := first.decode(good); err != nil {
				t.Fatal(err)
			}
			l := &cachedList[*runtimeapi.Container]{cache: cache}
			err := l.decode(tt.data)
			if tt.want < 0 {
				if err == nil {
					t.Fatalf("decoded %d items, want an error", len(l.items))
				}
				// The cache is as it was: the good list reuses a.
				again := &cachedList[*runtimeapi.Container]{cache: cache}
				if err := again.decode(good); err != nil || again.items[0] != first.items[0] {
					t.Errorf("after the error the good list is not the cached one (err %v)", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(l.items) != tt.want {
				t.Fatalf("%d items, want %d", len(l.items), tt.want)
			}
			if tt.reusesA && l.items[0] != first.items[0] {
				t.Error("container a decoded anew")
			}
		})
	}
}

// TestCodecDecodesCachedLists: the codec hands a cached list the response
// whether it came in one buffer or in several.
func TestCodecDecodesCachedLists(t *testing.T) {
	var items []*runtimeapi.Container
	for i := range 300 {
		items = append(items, container(fmt.Sprintf("%064d", i), runtimeapi.ContainerState_CONTAINER_RUNNING))
	}
	data := encodeList(t, items...)
	for _, pieces := range []int{1, 7} {
		t.Run(fmt.Sprintf("%d buffers", pieces), func(t *testing.T) {
			var slice mem.BufferSlice
			step := (len(data) + pieces - 1) / pieces
			for off := 0; off < len(data); off += step {
				slice = append(slice, mem.SliceBuffer(data[off:min(off+step, len(data))]))
			}
			l := &cachedList[*runtimeapi.Container]{cache: newContainerCache()}
			if err := newCodec(mem.DefaultBufferPool()).Unmarshal(slice, l); err != nil {
				t.Fatal(err)
			}
			if len(l.items) != len(items) {
				t.Fatalf("%d items, want %d", len(l.items), len(items))
			}
			for i := range items {
				if !protobuf.Equal(l.items[i], items[i]) {
					t.Fatalf("item %d: got %v, want %v", i, l.items[i], items[i])
				}
			}
		})
	}
}

// FuzzCachedListDecode: whatever the runtime answers, decoding neither
// panics nor differs from the proto decoder where both succeed, and the
// same answer decoded again through the same cache is the same objects.
func FuzzCachedListDecode(f *testing.F) {
	f.Add(encodeList(f, container("a", runtimeapi.ContainerState_CONTAINER_RUNNING), container("b", runtimeapi.ContainerState_CONTAINER_EXITED)))
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0x02, 0x0a, 0x00})
	f.Fuzz(func(t *testing.T, data []byte) {
		cache := newContainerCache()
		l := &cachedList[*runtimeapi.Container]{cache: cache}
		err := l.decode(data)
		var want runtimeapi.ListContainersResponse
		wantErr := protobuf.Unmarshal(data, &want)
		if err != nil || wantErr != nil {
			return
		}
		if len(l.items) != len(want.Containers) {
			t.Fatalf("%d items, the proto decoder %d", len(l.items), len(want.Containers))
		}
		for i := range l.items {
			if !protobuf.Equal(l.items[i], want.Containers[i]) {
				t.Fatalf("item %d: %v, the proto decoder %v", i, l.items[i], want.Containers[i])
			}
		}
		again := &cachedList[*runtimeapi.Container]{cache: cache}
		if err := again.decode(data); err != nil {
			t.Fatalf("the same answer again: %v", err)
		}
		for i := range l.items {
			if again.items[i] != l.items[i] {
				t.Fatalf("item %d decoded anew from the same answer", i)
			}
		}
	})
}
