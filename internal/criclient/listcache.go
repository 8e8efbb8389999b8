package criclient

import (
	"errors"
	"fmt"
	"hash/maphash"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// listCache keeps the items of the last full list (ListContainers or
// ListPodSandbox without a filter) by the hash of their encoding, so that
// the next list decodes only the items whose encoding changed: an item's
// encoding is the same bytes as long as nothing of it changed (the
// runtime encodes the same fields of the same values in the same order), and
// a relist every second of a node whose containers and sandboxes mostly do
// not change then decodes next to nothing. Without it, decoding the two
// lists was most of what a relist allocated: about 600 KB a second with 100
// pods, whose labels and annotations maps alone were decoded anew each time.
//
// An item whose encoding differs in any byte (its state, a field the
// runtime added) is decoded in full. The hash is seeded at random per
// process: no runtime's answer can be made to collide with another on
// purpose, and a chance collision of two different encodings (one in 2^64
// for each pair) would report one item's content as another's.
//
// Contract: the items returned are shared with earlier and later lists:
// callers must not modify them.
type listCache[T proto.Message] struct {
	newItem func() T

	mu   sync.Mutex
	seed maphash.Seed
	prev map[uint64]T
}

func newListCache[T proto.Message](newItem func() T) *listCache[T] {
	return &listCache[T]{newItem: newItem, seed: maphash.MakeSeed()}
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
		h := maphash.Bytes(c.seed, b)
		item, ok := c.prev[h]
		if !ok {
			item, ok = next[h] // the same encoding twice in one answer
		}
		if !ok {
			item = c.newItem()
			if err := proto.Unmarshal(b, item); err != nil {
				return fmt.Errorf("list response: item %d: %w", len(items), err)
			}
		}
		next[h] = item
		items = append(items, item)
	}
	c.prev = next
	l.items = items
	return nil
}
