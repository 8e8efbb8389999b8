package doctor

import (
	"context"
	"io/fs"
	"net"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/heartlet/heartlet/internal/config"
	"github.com/heartlet/heartlet/internal/kubeclient"
	"github.com/heartlet/heartlet/internal/runtime"
)

// Inputs is everything the checks read: the effective configuration, how
// to reach the API server and the runtime, and the machine.
type Inputs struct {
	// Opts is the configuration heartlet would run with.
	Opts *config.Options
	// Connect reaches the API server of Opts.Kubeconfig and checks it as
	// heartlet does at start; nil in standalone mode.
	Connect func(ctx context.Context) (*API, error)
	// ConnectRuntime reaches the CRI runtime of Opts.
	ConnectRuntime func(ctx context.Context) (Runtime, error)
	// Host reads the machine.
	Host Host
	// CNIConfDir and CNIBinDirs, when set, replace the directories the
	// runtime reports (or the defaults /etc/cni/net.d and /opt/cni/bin).
	CNIConfDir string
	CNIBinDirs []string
	// APIServerKubeletUser is the user the API server presents to the
	// kubelet API (its --kubelet-client-certificate's CN).
	APIServerKubeletUser string
}

// DefaultAPIServerKubeletUser is kubeadm's name of the API server's client
// certificate for kubelets.
const DefaultAPIServerKubeletUser = "kube-apiserver-kubelet-client"

// API is a connection to the API server that passed heartlet's start checks.
type API struct {
	Kube       kubeclient.Interface
	Kubeconfig string
	Server     string
	// Identity is the user the server authenticated the kubeconfig as.
	Identity      string
	ServerVersion string
	// ClientCert is the kubeconfig's client certificate (PEM), nil when it
	// uses other credentials; ClientCertSource names where it came from.
	ClientCert       []byte
	ClientCertSource string
	// Bootstrap is true when these are --bootstrap-kubeconfig's
	// credentials: --kubeconfig does not exist yet, and heartlet would
	// make it through TLS bootstrap, as the kubelet does.
	Bootstrap bool
	// ServerTime asks the server for its time (the Date header of an
	// answer) and returns it with the local times the request was sent and
	// its answer received.
	ServerTime func(ctx context.Context) (server, sent, received time.Time, err error)
}

// Runtime is what the checks ask the CRI runtime; *runtime.Runtime has it.
type Runtime interface {
	Version(ctx context.Context) (*runtimeapi.VersionResponse, error)
	StatusInfo(ctx context.Context) (*runtimeapi.StatusResponse, error)
	RuntimeConfig(ctx context.Context) (*runtimeapi.RuntimeConfigResponse, error)
	ImageFsInfo(ctx context.Context) ([]runtime.FsUsage, error)
}

var _ Runtime = (*runtime.Runtime)(nil)

// FsStats is a filesystem's space and inodes.
type FsStats struct {
	TotalBytes, AvailableBytes uint64
	TotalInodes, FreeInodes    uint64
}

// Host is how the checks read the machine.
type Host struct {
	ReadFile func(name string) ([]byte, error)
	ReadDir  func(name string) ([]fs.DirEntry, error)
	Stat     func(name string) (fs.FileInfo, error)
	Statfs   func(path string) (FsStats, error)
	Listen   func(network, address string) (net.Listener, error)
	Now      func() time.Time
	// CgroupRoot is where the cgroup filesystems are mounted
	// (/sys/fs/cgroup); ProcCgroups is the kernel's list of v1
	// controllers (/proc/cgroups); Swaps its list of swap areas
	// (/proc/swaps).
	CgroupRoot  string
	ProcCgroups string
	Swaps       string
}

// Memo calls f once and hands every caller its result (the first
// caller's context is the one f sees).
func Memo[T any](f func(ctx context.Context) (T, error)) func(ctx context.Context) (T, error) {
	var (
		once sync.Once
		v    T
		err  error
	)
	return func(ctx context.Context) (T, error) {
		once.Do(func() { v, err = f(ctx) })
		return v, err
	}
}

// Checks returns every check in the order they are printed. Connections
// to the API server and the runtime are made once and shared.
func Checks(in Inputs) []Check {
	if in.Connect != nil {
		in.Connect = Memo(in.Connect)
	}
	if in.ConnectRuntime != nil {
		in.ConnectRuntime = Memo(in.ConnectRuntime)
	}
	if in.APIServerKubeletUser == "" {
		in.APIServerKubeletUser = DefaultAPIServerKubeletUser
	}
	c := checker{in}
	return []Check{
		{"config", c.config},
		{"static-pods", c.staticPods},
		{"kubeconfig", c.kubeconfig},
		{"identity", c.identity},
		{"permissions", c.permissions},
		{"certificates", c.certificates},
		{"clock", c.clock},
		{"runtime", c.runtime},
		{"cgroup-driver", c.cgroupDriver},
		{"cni", c.cni},
		{"swap", c.swap},
		{"cgroups", c.cgroups},
		{"pods", c.pods},
		{"ports", c.ports},
		{"disk", c.disk},
		{"kubelet-api", c.kubeletAPI},
	}
}

type checker struct{ in Inputs }
