package agent

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/heartlet/heartlet/internal/config"
	"github.com/heartlet/heartlet/internal/podlifecycle"
	"github.com/heartlet/heartlet/internal/status"
)

func TestNewEviction(t *testing.T) {
	tests := []struct {
		name    string
		hard    map[string]string
		wantErr string
	}{
		{"upstream defaults", config.DefaultEvictionHard(), ""},
		{"none", nil, ""},
		{"containerfs refused", map[string]string{"containerfs.available": "10%"}, "containerfs.available"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := New(&config.Options{Config: &kubeletv1beta1.KubeletConfiguration{EvictionHard: tt.hard}, NodeName: "n1"})
			if err != nil {
				t.Fatal(err)
			}
			c := &components{statuses: status.NewManager(a.clock)}
			m, err := a.newEviction(t.Context(), c)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one naming %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// No pass has run: no pressure, every pod admitted.
			pred := evictionPredicate(m)
			if r := pred(podlifecycle.AdmitAttrs{Pod: &v1.Pod{}}); !r.Admit || m.MemoryPressure() || m.DiskPressure() || m.PIDPressure() {
				t.Errorf("before any pass: admit %+v, pressure %v/%v/%v", r, m.MemoryPressure(), m.DiskPressure(), m.PIDPressure())
			}
		})
	}
}
