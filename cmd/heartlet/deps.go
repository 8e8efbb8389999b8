package main

// Temporary: pins the modules the packages under internal/ are being built on
// so go.sum is complete while they land. Removed once they import them.
import (
	_ "github.com/fsnotify/fsnotify"
	_ "github.com/opencontainers/cgroups"
	_ "github.com/opencontainers/cgroups/fs"
	_ "github.com/opencontainers/cgroups/fs2"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/prometheus/client_golang/prometheus/testutil"
	_ "golang.org/x/sync/errgroup"
	_ "google.golang.org/grpc"
	_ "k8s.io/api/core/v1"
	_ "k8s.io/apimachinery/pkg/api/resource"
	_ "k8s.io/apimachinery/pkg/util/validation/field"
	_ "k8s.io/apimachinery/pkg/util/yaml"
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/client-go/kubernetes/fake"
	_ "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/cri-api/pkg/apis/runtime/v1"
	_ "k8s.io/cri-client/pkg"
	_ "k8s.io/klog/v2"
	_ "k8s.io/kubelet/config/v1beta1"
	_ "k8s.io/utils/clock/testing"
	_ "sigs.k8s.io/yaml"
)
