package stats

import (
	"reflect"
	"testing"
	"time"
)

const netDev = `Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:    9579      87    0    0    0     0          0         0     9579      87    0    0    0     0       0          0
  eth0: 238735394   12853    1    2    0     0          0         0   971657    9363    3    4    0     0       0          0
vethab12:  100 1 0 0 0 0 0 0 200 2 0 0 0 0 0 0
   hl0: 5 6 7 8 0 0 0 0 9 10 11 12 0 0 0 0
`

func TestParseNetDev(t *testing.T) {
	got, err := parseNetDev([]byte(netDev))
	if err != nil {
		t.Fatal(err)
	}
	want := []ifaceStats{
		{name: "eth0", rxBytes: 238735394, rxPackets: 12853, rxErrors: 1, rxDropped: 2, txBytes: 971657, txPackets: 9363, txErrors: 3, txDropped: 4},
		{name: "hl0", rxBytes: 5, rxPackets: 6, rxErrors: 7, rxDropped: 8, txBytes: 9, txPackets: 10, txErrors: 11, txDropped: 12},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parseNetDev =\n%+v, want\n%+v", got, want)
	}
	for _, bad := range []string{"eth0: 1 2 3\n", "eth0: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 x\n"} {
		if _, err := parseNetDev([]byte(bad)); err == nil {
			t.Errorf("parseNetDev(%q) succeeded, want an error", bad)
		}
	}
}

func TestDefaultRouteIface(t *testing.T) {
	tests := []struct{ route, want string }{
		{"Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\n" +
			"hl0\t00005A0A\t00000000\t0001\t0\t0\t0\t0000FFFF\n" +
			"ens4\t00000000\t0101A8C0\t0003\t0\t0\t0\t00000000\n", "ens4"},
		{"Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\n", ""},
		{"", ""},
	}
	for _, tt := range tests {
		if got := defaultRouteIface([]byte(tt.route)); got != tt.want {
			t.Errorf("defaultRouteIface(%q) = %q, want %q", tt.route, got, tt.want)
		}
	}
}

func TestParseMeminfo(t *testing.T) {
	got, err := parseMeminfo([]byte("MemTotal:       24683568 kB\nMemFree:        20985884 kB\nMemAvailable:   23775424 kB\n" +
		"Buffers:           54964 kB\nInactive(file):  1000 kB\nSwapTotal: 0 kB\nSwapFree: 0 kB\nHugePages_Total: 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := meminfo{total: 24683568 * 1024, free: 20985884 * 1024, available: 23775424 * 1024, inactiveFile: 1000 * 1024}
	if got != want {
		t.Errorf("parseMeminfo = %+v, want %+v", got, want)
	}
	if _, err := parseMeminfo([]byte("MemFree: 1 kB\n")); err == nil {
		t.Error("parseMeminfo without MemTotal succeeded, want an error")
	}
	if _, err := parseMeminfo([]byte("MemTotal: x kB\n")); err == nil {
		t.Error("parseMeminfo with a bad number succeeded, want an error")
	}
}

func TestParseStat(t *testing.T) {
	data := "cpu  100 20 30 4000 50 6 7 8 9 10\ncpu0 50 10 15 2000 25 3 3 4 0 0\nintr 1 2 3\nbtime 1764748800\nprocesses 1234\n"
	boot, cpu, err := parseStat([]byte(data), 100)
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Unix(1764748800, 0); !boot.Equal(want) {
		t.Errorf("boot = %v, want %v", boot, want)
	}
	// user+nice+system+irq+softirq+steal = 100+20+30+6+7+8 ticks of 10 ms.
	if want := uint64(171) * uint64(10*time.Millisecond); cpu != want {
		t.Errorf("cpu = %d, want %d", cpu, want)
	}
	if _, _, err := parseStat([]byte("btime x\n"), 100); err == nil {
		t.Error("parseStat with a bad btime succeeded, want an error")
	}
}

func TestMemTotal(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{"MemTotal:       16384 kB\nMemFree: 1 kB\n", 16384 * 1024, false},
		{"MemFree: 1 kB\nMemTotal: 2 kB", 2048, false},
		{"MemTotal: 7\n", 7, false},
		{"MemFree: 1 kB\n", 0, true},
		{"MemTotal: x kB\n", 0, true},
		{"MemTotal: -1 kB\n", 0, true},
		{"MemTotal: 5 MB\n", 0, true},
		{"MemTotal: 18014398509481984 kB\n", 0, true},
		{"", 0, true},
	}
	for _, tc := range tests {
		got, err := MemTotal([]byte(tc.in))
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("MemTotal(%q) = %d, %v; want %d, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}
