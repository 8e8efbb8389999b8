package nodestatus

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

func TestNodeAddresses(t *testing.T) {
	tests := []struct {
		name     string
		nodeIPs  []string
		hostname string
		dns      map[string][]string
		addrs    map[string][]string
		route4   string
		route6   string
		want     []string // "Type=Address"
		wantErr  string
	}{
		{name: "configured", nodeIPs: []string{"192.0.2.10"}, want: []string{"InternalIP=192.0.2.10", "Hostname=worker-1"}},
		{name: "dual stack", nodeIPs: []string{"192.0.2.10", "2001:db8::10"},
			addrs: map[string][]string{"eth0": {"192.0.2.10/24", "2001:db8::10/64"}},
			want:  []string{"InternalIP=192.0.2.10", "InternalIP=2001:db8::10", "Hostname=worker-1"}},
		{name: "configured but not on this host", nodeIPs: []string{"198.51.100.1"}, wantErr: "not an address of any interface"},
		{name: "loopback refused", nodeIPs: []string{"127.0.0.1"}, wantErr: "loopback"},
		{name: "not an IP", nodeIPs: []string{"node"}, wantErr: `node IP "node": not an IP address`},
		{name: "hostname is an IP", hostname: "198.51.100.7", want: []string{"InternalIP=198.51.100.7", "Hostname=198.51.100.7"}},
		{name: "name resolves to a local address", dns: map[string][]string{"worker-1": {"127.0.1.1", "192.0.2.11"}},
			addrs: map[string][]string{"lo": {"127.0.0.1/8", "127.0.1.1/8"}, "eth0": {"192.0.2.10/24", "192.0.2.11/24"}},
			want:  []string{"InternalIP=192.0.2.11", "Hostname=worker-1"}},
		{name: "name resolves elsewhere, default route used", dns: map[string][]string{"worker-1": {"203.0.113.5"}},
			want: []string{"InternalIP=192.0.2.10", "Hostname=worker-1"}},
		{name: "default route interface", want: []string{"InternalIP=192.0.2.10", "Hostname=worker-1"}},
		{name: "unspecified IPv6 prefers IPv6", nodeIPs: []string{"::"},
			addrs:  map[string][]string{"eth0": {"192.0.2.10/24", "fe80::1/64", "2001:db8::10/64"}},
			route6: "00000000000000000000000000000000 00 00000000000000000000000000000000 00 fe800000000000000000000000000001 00000400 00000001 00000000 00000003     eth0\n",
			want:   []string{"InternalIP=2001:db8::10", "Hostname=worker-1"}},
		{name: "nothing found", route4: "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\n", wantErr: "no IP address for node worker-1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fh := newFakeHost()
			if tc.dns != nil {
				fh.dns = tc.dns
			}
			if tc.addrs != nil {
				fh.addrs = tc.addrs
			}
			if tc.route4 != "" {
				fh.files[ipv4RouteFile] = tc.route4
			}
			if tc.route6 != "" {
				fh.files[ipv6RouteFile] = tc.route6
			}
			hostname := tc.hostname
			if hostname == "" {
				hostname = "worker-1"
			}
			got, err := fh.host().nodeAddresses("worker-1", hostname, tc.nodeIPs)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var s []string
			for _, a := range got {
				s = append(s, string(a.Type)+"="+a.Address)
			}
			if strings.Join(s, " ") != strings.Join(tc.want, " ") {
				t.Errorf("addresses = %v, want %v", s, tc.want)
			}
		})
	}
}

