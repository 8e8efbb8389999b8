package agent

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/heartlet/heartlet/internal/config"
)

// Run checks the host before it touches the node: with a missing static
// pod directory it fails naming the setting and creates no root directory.
func TestRunChecksHostFirst(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	a, err := New(&config.Options{
		Config:  &kubeletv1beta1.KubeletConfiguration{StaticPodPath: filepath.Join(dir, "missing")},
		RootDir: root,
	})
	if err != nil {
		t.Fatal(err)
	}
	err = a.Run(t.Context())
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "staticPodPath") {
		t.Fatalf("Run = %v, want the missing static pod path", err)
	}
	if _, err := os.Stat(root); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("root directory made before the host checks passed: %v", err)
	}
}
