package agent

import (
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
)

// heartlet asks for oomScoreAdj for itself, -999 when unset, and goes on
// with a warning when it may not.
func TestOwnOOMScoreAdj(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  *int32
		want string
	}{
		{"configured", ptr.To[int32](-500), "-500"},
		{"positive", ptr.To[int32](300), "300"},
		{"unset", nil, "-999"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "oom_score_adj")
			var logs []string
			logger := funcr.New(func(prefix, args string) { logs = append(logs, args) }, funcr.Options{})
			setOwnOOMScoreAdj(logger, path, oomScoreAdj(&kubeletv1beta1.KubeletConfiguration{OOMScoreAdj: tc.set}))
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tc.want {
				t.Errorf("oom_score_adj = %q, want %q", b, tc.want)
			}
			if len(logs) != 0 {
				t.Errorf("logs = %q", logs)
			}
		})
	}
	t.Run("refused", func(t *testing.T) {
		var logs []string
		logger := funcr.New(func(prefix, args string) { logs = append(logs, args) }, funcr.Options{})
		setOwnOOMScoreAdj(logger, filepath.Join(t.TempDir(), "missing", "oom_score_adj"), -999)
		if len(logs) != 1 || !strings.Contains(logs[0], "could not set heartlet's own oom_score_adj") || !strings.Contains(logs[0], `"value"=-999`) {
			t.Errorf("logs = %q, want one warning with the value", logs)
		}
	})
}

// podsPerCore bounds the pods capacity heartlet gives node status and
// admission.
func TestMaxPods(t *testing.T) {
	cpus := goruntime.NumCPU()
	for _, tc := range []struct {
		name    string
		maxPods int32
		perCore int32
		want    int
	}{
		{"maxPods alone", 110, 0, 110},
		{"podsPerCore below maxPods", 10000, 2, 2 * cpus},
		{"podsPerCore above maxPods", 1, 5, 1},
	} {
		if got := maxPods(&kubeletv1beta1.KubeletConfiguration{MaxPods: tc.maxPods, PodsPerCore: tc.perCore}); got != tc.want {
			t.Errorf("%s: maxPods = %d, want %d", tc.name, got, tc.want)
		}
	}
}
