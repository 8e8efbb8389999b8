package doctor

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/fstest"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// containerdInfo is containerd's verbose status "config" with the runc
// handler's SystemdCgroup and the CNI directories.
func containerdInfo(systemd bool) map[string]string {
	return map[string]string{"config": fmt.Sprintf(`{"containerd": {"defaultRuntimeName": "runc", "runtimes": {"runc": {"runtimeType": "io.containerd.runc.v2", "options": {"BinaryName": "/usr/sbin/runc", "SystemdCgroup": %t}}}}, "cni": {"binDir": "/usr/lib/cni", "confDir": "/etc/cni/net.d"}}`, systemd)}
}

func readyStatus(networkReady bool, info map[string]string) *runtimeapi.StatusResponse {
	return &runtimeapi.StatusResponse{
		Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
			{Type: runtimeapi.RuntimeReady, Status: true},
			{Type: runtimeapi.NetworkReady, Status: networkReady, Reason: "NetworkPluginNotReady", Message: "cni plugin not initialized"},
		}},
		Info: info,
	}
}

var containerdVersion = &runtimeapi.VersionResponse{RuntimeName: "containerd", RuntimeVersion: "1.6.20", RuntimeApiVersion: "v1"}

func TestRuntimeCheck(t *testing.T) {
	notReady := readyStatus(true, nil)
	notReady.Status.Conditions[0] = &runtimeapi.RuntimeCondition{Type: runtimeapi.RuntimeReady, Status: false, Reason: "Broken", Message: "no shim"}
	for _, tc := range []struct {
		name    string
		rt      *fakeRuntime
		connErr error
		level   Level
		text    string
	}{
		{"connected", &fakeRuntime{version: containerdVersion, status: readyStatus(false, nil)}, nil, OK, "containerd 1.6.20 via unix:///run/containerd/containerd.sock, CRI v1"},
		{"no socket", nil, errors.New("container runtime endpoint unix:///x.sock: no such socket"), Error, "no such socket"},
		{"not ready", &fakeRuntime{version: containerdVersion, status: notReady}, nil, Error, "not ready: Broken no shim"},
		{"status fails", &fakeRuntime{version: containerdVersion, statusErr: errors.New("boom")}, nil, Error, "status: boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rt Runtime
			if tc.rt != nil {
				rt = tc.rt
			}
			c := checker{Inputs{Opts: testOpts(t, "--container-runtime-endpoint", "unix:///run/containerd/containerd.sock"), ConnectRuntime: runtimeConnect(rt, tc.connErr)}}
			expect(t, c.runtime(context.Background()), tc.level, tc.text)
		})
	}
}

func TestCgroupDriver(t *testing.T) {
	unimplemented := fmt.Errorf("runtime config: %w", status.Error(codes.Unimplemented, "unknown method RuntimeConfig"))
	for _, tc := range []struct {
		name  string
		rt    *fakeRuntime
		level Level
		text  string
	}{
		{"RuntimeConfig cgroupfs", &fakeRuntime{config: &runtimeapi.RuntimeConfigResponse{Linux: &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: runtimeapi.CgroupDriver_CGROUPFS}}},
			OK, "cgroupfs for both heartlet and the runtime (CRI RuntimeConfig)"},
		{"RuntimeConfig systemd", &fakeRuntime{config: &runtimeapi.RuntimeConfigResponse{Linux: &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: runtimeapi.CgroupDriver_SYSTEMD}}},
			Error, "the runtime uses the systemd cgroup driver (CRI RuntimeConfig), heartlet cgroupfs"},
		{"containerd 1.6 SystemdCgroup false", &fakeRuntime{configErr: unimplemented, status: readyStatus(true, containerdInfo(false))},
			OK, `cgroupfs for both heartlet and the runtime (containerd runtime "runc" SystemdCgroup = false)`},
		{"containerd 1.6 SystemdCgroup true", &fakeRuntime{configErr: unimplemented, status: readyStatus(true, containerdInfo(true))},
			Error, `the runtime uses the systemd cgroup driver (containerd runtime "runc" SystemdCgroup = true)`},
		{"nothing reported", &fakeRuntime{configErr: unimplemented, status: readyStatus(true, nil)},
			Warning, "the runtime reports no cgroup driver"},
		{"RuntimeConfig fails", &fakeRuntime{configErr: status.Error(codes.Internal, "boom")},
			Error, "CRI RuntimeConfig"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := checker{Inputs{Opts: testOpts(t), ConnectRuntime: runtimeConnect(tc.rt, nil)}}
			expect(t, c.cgroupDriver(context.Background()), tc.level, tc.text)
		})
	}
	t.Run("no runtime", func(t *testing.T) {
		c := checker{Inputs{Opts: testOpts(t), ConnectRuntime: runtimeConnect(nil, errors.New("no socket"))}}
		expect(t, c.cgroupDriver(context.Background()), Skipped, "not reachable")
	})
}

