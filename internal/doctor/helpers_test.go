package doctor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/heartlet/heartlet/internal/config"
	"github.com/heartlet/heartlet/internal/runtime"
)

// testNow is the fake hosts' time.
var testNow = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

// testOpts is the configuration of node1, as loaded from flags.
func testOpts(t *testing.T, args ...string) *config.Options {
	t.Helper()
	opts, err := config.Load(append([]string{"--hostname-override", "node1", "--root-dir", "/var/lib/kubelet"}, args...))
	if err != nil {
		t.Fatalf("config.Load: %v", err)
	}
	return opts
}

// fakeHost serves files from an in-memory tree (paths without the leading
// slash), statfs results per path, and listens except on the addresses in
// listenErr.
func fakeHost(files fstest.MapFS, statfs map[string]FsStats, listenErr map[string]error) Host {
	rel := func(p string) string {
		if p = strings.TrimPrefix(p, "/"); p == "" {
			return "."
		}
		return p
	}
	return Host{
		ReadFile: func(name string) ([]byte, error) { return fs.ReadFile(files, rel(name)) },
		ReadDir:  func(name string) ([]fs.DirEntry, error) { return fs.ReadDir(files, rel(name)) },
		Stat:     func(name string) (fs.FileInfo, error) { return fs.Stat(files, rel(name)) },
		Statfs: func(path string) (FsStats, error) {
			if st, ok := statfs[path]; ok {
				return st, nil
			}
			return FsStats{}, &fs.PathError{Op: "statfs", Path: path, Err: syscall.ENOENT}
		},
		Listen: func(network, address string) (net.Listener, error) {
			if err, ok := listenErr[address]; ok {
				return nil, &net.OpError{Op: "listen", Net: network, Err: os.NewSyscallError("bind", err)}
			}
			return fakeListener{}, nil
		},
		Now:         func() time.Time { return testNow },
		CgroupRoot:  "/sys/fs/cgroup",
		ProcCgroups: "/proc/cgroups",
		Swaps:       "/proc/swaps",
	}
}

type fakeListener struct{}

func (fakeListener) Accept() (net.Conn, error) { return nil, errors.New("fake") }
func (fakeListener) Close() error              { return nil }
func (fakeListener) Addr() net.Addr            { return &net.TCPAddr{} }

// fakeRuntime answers the CRI calls the checks make.
type fakeRuntime struct {
	version   *runtimeapi.VersionResponse
	status    *runtimeapi.StatusResponse
	statusErr error
	config    *runtimeapi.RuntimeConfigResponse
	configErr error
	imageFs   []runtime.FsUsage
}

func (f *fakeRuntime) Version(context.Context) (*runtimeapi.VersionResponse, error) {
	return f.version, nil
}

func (f *fakeRuntime) StatusInfo(context.Context) (*runtimeapi.StatusResponse, error) {
	return f.status, f.statusErr
}

func (f *fakeRuntime) RuntimeConfig(context.Context) (*runtimeapi.RuntimeConfigResponse, error) {
	return f.config, f.configErr
}

func (f *fakeRuntime) ImageFsInfo(context.Context) ([]runtime.FsUsage, error) {
	return f.imageFs, nil
}

func runtimeConnect(rt Runtime, err error) func(context.Context) (Runtime, error) {
	return func(context.Context) (Runtime, error) { return rt, err }
}

// expect checks that results has, in order, results of the given levels
// whose Found contains the given texts.
func expect(t *testing.T, results []Result, want ...any) {
	t.Helper()
	if len(results) != len(want)/2 {
		t.Fatalf("got %d results %+v, want %d", len(results), results, len(want)/2)
	}
	for i := 0; i < len(want); i += 2 {
		r := results[i/2]
		level, text := want[i].(Level), want[i+1].(string)
		if r.Level != level || !strings.Contains(r.Found, text) {
			t.Errorf("result %d = %s %q (fix %q), want %s containing %q", i/2, r.Level, r.Found, r.Fix, level, text)
		}
		if r.Level == Error && r.Fix == "" {
			t.Errorf("result %d: an error without a fix", i/2)
		}
	}
}

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }
