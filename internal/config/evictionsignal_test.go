package config

import (
	"strings"
	"testing"
)

func TestEvictionMemorySignalFlag(t *testing.T) {
	e := fakeEnv(map[string]string{"ok.yaml": header + "maxPods: 10\n"}, "node1")
	for _, tc := range []struct {
		args []string
		want string // the signal, or the problem
	}{
		{nil, EvictionMemoryWorkingSet},
		{[]string{"--config", "ok.yaml"}, EvictionMemoryWorkingSet},
		{[]string{"--eviction-memory-signal=reclaimable"}, EvictionMemoryReclaimable},
		{[]string{"--eviction_memory_signal", "workingset", "--config", "ok.yaml"}, EvictionMemoryWorkingSet},
		{[]string{"--eviction-memory-signal=cache"}, `flag --eviction-memory-signal: evictionMemorySignal: Unsupported value: "cache": supported values: "workingset", "reclaimable"`},
		{[]string{"--eviction-memory-signal="}, `flag --eviction-memory-signal: evictionMemorySignal: Unsupported value: ""`},
	} {
		opts, err := load(tc.args, e)
		got := ""
		if err != nil {
			got = err.Error()
		} else {
			got = opts.EvictionMemorySignal
		}
		if !strings.HasPrefix(got, tc.want) {
			t.Errorf("%q: got %q, want %q", tc.args, got, tc.want)
		}
	}
	if !strings.Contains(FlagUsages(), "--eviction-memory-signal") {
		t.Errorf("FlagUsages does not list --eviction-memory-signal")
	}
}
