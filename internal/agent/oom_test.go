package agent

import (
	"os"
	"path/filepath"
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
