package criclient

import (
	"bytes"
	"context"
	"fmt"
	"slices"
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

// fields splits an encoded message into its fields.
func fields(t testing.TB, b []byte) [][]byte {
	t.Helper()
	var out [][]byte
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		m := protowire.ConsumeFieldValue(num, typ, b[max(n, 0):])
		if n < 0 || m < 0 {
			t.Fatal("the encoding does not parse")
		}
		out = append(out, b[:n+m])
		b = b[n+m:]
	}
	return out
}

// listOfItem is a list response whose one item is encoded as the fields
// given.
func listOfItem(fields ...[]byte) []byte {
	var item []byte
	for _, f := range fields {
		item = append(item, f...)
	}
	return protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), item)
}

// TestCachedListDecode: the response's other fields are skipped, an empty
// response is an empty list, a map's entries count whatever their order
// (but a key written twice is decoded each time), and a response that does
// not decode is an error that leaves the cache as it was.
func TestCachedListDecode(t *testing.T) {
	a := container("a", runtimeapi.ContainerState_CONTAINER_RUNNING)
	good := encodeList(t, a)
	_, _, n := protowire.ConsumeTag(good)
	item, _ := protowire.ConsumeBytes(good[n:])
	aFields := fields(t, item)
	reversed := slices.Clone(aFields)
	slices.Reverse(reversed)
	// a's fields with its label entries (field 8) swapped: the same map.
	var labelsSwapped [][]byte
	var labels [][]byte
	for _, f := range aFields {
		if f[0] == 8<<3|2 {
			labels = append(labels, f)
		}
	}
	if len(labels) != 2 {
		t.Fatalf("%d label entries, want 2", len(labels))
	}
	for _, f := range aFields {
		switch {
		case bytes.Equal(f, labels[0]):
			labelsSwapped = append(labelsSwapped, labels[1])
		case bytes.Equal(f, labels[1]):
			labelsSwapped = append(labelsSwapped, labels[0])
		default:
			labelsSwapped = append(labelsSwapped, f)
		}
	}
	// A label key written twice, with two values: the last one counts.
	twice := func(first, second string) []byte {
		entry := func(v string) []byte {
			e := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "k")
			e = protowire.AppendString(protowire.AppendTag(e, 2, protowire.BytesType), v)
			return protowire.AppendBytes(protowire.AppendTag(nil, 8, protowire.BytesType), e)
		}
		return listOfItem(append(slices.Clone(aFields), entry(first), entry(second))...)
	}
	withOther := protowire.AppendVarint(protowire.AppendTag(append([]byte(nil), good...), 7, protowire.VarintType), 42)
	withOther = protowire.AppendBytes(protowire.AppendTag(withOther, 8, protowire.BytesType), []byte("other"))
	for _, tt := range []struct {
		name    string
		data    []byte
		want    int // items; -1: an error
		reusesA bool
	}{
		{"the same list", good, 1, true},
		{"the same list, a map's entries in another order", listOfItem(labelsSwapped...), 1, true},
		{"the fields in another order: decoded anew", listOfItem(reversed...), 1, false},
		{"a map key twice: decoded anew", twice("1", "2"), 1, false},
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
			if tt.want > 0 && (l.items[0] == first.items[0]) != tt.reusesA {
				t.Errorf("container a reused: %t, want %t", l.items[0] == first.items[0], tt.reusesA)
			}
		})
	}
}

