//go:build tools

// Package kube pins the Kubernetes commands that heartlet's cluster tests
// build (see hack/kube.sh): the control plane, and the upstream kubelet that
// the switch test and the side-by-side benchmark run next to heartlet.
// csimock (upstream's CSI mock driver service) is built from this module too.
// Nothing here is compiled into heartlet.
package kube

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
