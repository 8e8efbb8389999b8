package criclient

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// listCache keeps the items of the last full list (ListContainers or
// ListPodSandbox without a filter) by a hash of their encoding (see key),
// so that the next list decodes only the items whose encoding changed: an
// item is encoded as the same fields as long as nothing of it changed, and
// a relist every second of a node whose containers and sandboxes mostly do
// not change then decodes next to nothing. Without it, decoding the two
// lists was most of what a relist allocated: about 600 KB a second with 100
// pods, whose labels and annotations maps alone were decoded anew each time.
//
// An item with a field that differs in any byte (its state, a field the
// runtime added) is decoded in full. The hash is seeded at random per
// process: no runtime's answer can be made to collide with another on
// purpose, and a chance collision of two different items (about one in
// 2^64 for each pair) would report one item's content as another's.
//
// Contract: the items returned are shared with earlier and later lists:
// callers must not modify them.
type listCache[T proto.Message] struct {
	newItem func() T
	fields  protoreflect.FieldDescriptors

	mu   sync.Mutex
	seed maphash.Seed
	prev map[uint64]T
}

func newListCache[T proto.Message](newItem func() T) *listCache[T] {
	return &listCache[T]{
		newItem: newItem,
		fields:  newItem().ProtoReflect().Descriptor().Fields(),
		seed:    maphash.MakeSeed(),
	}
}

// key is a hash of an item's encoding, false when its fields do not parse
// or a map of it has a key twice. The item's fields are hashed in their
// order, but the entries of its maps, each a field of its own, count
// whatever their order: a runtime encoding with Go's protobuf (containerd
// 2) writes a map's entries in the map's random order, so that the same
// container is not the same bytes twice. An item with a map key twice
// (however written), where the order would decide which value counts, is
// not keyed: decoded every time.
// seen is scratch space.
func (c *listCache[T]) key(b []byte, seen map[uint64]struct{}) (uint64, bool) {
	var seq maphash.Hash
	seq.SetSeed(c.seed)
	var entries uint64
	clear(seen)
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, false
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return 0, false
		}
		field := b[:n+m]
		b = b[n+m:]
		fd := c.fields.ByNumber(num)
		if fd == nil || !fd.IsMap() || fd.MapKey().Kind() != protoreflect.StringKind || typ != protowire.BytesType {
			_, _ = seq.Write(field)
			continue
		}
		entry, _ := protowire.ConsumeBytes(field[n:])
		k, ok := entryKey(entry)
		if !ok {
			return 0, false
		}
		kh := maphash.Bytes(c.seed, k) + uint64(num)*0x9e3779b97f4a7c15
		if _, dup := seen[kh]; dup {
			return 0, false
		}
		seen[kh] = struct{}{}
		entries += maphash.Bytes(c.seed, field)
	}
	var sum [8]byte
	binary.LittleEndian.PutUint64(sum[:], entries)
	_, _ = seq.Write(sum[:])
	return seq.Sum64(), true
}

// entryKey is the key of a string-keyed map entry as the decoder reads
// it: its last field 1 of the bytes wire type (one of another type is
// skipped), empty without one.
func entryKey(entry []byte) ([]byte, bool) {
	var k []byte
	for len(entry) > 0 {
		num, typ, n := protowire.ConsumeTag(entry)
		if n < 0 {
			return nil, false
		}
		m := protowire.ConsumeFieldValue(num, typ, entry[n:])
		if m < 0 {
			return nil, false
		}
		if num == 1 && typ == protowire.BytesType {
			k, _ = protowire.ConsumeBytes(entry[n:])
		}
		entry = entry[n+m:]
	}
	return k, true
}

// decoder is a response the codec decodes itself, from its encoding.
type decoder interface {
	decode(data []byte) error
}

// cachedList is the reply of a full list decoded through a listCache: the
// response's field 1 (ListContainersResponse.containers,
// ListPodSandboxResponse.items) into items.
type cachedList[T proto.Message] struct {
	cache *listCache[T]
	items []T
}

var errTruncated = errors.New("truncated or invalid protobuf encoding")

// decode reads the response's items: an item encoded as one of the last
// list's is that item again, any other is decoded anew. The last list's
// items become this one's. Fields of the response other than the items
// are skipped.
func (l *cachedList[T]) decode(data []byte) error {
	c := l.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	next := make(map[uint64]T, len(c.prev))
	seen := map[uint64]struct{}{}
	items := make([]T, 0, len(c.prev))
	for len(data) > 0 {
		num, typ, n := protowire.ConsumeTag(data)
		if n < 0 {
			return fmt.Errorf("list response: %w", errTruncated)
		}
		data = data[n:]
		if num != 1 || typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, data)
			if n < 0 {
				return fmt.Errorf("list response: field %d: %w", num, errTruncated)
			}
			data = data[n:]
			continue
		}
		b, n := protowire.ConsumeBytes(data)
		if n < 0 {
			return fmt.Errorf("list response: item %d: %w", len(items), errTruncated)
		}
		data = data[n:]
		h, keyed := c.key(b, seen)
		item, ok := c.prev[h]
		if !ok {
			item, ok = next[h] // the same encoding twice in one answer
		}
		if !keyed || !ok {
			item = c.newItem()
			if err := proto.Unmarshal(b, item); err != nil {
				return fmt.Errorf("list response: item %d: %w", len(items), err)
			}
		}
		if keyed {
			next[h] = item
		}
		items = append(items, item)
	}
	c.prev = next
	l.items = items
	return nil
}
