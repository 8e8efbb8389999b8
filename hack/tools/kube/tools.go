//go:build tools

// Package kube pins the Kubernetes control-plane commands that heartlet's
// cluster tests build (see hack/kube.sh); nothing here is compiled into
// heartlet.
package kube

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
