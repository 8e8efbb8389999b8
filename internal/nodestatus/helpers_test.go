package nodestatus

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/heartlet/heartlet/internal/kubeapi/kubeapifake"
)

// t0 is the fake clock's start.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const (
	gi = int64(1) << 30
	mi = int64(1) << 20
)

// fakeRuntime answers Version, ListImages and Status.
type fakeRuntime struct {
	mu         sync.Mutex
	versionErr error
	images     []*runtimeapi.Image
	imagesErr  error
	network    bool
	versions   int
}

// calls is how many times Version was called.
func (f *fakeRuntime) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.versions
}

func newFakeRuntime() *fakeRuntime { return &fakeRuntime{network: true} }

func (f *fakeRuntime) Version(context.Context) (*runtimeapi.VersionResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.versions++
	if f.versionErr != nil {
		return nil, f.versionErr
	}
	return &runtimeapi.VersionResponse{RuntimeName: "containerd", RuntimeVersion: "1.6.20"}, nil
}

func (f *fakeRuntime) ListImages(context.Context) ([]*runtimeapi.Image, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.images, f.imagesErr
}

func (f *fakeRuntime) Status(context.Context) (*runtimeapi.StatusResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	net := &runtimeapi.RuntimeCondition{Type: runtimeapi.NetworkReady, Status: f.network}
	if !f.network {
		net.Reason, net.Message = "NetworkPluginNotReady", "cni config uninitialized"
	}
	return &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true}, net,
	}}}, nil
}

func (f *fakeRuntime) set(fn func(*fakeRuntime)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// fakeHost is a machine with 4 CPUs, 8 GiB of memory, a 100 GiB root
// filesystem, one 2 MiB huge page size with no pages, and the address
// 192.0.2.10 on eth0, the default route's interface.
type fakeHost struct {
	mu    sync.Mutex
	files map[string]string
	addrs map[string][]string // interface -> CIDRs
	dns   map[string][]string
	fs    uint64
}

func newFakeHost() *fakeHost {
	return &fakeHost{
		files: map[string]string{
			cpuOnlineFile: "0-3\n",
			meminfoFile:   "MemTotal:        8388608 kB\nMemFree:         1000 kB\n",
			machineIDFile: "0123456789abcdef0123456789abcdef\n",
			productUUID:   "4C4C4544-0000-1000-8000-000000000000\n",
			bootIDFile:    "boot-1\n",
			osReleaseFile: "6.1.0-test\n",
			etcOSRelease:  "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nNAME=\"Debian GNU/Linux\"\n",
			ipv4RouteFile: "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\neth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n",
			hugepagesDir + "/hugepages-2048kB/nr_hugepages": "0\n",
		},
		addrs: map[string][]string{"lo": {"127.0.0.1/8"}, "eth0": {"192.0.2.10/24", "fe80::1/64"}},
		dns:   map[string][]string{},
		fs:    uint64(100 * gi),
	}
}

func (h *fakeHost) host() host {
	return host{
		readFile: func(name string) ([]byte, error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			s, ok := h.files[name]
			if !ok {
				return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
			}
			return []byte(s), nil
		},
		readDir: func(name string) ([]os.DirEntry, error) {
			if name != hugepagesDir {
				return nil, fs.ErrNotExist
			}
			return []os.DirEntry{dirEntry("hugepages-2048kB")}, nil
		},
		statfs: func(path string) (uint64, error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			if path == "/var/lib/heartlet" || path == "/" {
				return h.fs, nil
			}
			return 0, &fs.PathError{Op: "statfs", Path: path, Err: fs.ErrNotExist}
		},
		numCPU: func() int { return 1 },
		interfaceAddrs: func() ([]net.Addr, error) {
			var out []net.Addr
			for name := range h.addrs {
				a, _ := h.ifaceAddrs(name)
				out = append(out, a...)
			}
			return out, nil
		},
		interfaceAddrsByName: h.ifaceAddrs,
		lookupIP: func(name string) ([]net.IP, error) {
			var out []net.IP
			for _, s := range h.dns[name] {
				out = append(out, net.ParseIP(s))
			}
			if len(out) == 0 {
				return nil, &net.DNSError{Err: "no such host", Name: name, IsNotFound: true}
			}
			return out, nil
		},
	}
}

func (h *fakeHost) ifaceAddrs(name string) ([]net.Addr, error) {
	cidrs, ok := h.addrs[name]
	if !ok {
		return nil, errors.New("no such interface")
	}
	var out []net.Addr
	for _, c := range cidrs {
		ip, n, err := net.ParseCIDR(c)
		if err != nil {
			return nil, err
		}
		n.IP = ip
		out = append(out, n)
	}
	return out, nil
}

func (h *fakeHost) setFile(name, content string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if content == "" {
		delete(h.files, name)
		return
	}
	h.files[name] = content
}

type dirEntry string

func (d dirEntry) Name() string               { return string(d) }
func (d dirEntry) IsDir() bool                { return true }
func (d dirEntry) Type() fs.FileMode          { return fs.ModeDir }
func (d dirEntry) Info() (fs.FileInfo, error) { return nil, fs.ErrNotExist }

// fixture is a Manager on a fake clientset and a fake clock.
type fixture struct {
	m    *Manager
	kube *fake.Clientset
	clk  *clocktesting.FakeClock
	rt   *fakeRuntime
	host *fakeHost
	uids atomic.Int32
}

func defaultOptions() Options {
	return Options{
		NodeName:     "worker-1",
		RegisterNode: true,
		MaxPods:      110,
		Version:      "v0.1.0",
		RootDir:      "/var/lib/heartlet",
	}
}

func newFixture(t *testing.T, opts Options, objects ...runtime.Object) *fixture {
	t.Helper()
	f := &fixture{kube: fake.NewClientset(objects...), clk: clocktesting.NewFakeClock(t0), rt: newFakeRuntime(), host: newFakeHost()}
	// The API server gives every new object a UID.
	f.kube.PrependReactor("create", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj := a.(k8stesting.CreateAction).GetObject()
		if m, ok := obj.(metav1.Object); ok && m.GetUID() == "" {
			m.SetUID(types.UID(fmt.Sprintf("uid-%d", f.uids.Add(1))))
		}
		return false, nil, nil
	})
	f.m = New(kubeapifake.Wrap(f.kube), f.clk, opts, f.rt)
	f.m.host = f.host.host()
	// The lease renewals follow the interval exactly: tests step the
	// clock by it (TestLeaseWait checks the spread).
	f.m.jitter = func() float64 { return 0 }
	return f
}

// node returns the Node as the API server has it.
func (f *fixture) node(t *testing.T) *v1.Node {
	t.Helper()
	n, err := f.kube.CoreV1().Nodes().Get(context.Background(), "worker-1", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting node: %v", err)
	}
	return n
}

// count returns how many actions with this verb (and subresource, "" for
// none) were made on resource.
func (f *fixture) count(verb, resource, subresource string) int {
	n := 0
	for _, a := range f.kube.Actions() {
		if a.GetVerb() == verb && a.GetResource().Resource == resource && a.GetSubresource() == subresource {
			n++
		}
	}
	return n
}

func condition(n *v1.Node, t v1.NodeConditionType) v1.NodeCondition {
	for _, c := range n.Status.Conditions {
		if c.Type == t {
			return c
		}
	}
	return v1.NodeCondition{}
}
