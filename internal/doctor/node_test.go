package doctor

import (
	"context"
	"syscall"
	"testing"
	"testing/fstest"

	"github.com/heartlet/heartlet/internal/config"
	"github.com/heartlet/heartlet/internal/runtime"
)

func TestConfigCheck(t *testing.T) {
	c := checker{Inputs{Opts: testOpts(t)}}
	expect(t, c.config(context.Background()), OK, "is valid; node node1, root dir /var/lib/kubelet")
	opts := testOpts(t)
	opts.Ignored = []config.Ignored{{Path: "imageGCHighThresholdPercent", Value: "90"}}
	c = checker{Inputs{Opts: opts}}
	expect(t, c.config(context.Background()), OK, "is valid", Warning, "imageGCHighThresholdPercent")
	opts = testOpts(t)
	opts.Warnings = []string{"flag --max-pods is deprecated as upstream: set maxPods in the --config file instead"}
	c = checker{Inputs{Opts: opts}}
	expect(t, c.config(context.Background()), OK, "is valid", Warning, "flag --max-pods is deprecated")
}

func TestStaticPods(t *testing.T) {
	files := fstest.MapFS{
		"etc/manifests/a.yaml":  {Data: []byte("x")},
		"etc/manifests/.hidden": {Data: []byte("x")},
		"etc/file":              {Data: []byte("x")},
	}
	for _, tc := range []struct {
		path  string
		level Level
		text  string
	}{
		{"", OK, "no static pod path"},
		{"/etc/manifests", OK, "/etc/manifests: 1 manifest file(s)"},
		{"/etc/missing", Error, "static pod path /etc/missing"},
		{"/etc/file", OK, "/etc/file: a single manifest file"},
	} {
		opts := testOpts(t)
		opts.Config.StaticPodPath = tc.path
		c := checker{Inputs{Opts: opts, Host: fakeHost(files, nil, nil)}}
		expect(t, c.staticPods(context.Background()), tc.level, tc.text)
	}
}

