package config

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// TestEveryUpstreamFlagAccepted checks that every flag of the upstream
// kubelet v1.37 (testdata/upstream-kubelet-flags.txt) is declared.
func TestEveryUpstreamFlagAccepted(t *testing.T) {
	f, err := os.Open("testdata/upstream-kubelet-flags.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	fs, _ := newFlagSet(NewDefault(), &cmdline{})
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name := strings.TrimSpace(sc.Text())
		if name == "" || strings.HasPrefix(name, "#") {
			continue
		}
		n++
		if fs.Lookup(name) == nil {
			t.Errorf("upstream flag --%s is not accepted", name)
		}
	}
	if n < 100 {
		t.Fatalf("only %d upstream flags listed", n)
	}
}

// TestUpstreamConfigFlags checks that flags set their fields, that each
// gives upstream's deprecation (naming the field) but --v, and that a
// field heartlet does not act on is named among the ignored ones.
func TestUpstreamConfigFlags(t *testing.T) {
	e := fakeEnv(nil, "node-a")
	opts := mustLoad(t, e,
		"--cpu-manager-policy=static",
		"--cpu-cfs-quota=false",
		"--cpu-cfs-quota-period=50ms",
		"--system-reserved=cpu=100m,memory=1Gi",
		"--reserved-memory=0:memory=1Gi,hugepages-1M=2Gi;1:memory=2Gi",
		"--image-gc-high-threshold=90",
		"--enable-server=false",
		"--log-flush-frequency=10s",
		"--v=2",
	)
	kc := opts.Config
	checks := []struct {
		name      string
		got, want any
	}{
		{"cpuManagerPolicy", kc.CPUManagerPolicy, "static"},
		{"cpuCFSQuota", *kc.CPUCFSQuota, false},
		{"cpuCFSQuotaPeriod", kc.CPUCFSQuotaPeriod.Duration, 50 * time.Millisecond},
		{"systemReserved", fmt.Sprint(kc.SystemReserved), "map[cpu:100m memory:1Gi]"},
		{"reservedMemory", reservedMemoryFlag{&kc.ReservedMemory}.String(), "0:hugepages-1M=2Gi,memory=1Gi;1:memory=2Gi"},
		{"imageGCHighThresholdPercent", *kc.ImageGCHighThresholdPercent, int32(90)},
		{"enableServer", *kc.EnableServer, false},
		{"logging.flushFrequency", kc.Logging.FlushFrequency.Duration.Duration, 10 * time.Second},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	warnings := strings.Join(opts.Warnings, "\n")
	for _, want := range []string{
		"flag --cpu-manager-policy is deprecated as upstream: set cpuManagerPolicy in the --config file instead",
		"flag --reserved-memory is deprecated as upstream: set reservedMemory in the --config file instead",
		"flag --log-flush-frequency is deprecated as upstream: set logging.flushFrequency in the --config file instead",
	} {
		if !strings.Contains(warnings, want) {
			t.Errorf("warnings lack %q:\n%s", want, warnings)
		}
	}
	if strings.Contains(warnings, "--v ") {
		t.Errorf("--v is not deprecated upstream, but warned about:\n%s", warnings)
	}
	ignored := IgnoredList(opts.Ignored)
	// imageGCHighThresholdPercent is honoured (image garbage collection).
	if strings.Contains(fmt.Sprint(ignored), "imageGCHighThresholdPercent") {
		t.Errorf("ignored fields %v name imageGCHighThresholdPercent, which is honoured", ignored)
	}
	for _, f := range []string{"cpuManagerPolicy", "reservedMemory"} {
		if !strings.Contains(fmt.Sprint(ignored), f) {
			t.Errorf("ignored fields %v lack %s", ignored, f)
		}
	}
	if _, err := load([]string{"--reserved-memory=0-memory"}, e); err == nil || !strings.Contains(err.Error(), "incorrect format") {
		t.Errorf("bad --reserved-memory: %v", err)
	}
}

// TestUpstreamFlagOnly checks the flag-only settings heartlet does not act
// on: each is named in a warning, or refused when ignoring it would start
// something other than what was asked.
func TestUpstreamFlagOnly(t *testing.T) {
	e := fakeEnv(map[string]string{"/etc/kubernetes/kubelet.conf": "apiVersion: v1\nkind: Config\n"}, "node-a")
	for _, tc := range []struct {
		args []string
		warn string // substring of a warning
		err  string // substring of the error
	}{
		{[]string{"--cloud-provider=external"}, "flag --cloud-provider=external is not acted on by heartlet", ""},
		{[]string{"--cloud-provider=aws"}, "", "must be '' or 'external'"},
		{[]string{"--runonce"}, "", "does not support the run-once mode"},
		{[]string{"--runtime-cgroups=/system.slice/containerd.service"}, "flag --runtime-cgroups is not acted on by heartlet", ""},
		{[]string{"--maximum-dead-containers=10"}, "flag --maximum-dead-containers has been deprecated upstream (Use --eviction-hard or --eviction-soft instead) and is not acted on by heartlet", ""},
		{[]string{"--experimental-mounter-path=/bin/mount"}, "flag --experimental-mounter-path has been deprecated upstream", ""},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			opts, err := load(tc.args, e)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want it to contain %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if w := strings.Join(opts.Warnings, "\n"); !strings.Contains(w, tc.warn) {
				t.Errorf("warnings %q lack %q", w, tc.warn)
			}
		})
	}
}

// FuzzFlagValues feeds the flag values heartlet parses itself: what one
// accepts must print back to a value it accepts again with the same
// meaning.
func FuzzFlagValues(f *testing.F) {
	f.Add("a=b:NoSchedule,c:NoExecute")
	f.Add("0:memory=1Gi,hugepages-1M=2Gi;1:memory=2Gi")
	f.Add(":;=,")
	f.Fuzz(func(t *testing.T, s string) {
		var taints []v1.Taint
		tf := taintsFlag{&taints}
		if tf.Set(s) == nil {
			var again []v1.Taint
			if err := (taintsFlag{&again}).Set(tf.String()); err != nil && len(taints) > 0 {
				t.Fatalf("taints %q print as %q, which is refused: %v", s, tf.String(), err)
			}
		}
		var mem []kubeletv1beta1.MemoryReservation
		mf := reservedMemoryFlag{&mem}
		if mf.Set(s) == nil {
			var again []kubeletv1beta1.MemoryReservation
			if err := (reservedMemoryFlag{&again}).Set(mf.String()); err != nil {
				t.Fatalf("reserved memory %q prints as %q, which is refused: %v", s, mf.String(), err)
			}
			if len(again) != len(mem) {
				t.Fatalf("reserved memory %q: %d reservations, %d after printing", s, len(mem), len(again))
			}
		}
	})
}