func TestParseCPUList(t *testing.T) {
	tests := []struct {
		in      string
		want    int
		wantErr bool
	}{
		{"0", 1, false}, {"0-3", 4, false}, {"0-3,6,8-9", 7, false}, {"", 0, true},
		{"3-1", 0, true}, {"a", 0, true}, {"0-", 0, true}, {"-1", 0, true},
	}
	for _, tc := range tests {
		got, err := parseCPUList(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("parseCPUList(%q) = %d, %v; want %d, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestParseOSRelease(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string // PRETTY_NAME
	}{
		{"debian", "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nNAME=\"Debian GNU/Linux\"\n", "Debian GNU/Linux 12 (bookworm)"},
		{"unquoted", "PRETTY_NAME=Alpine\n", "Alpine"},
		{"single quotes", "PRETTY_NAME='My \\ OS'\n", `My \ OS`},
		{"escapes", `PRETTY_NAME="say \"hi\" \\o/"`, `say "hi" \o/`},
		{"comments and blanks", "# PRETTY_NAME=no\n\n  PRETTY_NAME=\"yes\"  \n", "yes"},
		{"missing", "NAME=x\n", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := parseOSRelease([]byte(tc.in))["PRETTY_NAME"]; got != tc.want {
				t.Errorf("PRETTY_NAME = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestOSImageFallback(t *testing.T) {
	fh := newFakeHost()
	delete(fh.files, etcOSRelease)
	if got := fh.host().osImage(); got != "Linux" {
		t.Errorf("osImage without os-release = %q, want Linux", got)
	}
	fh.files[usrOSRelease] = "PRETTY_NAME=\"Usr OS\"\n"
	if got := fh.host().osImage(); got != "Usr OS" {
		t.Errorf("osImage = %q, want the /usr/lib/os-release one", got)
	}
}

func TestParseDefaultRoutes(t *testing.T) {
	const header = "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\n"
	v4 := []struct {
		name, in, want string
	}{
		{"default", header + "eth0\t0000A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\neth1\t00000000\t0100A8C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n", "eth1"},
		{"down route skipped", header + "eth0\t00000000\t0100A8C0\t0002\t0\t0\t0\t00000000\t0\t0\t0\n", ""},
		{"no default", header + "eth0\t0000A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n", ""},
		{"empty", "", ""},
	}
	for _, tc := range v4 {
		if got := parseIPv4DefaultRoute([]byte(tc.in)); got != tc.want {
			t.Errorf("IPv4 %s: %q, want %q", tc.name, got, tc.want)
		}
	}
	zero := strings.Repeat("0", 32)
	v6 := []struct {
		name, in, want string
	}{
		{"default", "20010db8000000000000000000000000 40 " + zero + " 00 " + zero + " 00000100 00000001 00000000 00000001 eth0\n" +
			zero + " 00 " + zero + " 00 fe800000000000000000000000000001 00000400 00000001 00000000 00000003 eth1\n", "eth1"},
		{"loopback skipped", zero + " 00 " + zero + " 00 " + zero + " ffffffff 00000001 00000000 00200201 lo\n", ""},
	}
	for _, tc := range v6 {
		if got := parseIPv6DefaultRoute([]byte(tc.in)); got != tc.want {
			t.Errorf("IPv6 %s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestHugepages(t *testing.T) {
	fh := newFakeHost()
	fh.files[hugepagesDir+"/hugepages-2048kB/nr_hugepages"] = "512\n"
	got := fh.host().hugepages()
	if q := got["hugepages-2Mi"]; q.Cmp(resource.MustParse("1Gi")) != 0 {
		t.Errorf("hugepages-2Mi = %s, want 1Gi", q.String())
	}
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{{"hugepages-2048kB", 2 << 20, true}, {"hugepages-1048576kB", 1 << 30, true}, {"hugepages-x", 0, false}, {"other", 0, false}} {
		if got, ok := parseHugepageDir(tc.in); got != tc.want || ok != tc.ok {
			t.Errorf("parseHugepageDir(%q) = %d, %v", tc.in, got, ok)
		}
	}
}

func TestFilesystemSizeOfMissingRootDir(t *testing.T) {
	h := newFakeHost().host()
	size, err := h.filesystemSize("/var/lib/heartlet/not/yet")
	if err != nil || size != uint64(100*gi) {
		t.Errorf("filesystemSize = %d, %v; want the parent's", size, err)
	}
}

func TestImages(t *testing.T) {
	images := []*runtimeapi.Image{
		{RepoTags: []string{"small:1"}, Size: 10},
		{RepoDigests: []string{"big@sha256:1"}, RepoTags: []string{"big:1", "big:2", "big:3", "big:4", "big:5"}, Size: 1000},
		{RepoTags: []string{"mid:1"}, Size: 100},
		{Size: 5000}, // no names
	}
	tests := []struct {
		name      string
		maxImages *int32
		want      []string // first names, largest image first
	}{
		{name: "cap 2: the two largest", maxImages: ptr.To[int32](2), want: []string{"big@sha256:1", "mid:1"}},
		{name: "cap 1: the largest", maxImages: ptr.To[int32](1), want: []string{"big@sha256:1"}},
		{name: "-1: no cap", maxImages: ptr.To[int32](-1), want: []string{"big@sha256:1", "mid:1", "small:1"}},
		{name: "0: none", maxImages: ptr.To[int32](0), want: nil},
		{name: "unset: 50", maxImages: nil, want: []string{"big@sha256:1", "mid:1", "small:1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, Options{NodeName: "worker-1", MaxImages: tt.maxImages})
			f.rt.images = images
			n := &v1.Node{}
			f.m.setImages(context.Background(), n)
			var got []string
			for _, im := range n.Status.Images {
				got = append(got, im.Names[0])
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("images = %v, want %v", got, tt.want)
			}
			if len(tt.want) == 0 && n.Status.Images != nil {
				t.Errorf("images = %#v, want nil", n.Status.Images)
			}
			if len(tt.want) > 0 {
				if got := n.Status.Images[0]; got.SizeBytes != 1000 || len(got.Names) != 5 {
					t.Errorf("first image = %+v, want the biggest with 5 names, digest first", got)
				}
			}
		})
	}

	// A failing runtime keeps the last list.
	f := newFixture(t, Options{NodeName: "worker-1", MaxImages: ptr.To[int32](2)})
	f.rt.images = images
	f.m.setImages(context.Background(), &v1.Node{})
	f.rt.imagesErr = context.DeadlineExceeded
	n2 := &v1.Node{}
	f.m.setImages(context.Background(), n2)
	if len(n2.Status.Images) != 2 {
		t.Errorf("images after an error = %v, want the previous list", n2.Status.Images)
	}
}

// TestDefaultMaxImages checks that without nodeStatusMaxImages at most 50
// images are reported.
func TestDefaultMaxImages(t *testing.T) {
	f := newFixture(t, Options{NodeName: "worker-1"})
	for i := range 60 {
		f.rt.images = append(f.rt.images, &runtimeapi.Image{RepoTags: []string{fmt.Sprintf("img:%d", i)}, Size: uint64(i + 1)})
	}
	n := &v1.Node{}
	f.m.setImages(context.Background(), n)
	if len(n.Status.Images) != DefaultMaxImages || n.Status.Images[0].Names[0] != "img:59" {
		t.Errorf("%d images, first %v; want %d, the largest first", len(n.Status.Images), n.Status.Images[0].Names, DefaultMaxImages)
	}
}

func TestNodeIPsConfigured(t *testing.T) {
	detected, err := NodeIPs("n", "n", nil)
	if err != nil {
		t.Skipf("no usable address on this host to test with: %v", err)
	}
	got, err := NodeIPs("n", "n", detected[:1])
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != detected[0] {
		t.Errorf("NodeIPs(%v) = %v, want the configured IP only", detected[:1], got)
	}
	for _, bad := range []string{"not-an-ip", "127.0.0.1"} {
		if _, err := NodeIPs("n", "n", []string{bad}); err == nil {
			t.Errorf("NodeIPs accepted %q", bad)
		}
	}
}
