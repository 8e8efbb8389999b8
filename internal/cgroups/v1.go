package cgroups

// HostVersion is the cgroup version of the host's hierarchy mounted at
// root (DefaultRoot when empty): 2 when it is the unified hierarchy, else 1
// (a legacy or hybrid host).
func HostVersion(root string) (int, error) {
	if root == "" {
		root = DefaultRoot
	}
	v2, err := isUnified(root)
	if err != nil {
		return 0, err
	}
	if v2 {
		return 2, nil
	}
	return 1, nil
}

// V1Warning is the warning for failCgroupV1 on a host of cgroup version
// version, or "". The upstream kubelet (1.35 and later) refuses to start on
// a cgroup v1 host unless failCgroupV1 is false
// (its configuration validation,
// pkg/kubelet/apis/config/validation/validation_linux.go in v1.37.2). heartlet starts
// there anyway, so that nodes it already runs keep running, and says that
// upstream would not.
func V1Warning(version int, failCgroupV1 bool) string {
	if version != 1 || !failCgroupV1 {
		return ""
	}
	return "this host runs cgroup v1 and failCgroupV1 is true (the default): the upstream kubelet refuses to start here, heartlet starts; set failCgroupV1: false to run on cgroup v1 on purpose, or move the node to cgroup v2"
}
