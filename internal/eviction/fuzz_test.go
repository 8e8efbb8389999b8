package eviction

import (
	"testing"
)

// FuzzParseThresholds checks that any threshold value either is refused
// or gives a threshold whose amount is within its signal's capacity.
func FuzzParseThresholds(f *testing.F) {
	for _, seed := range [][3]string{
		{"memory.available", "100Mi", "50Mi"},
		{"nodefs.available", "10%", "1%"},
		{"pid.available", "1000", "0"},
		{"imagefs.inodesFree", "100.5%", "-1"},
		{"containerfs.available", "1e3", "NaN%"},
	} {
		f.Add(seed[0], seed[1], seed[2])
	}
	f.Fuzz(func(t *testing.T, signal, value, reclaim string) {
		ts, err := ParseThresholds(Config{
			Hard:           map[string]string{signal: value},
			MinimumReclaim: map[string]string{signal: reclaim},
		})
		if err != nil {
			return
		}
		capacity := obsBytes(1<<20, 1<<30).Capacity
		for _, th := range ts {
			if th.Signal != Signal(signal) || !th.Hard {
				t.Fatalf("threshold %+v from %s=%s", th, signal, value)
			}
			if q := th.Value.Of(capacity); q.Sign() < 0 || (th.Value.Quantity != nil && q.Sign() == 0) {
				t.Fatalf("%s=%q gave a threshold of %s", signal, value, q.String())
			}
			if th.Value.Quantity == nil && (th.Value.Percentage <= 0 || th.Value.Percentage >= 1) {
				t.Fatalf("%s=%q gave a percentage of %v", signal, value, th.Value.Percentage)
			}
		}
	})
}
