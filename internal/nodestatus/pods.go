package nodestatus

// PodCapacity is the most pods the node runs: maxPods, and with
// podsPerCore > 0 at most podsPerCore per CPU, as upstream's kubelet counts
// its pods capacity. Node capacity and admission both use it.
func PodCapacity(maxPods, podsPerCore, cpus int) int {
	if podsPerCore > 0 && cpus > 0 && podsPerCore*cpus < maxPods {
		return podsPerCore * cpus
	}
	return maxPods
}
