package podsync

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/flowcontrol"
)

// podBackoff is a keyed backoff whose keys are remembered per pod, so that
// every entry of a pod is dropped when the pod is: flowcontrol.Backoff
// alone keeps an entry until it is reset, and a removed pod never resets
// its own. Safe for concurrent use.
type podBackoff struct {
	*flowcontrol.Backoff

	mu   sync.Mutex
	keys map[types.UID]map[string]struct{}
}

func newPodBackoff(b *flowcontrol.Backoff) *podBackoff {
	return &podBackoff{Backoff: b, keys: map[types.UID]map[string]struct{}{}}
}

// next advances the backoff of key, an entry of pod uid.
func (b *podBackoff) next(uid types.UID, key string, at time.Time) {
	b.mu.Lock()
	ks := b.keys[uid]
	if ks == nil {
		ks = map[string]struct{}{}
		b.keys[uid] = ks
	}
	ks[key] = struct{}{}
	b.mu.Unlock()
	b.Next(key, at)
}

// forget drops every entry of pod uid.
func (b *podBackoff) forget(uid types.UID) {
	b.mu.Lock()
	ks := b.keys[uid]
	delete(b.keys, uid)
	b.mu.Unlock()
	for k := range ks {
		b.DeleteEntry(k)
	}
}

// len is the number of entries held (for tests).
func (b *podBackoff) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, ks := range b.keys {
		n += len(ks)
	}
	return n
}
