package nodestatus

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// TestLocalStorageCapacity: the node reports its root filesystem as
// ephemeral-storage capacity and allocatable, and with
// localStorageCapacityIsolation off neither, as upstream, and is Ready
// all the same.
func TestLocalStorageCapacity(t *testing.T) {
	for _, tt := range []struct {
		name string
		off  bool
	}{{"isolation on", false}, {"isolation off", true}} {
		t.Run(tt.name, func(t *testing.T) {
			opts := defaultOptions()
			opts.NoLocalStorage = tt.off
			f := newFixture(t, opts)
			if err := f.m.syncStatus(context.Background()); err != nil {
				t.Fatal(err)
			}
			n := f.node(t)
			_, inCapacity := n.Status.Capacity[v1.ResourceEphemeralStorage]
			_, inAllocatable := n.Status.Allocatable[v1.ResourceEphemeralStorage]
			_, inAdmission := f.m.Allocatable()[v1.ResourceEphemeralStorage]
			if inCapacity == tt.off || inAllocatable == tt.off || inAdmission == tt.off {
				t.Errorf("ephemeral-storage in capacity %v, allocatable %v, admission's allocatable %v; want %v",
					inCapacity, inAllocatable, inAdmission, !tt.off)
			}
			if r := condition(n, v1.NodeReady); r.Status != v1.ConditionTrue {
				t.Errorf("Ready = %+v, want True", r)
			}
		})
	}
	// A node registered by a run with the isolation on loses the
	// ephemeral-storage it reported once the isolation is off.
	f := newFixture(t, defaultOptions())
	if err := f.m.syncStatus(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.node(t).Status.Capacity[v1.ResourceEphemeralStorage]; !ok {
		t.Fatal("no ephemeral-storage capacity with the isolation on")
	}
	f.m.opts.NoLocalStorage = true
	f.m.allocatable = nil
	if err := f.m.syncStatus(context.Background()); err != nil {
		t.Fatal(err)
	}
	n := f.node(t)
	_, inCapacity := n.Status.Capacity[v1.ResourceEphemeralStorage]
	_, inAllocatable := n.Status.Allocatable[v1.ResourceEphemeralStorage]
	if inCapacity || inAllocatable {
		t.Errorf("after turning the isolation off: ephemeral-storage in capacity %v, allocatable %v; want neither", inCapacity, inAllocatable)
	}
}
