package nodestatus

import "testing"

func TestPodCapacity(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		maxPods, perCore, cpus int
		want                   int
	}{
		{"no podsPerCore", 110, 0, 4, 110},
		{"podsPerCore below maxPods", 110, 10, 4, 40},
		{"podsPerCore above maxPods", 110, 50, 4, 110},
		{"equal", 40, 10, 4, 40},
		{"unknown cpus", 110, 10, 0, 110},
	} {
		if got := PodCapacity(tc.maxPods, tc.perCore, tc.cpus); got != tc.want {
			t.Errorf("%s: PodCapacity(%d, %d, %d) = %d, want %d", tc.name, tc.maxPods, tc.perCore, tc.cpus, got, tc.want)
		}
	}
}
