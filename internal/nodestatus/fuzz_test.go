package nodestatus

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
)

func FuzzParseCPUList(f *testing.F) {
	for _, s := range []string{"0", "0-3", "0-3,6,8-9", "", "3-1", "0-,", "1-1048577"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseCPUList(s)
		if err == nil && n <= 0 {
			t.Errorf("parseCPUList(%q) = %d without error", s, n)
		}
	})
}

func FuzzParseOSRelease(f *testing.F) {
	f.Add("PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n")
	f.Add(`PRETTY_NAME="a\"b\\"`)
	f.Add("PRETTY_NAME='x'\n=y\n#c")
	f.Fuzz(func(t *testing.T, s string) {
		for k := range parseOSRelease([]byte(s)) {
			if k == "" || strings.Contains(k, "=") {
				t.Errorf("bad key %q from %q", k, s)
			}
		}
	})
}

func FuzzParseRoutes(f *testing.F) {
	f.Add("Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\neth0\t00000000\t0100A8C0\t0003\t0\t0\t0\t00000000\n")
	f.Add(strings.Repeat("0", 32) + " 00 " + strings.Repeat("0", 32) + " 00 x 0 0 0 00000001 eth0\n")
	f.Fuzz(func(t *testing.T, s string) {
		for _, ifc := range []string{parseIPv4DefaultRoute([]byte(s)), parseIPv6DefaultRoute([]byte(s))} {
			if strings.ContainsAny(ifc, " \t\n") {
				t.Errorf("interface %q from %q", ifc, s)
			}
		}
	})
}

func FuzzThresholdQuantity(f *testing.F) {
	for _, s := range []string{"100Mi", "10%", "0.5%", "-1", "120%", "x%", "1e3"} {
		f.Add(s)
	}
	capacity := resource.MustParse("8Gi")
	f.Fuzz(func(t *testing.T, s string) {
		q, err := thresholdQuantity(s, capacity)
		if err == nil && q.Sign() < 0 {
			t.Errorf("thresholdQuantity(%q) = %s", s, q.String())
		}
	})
}