func TestSwap(t *testing.T) {
	header := "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"
	for _, tc := range []struct {
		name       string
		swaps      *string
		failSwapOn string
		level      Level
		text       string
	}{
		{"no file", nil, "true", OK, "no swap"},
		{"header only", ptr(header), "true", OK, "no swap; failSwapOn: true"},
		{"swap on, failSwapOn", ptr(header + "/swapfile file 1024 0 -2\n"), "true", Error, "swap is on (/swapfile) and failSwapOn is true"},
		{"swap on, allowed", ptr(header + "/dev/sda2 partition 1024 0 -2\n"), "false", OK, "swap is on (/dev/sda2), allowed by failSwapOn: false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := fstest.MapFS{}
			if tc.swaps != nil {
				files["proc/swaps"] = &fstest.MapFile{Data: []byte(*tc.swaps)}
			}
			c := checker{Inputs{Opts: testOpts(t, "--fail-swap-on="+tc.failSwapOn), Host: fakeHost(files, nil, nil)}}
			expect(t, c.swap(context.Background()), tc.level, tc.text)
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestCgroups(t *testing.T) {
	v1 := "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpuset\t2\t1\t1\ncpu\t3\t1\t1\ncpuacct\t3\t1\t1\nmemory\t4\t1\t1\npids\t5\t1\t%s\n"
	for _, tc := range []struct {
		name  string
		files fstest.MapFS
		level Level
		text  string
	}{
		{"v2", fstest.MapFS{"sys/fs/cgroup/cgroup.controllers": {Data: []byte("cpuset cpu io memory hugetlb pids rdma\n")}}, OK, "cgroup v2 at /sys/fs/cgroup; controllers cpuset cpu io memory hugetlb pids rdma"},
		{"v2 without optional", fstest.MapFS{"sys/fs/cgroup/cgroup.controllers": {Data: []byte("cpu memory pids\n")}}, OK, "(without cpuset, hugetlb, io)"},
		{"v2 without memory", fstest.MapFS{"sys/fs/cgroup/cgroup.controllers": {Data: []byte("cpu io pids\n")}}, Error, "lacks the controllers memory"},
		{"v1", fstest.MapFS{"proc/cgroups": {Data: []byte(sprintf(v1, "1"))}}, Warning, "cgroup v1; controllers cpu, cpuacct, memory, pids, cpuset enabled"},
		{"v1 without pids", fstest.MapFS{"proc/cgroups": {Data: []byte(sprintf(v1, "0"))}}, Error, "cgroup v1 lacks the controllers pids"},
		{"none", fstest.MapFS{}, Error, "no cgroup v2 at /sys/fs/cgroup and no v1 controller list"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := checker{Inputs{Opts: testOpts(t), Host: fakeHost(tc.files, nil, nil)}}
			expect(t, c.cgroups(context.Background()), tc.level, tc.text)
		})
	}
}

func TestPorts(t *testing.T) {
	args := []string{"--port", "10250", "--read-only-port", "10255", "--healthz-port", "10248", "--address", "0.0.0.0"}
	t.Run("free", func(t *testing.T) {
		c := checker{Inputs{Opts: testOpts(t, args...), Host: fakeHost(nil, nil, nil)}}
		expect(t, c.ports(context.Background()), OK, "free: 0.0.0.0:10250 (port), 0.0.0.0:10255 (readOnlyPort), 127.0.0.1:10248 (healthzPort)")
	})
	t.Run("in use", func(t *testing.T) {
		c := checker{Inputs{Opts: testOpts(t, args...), Host: fakeHost(nil, nil, map[string]error{
			"0.0.0.0:10255":   syscall.EADDRINUSE,
			"127.0.0.1:10248": syscall.EADDRNOTAVAIL,
		})}}
		expect(t, c.ports(context.Background()),
			OK, "free: 0.0.0.0:10250 (port)",
			Error, "0.0.0.0:10255 (readOnlyPort) is in use",
			Error, "127.0.0.1:10248 (healthzPort): the address is not on this machine")
	})
	t.Run("none", func(t *testing.T) {
		opts := testOpts(t, "--read-only-port", "0", "--healthz-port", "0")
		opts.Config.EnableServer = ptr(false)
		c := checker{Inputs{Opts: opts, Host: fakeHost(nil, nil, nil)}}
		expect(t, c.ports(context.Background()), OK, "no server ports")
	})
}

func TestDisk(t *testing.T) {
	const gi = 1 << 30
	files := fstest.MapFS{"var/lib/kubelet": {Mode: 0o755 | 1<<31}, "var/log/pods": {Mode: 0o755 | 1<<31}, "var/lib/containerd": {Mode: 0o755 | 1<<31}}
	healthy := FsStats{TotalBytes: 100 * gi, AvailableBytes: 50 * gi, TotalInodes: 1000, FreeInodes: 900}
	for _, tc := range []struct {
		name   string
		args   []string
		nodefs FsStats
		want   []any
	}{
		{"above", nil, healthy, []any{OK, "nodefs /var/lib/kubelet: 50.0 GiB of 100.0 GiB free (50%), 900 of 1000 inodes free; above evictionHard nodefs.available<10%, evictionHard nodefs.inodesFree<5%", OK, "pod logs", OK, "imagefs /var/lib/containerd"}},
		{"below hard", nil, FsStats{TotalBytes: 100 * gi, AvailableBytes: 5 * gi, TotalInodes: 1000, FreeInodes: 900},
			[]any{Error, "nodefs.available is below evictionHard nodefs.available<10% (10.0 GiB)", Error, "pod logs", OK, "imagefs"}},
		{"inodes below hard", nil, FsStats{TotalBytes: 100 * gi, AvailableBytes: 50 * gi, TotalInodes: 1000, FreeInodes: 10},
			[]any{Error, "nodefs.inodesFree is below evictionHard nodefs.inodesFree<5% (50 inodes)", Error, "pod logs", OK, "imagefs"}},
		{"below soft", []string{"--eviction-soft", "nodefs.available<60Gi", "--eviction-soft-grace-period", "nodefs.available=1m"}, healthy,
			[]any{Warning, "nodefs.available is below evictionSoft nodefs.available<60Gi (60.0 GiB)", Warning, "pod logs", OK, "imagefs"}},
		{"disabled", []string{"--eviction-hard", "nodefs.available<100%,nodefs.inodesFree<0%"}, FsStats{TotalBytes: 100 * gi, AvailableBytes: gi, TotalInodes: 1000, FreeInodes: 1},
			[]any{OK, "1.0 GiB of 100.0 GiB free (1%), 1 of 1000 inodes free", OK, "pod logs", OK, "imagefs"}},
		{"no inode count", nil, FsStats{TotalBytes: 100 * gi, AvailableBytes: 50 * gi}, []any{OK, "0 of 0 inodes free", OK, "pod logs", OK, "imagefs"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := map[string]FsStats{"/var/lib/kubelet": tc.nodefs, "/var/log/pods": tc.nodefs, "/var/lib/containerd": healthy}
			rt := &fakeRuntime{imageFs: []runtime.FsUsage{{Mountpoint: "/var/lib/containerd"}}}
			c := checker{Inputs{Opts: testOpts(t, tc.args...), Host: fakeHost(files, st, nil), ConnectRuntime: runtimeConnect(rt, nil)}}
			expect(t, c.disk(context.Background()), tc.want...)
		})
	}
	t.Run("root dir not made yet", func(t *testing.T) {
		opts := testOpts(t)
		opts.RootDir = "/var/lib/kubelet/new/dir"
		c := checker{Inputs{Opts: opts, Host: fakeHost(files, map[string]FsStats{"/var/lib/kubelet": healthy, "/var/log/pods": healthy}, nil),
			ConnectRuntime: runtimeConnect(nil, syscall.ENOENT)}}
		expect(t, c.disk(context.Background()),
			OK, "nodefs /var/lib/kubelet/new/dir (not yet made; on the filesystem of /var/lib/kubelet)",
			OK, "pod logs",
			Skipped, "the runtime is not reachable")
	})
}