func TestCNI(t *testing.T) {
	good := `{"cniVersion": "1.0.0", "name": "net", "plugins": [{"type": "bridge"}, {"type": "portmap"}]}`
	bins := fstest.MapFS{"usr/lib/cni/bridge": {Data: []byte{}}, "usr/lib/cni/portmap": {Data: []byte{}}}
	with := func(files map[string]string) fstest.MapFS {
		m := fstest.MapFS{"etc/cni/net.d": {Mode: 0o755 | 1<<31}}
		for k, v := range bins {
			m[k] = v
		}
		for name, content := range files {
			m["etc/cni/net.d/"+name] = &fstest.MapFile{Data: []byte(content)}
		}
		return m
	}
	for _, tc := range []struct {
		name         string
		files        fstest.MapFS
		networkReady bool
		want         []any
	}{
		{"good", with(map[string]string{"10-net.conflist": good, "README": "x"}), true,
			[]any{OK, "/etc/cni/net.d/10-net.conflist (network net: bridge, portmap); plugins in /usr/lib/cni"}},
		{"single plugin .conf", with(map[string]string{"10-net.conf": `{"cniVersion": "0.4.0", "name": "net", "type": "bridge"}`}), true,
			[]any{OK, "10-net.conf (network net: bridge)"}},
		{"no dir", bins, true, []any{Error, "CNI config dir /etc/cni/net.d"}},
		{"empty", with(nil), true, []any{Error, "no CNI network config (.conf, .conflist, .json) in /etc/cni/net.d"}},
		{"broken JSON", with(map[string]string{"10-net.conflist": good, "20-bad.conflist": `{"name": "x", "plugins": [`}), true,
			[]any{OK, "10-net.conflist", Error, "20-bad.conflist: not a CNI config"}},
		{"no name", with(map[string]string{"10-net.conflist": `{"plugins": [{"type": "bridge"}]}`}), true, []any{Error, "the network has no name"}},
		{"plugin without type", with(map[string]string{"10-net.conflist": `{"name": "n", "plugins": [{"type": ""}]}`}), true, []any{Error, "a plugin without a type"}},
		{"missing plugin", with(map[string]string{"10-net.conflist": `{"name": "n", "plugins": [{"type": "bridge"}, {"type": "flannel"}]}`}), true,
			[]any{Error, "10-net.conflist: plugin(s) flannel not found in /usr/lib/cni"}},
		{"network not ready", with(map[string]string{"10-net.conflist": good}), false,
			[]any{OK, "10-net.conflist", Error, "the runtime's network is not ready: NetworkPluginNotReady cni plugin not initialized"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := &fakeRuntime{status: readyStatus(tc.networkReady, containerdInfo(false))}
			c := checker{Inputs{Opts: testOpts(t), Host: fakeHost(tc.files, nil, nil), ConnectRuntime: runtimeConnect(rt, nil)}}
			expect(t, c.cni(context.Background()), tc.want...)
		})
	}
	t.Run("given dirs win", func(t *testing.T) {
		files := fstest.MapFS{"cni/conf/10-net.conflist": {Data: []byte(good)}, "cni/bin/bridge": {}, "cni/bin/portmap": {}}
		rt := &fakeRuntime{status: readyStatus(true, containerdInfo(false))}
		c := checker{Inputs{Opts: testOpts(t), Host: fakeHost(files, nil, nil), ConnectRuntime: runtimeConnect(rt, nil), CNIConfDir: "/cni/conf", CNIBinDirs: []string{"/cni/bin"}}}
		expect(t, c.cni(context.Background()), OK, "/cni/conf/10-net.conflist (network net: bridge, portmap); plugins in /cni/bin")
	})
	t.Run("no runtime", func(t *testing.T) {
		c := checker{Inputs{Opts: testOpts(t), Host: fakeHost(nil, nil, nil), ConnectRuntime: runtimeConnect(nil, errors.New("no socket"))}}
		expect(t, c.cni(context.Background()), Skipped, "the runtime is not reachable")
	})
}
