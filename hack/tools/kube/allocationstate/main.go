// Command allocationstate prints the allocated_pods_state checkpoint the
// upstream kubelet v1.37.2 writes for a fixed set of allocations, with its
// own code (k8s.io/kubernetes/pkg/kubelet/allocation/state). It generates
// internal/resize/testdata/upstream-allocated_pods_state:
//
//	cd hack/tools/kube && go run ./allocationstate > ../../../internal/resize/testdata/upstream-allocated_pods_state
//
// The allocations are the ones internal/resize's tests expect to read from
// that file.
package main

import (
	"fmt"
	"os"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/kubernetes/pkg/kubelet/allocation/state"
)

func main() {
	q := resource.MustParse
	limit := q("64Mi")
	info := &state.PodResourceCheckpointInfo{Entries: state.PodResourceInfoMap{
		"0b6f3a6e-5c1e-4c55-9f0e-2f1c1d1a7a01": {
			ContainerResources: map[string]v1.ResourceRequirements{
				"app": {
					Requests: v1.ResourceList{v1.ResourceCPU: q("250m"), v1.ResourceMemory: q("64Mi")},
					Limits:   v1.ResourceList{v1.ResourceMemory: q("128Mi")},
				},
				"sidecar": {},
			},
		},
		"9d1c2b3a-0000-4000-8000-000000000002": {
			ContainerResources: map[string]v1.ResourceRequirements{
				"main": {Requests: v1.ResourceList{v1.ResourceCPU: q("1")}},
			},
			PodLevelResources:    &v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceCPU: q("2")}},
			EmptyDirVolumeLimits: map[string]*resource.Quantity{"scratch": &limit},
		},
	}}
	cp, err := state.NewCheckpoint(info)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	b, err := cp.MarshalCheckpoint()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Stdout.Write(b)
}