// TestCachedListDuplicateKeys: the same entries of a map with a key
// written twice, in two orders, are two different maps (the last value
// counts): the second list does not reuse the first's object.
func TestCachedListDuplicateKeys(t *testing.T) {
	entry := func(v string) []byte {
		e := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "k")
		e = protowire.AppendString(protowire.AppendTag(e, 2, protowire.BytesType), v)
		return protowire.AppendBytes(protowire.AppendTag(nil, 8, protowire.BytesType), e)
	}
	id := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "a")
	cache := newContainerCache()
	for _, order := range [][2]string{{"1", "2"}, {"2", "1"}} {
		l := &cachedList[*runtimeapi.Container]{cache: cache}
		if err := l.decode(listOfItem(id, entry(order[0]), entry(order[1]))); err != nil {
			t.Fatal(err)
		}
		if got := l.items[0].GetLabels()["k"]; got != order[1] {
			t.Errorf("entries %v: label k = %q, want the last, %q", order, got, order[1])
		}
	}
	// The same, the empty key written two ways: no key field, and a key
	// field of the varint type, which the decoder skips.
	noKey := func(v string) []byte {
		e := protowire.AppendString(protowire.AppendTag(nil, 2, protowire.BytesType), v)
		return protowire.AppendBytes(protowire.AppendTag(nil, 8, protowire.BytesType), e)
	}
	varintKey := func(v string) []byte {
		e := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 5)
		e = protowire.AppendString(protowire.AppendTag(e, 2, protowire.BytesType), v)
		return protowire.AppendBytes(protowire.AppendTag(nil, 8, protowire.BytesType), e)
	}
	cache = newContainerCache()
	for _, tc := range []struct {
		first, second []byte
		want          string
	}{
		{noKey("1"), varintKey("2"), "2"},
		{varintKey("2"), noKey("1"), "1"},
	} {
		l := &cachedList[*runtimeapi.Container]{cache: cache}
		if err := l.decode(listOfItem(id, tc.first, tc.second)); err != nil {
			t.Fatal(err)
		}
		if got := l.items[0].GetLabels()[""]; got != tc.want {
			t.Errorf("label \"\" = %q, want the last, %q", got, tc.want)
		}
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
		// Every item with a key (not one with a map key written twice) is
		// the same object again.
		i := 0
		var reversed []byte // the answer with each item's fields reversed
		for rest := data; len(rest) > 0; {
			num, typ, n := protowire.ConsumeTag(rest)
			m := protowire.ConsumeFieldValue(num, typ, rest[n:])
			if num == 1 && typ == protowire.BytesType {
				item, _ := protowire.ConsumeBytes(rest[n:])
				if _, keyed := cache.key(item, map[uint64]struct{}{}); keyed && again.items[i] != l.items[i] {
					t.Fatalf("item %d decoded anew from the same answer", i)
				}
				i++
				fs := fields(t, item)
				slices.Reverse(fs)
				reversed = append(reversed, listOfItem(fs...)...)
			}
			rest = rest[n+m:]
		}
		// The same items with their fields in the reverse order (their map
		// entries too) decode as the proto decoder reads them, through the
		// cache that holds them in the first order.
		var wantRev runtimeapi.ListContainersResponse
		if err := protobuf.Unmarshal(reversed, &wantRev); err != nil {
			return
		}
		rev := &cachedList[*runtimeapi.Container]{cache: cache}
		if err := rev.decode(reversed); err != nil {
			t.Fatalf("the answer reversed: %v", err)
		}
		for i := range rev.items {
			if !protobuf.Equal(rev.items[i], wantRev.Containers[i]) {
				t.Fatalf("reversed item %d: %v, the proto decoder %v", i, rev.items[i], wantRev.Containers[i])
			}
		}
	})
}

// BenchmarkListContainers100: a full ListContainers of 100 unchanged
// containers through a gRPC runtime, as a relist of a node with 100 pods
// makes every second: "cached" through the list cache, "decoded" with a
// filter that matches them all, which decodes every container.
func BenchmarkListContainers100(b *testing.B) {
	var items []*runtimeapi.Container
	for i := range 100 {
		items = append(items, container(fmt.Sprintf("%064d", i), runtimeapi.ContainerState_CONTAINER_RUNNING))
	}
	f := &fake{unary: map[string]unaryFunc{"ListContainers": answer(&runtimeapi.ListContainersResponse{Containers: items})}}
	endpoint := f.start(b)
	rs, err := NewRuntimeService(context.Background(), endpoint, 5*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = rs.Close(context.Background()) }()
	for _, bm := range []struct {
		name   string
		filter *runtimeapi.ContainerFilter
	}{
		{"cached", nil},
		{"decoded", &runtimeapi.ContainerFilter{}},
	} {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := rs.ListContainers(context.Background(), bm.filter); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
