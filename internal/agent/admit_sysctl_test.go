package agent

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/heartlet/heartlet/internal/podconfig"
	"github.com/heartlet/heartlet/internal/podworker"
	"github.com/heartlet/heartlet/internal/status"
	"github.com/heartlet/heartlet/internal/sysctl"
)

// A pod with a sysctl the node does not allow fails with upstream's reason
// SysctlForbidden (test/e2e/common/node/sysctl.go); allowedUnsafeSysctls
// lets it in.
func TestAdmitSysctls(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	safeOnly, err := sysctl.NewAllowlist(nil)
	if err != nil {
		t.Fatal(err)
	}
	unsafe, err := sysctl.NewAllowlist([]string{"kernel.msg*"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		allow      *sysctl.Allowlist
		sysctl     string
		wantAdmit  bool
		wantReason string
		wantMsg    string
	}{
		{name: "safe", allow: safeOnly, sysctl: "kernel.shm_rmid_forced", wantAdmit: true},
		{name: "unsafe", allow: safeOnly, sysctl: "kernel.msgmax", wantReason: "SysctlForbidden", wantMsg: `forbidden sysctl: "kernel.msgmax" not allowlisted`},
		{name: "unsafe allowed", allow: unsafe, sysctl: "kernel.msgmax", wantAdmit: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			statuses := status.NewManager(clk)
			a := &admitter{
				statuses: statuses,
				workers:  podworker.New(nil, clk, time.Minute),
				desired:  podconfig.New(t.Context()),
				sysctls:  tc.allow,
			}
			pod := &v1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "u1"},
				Spec: v1.PodSpec{
					Containers:      []v1.Container{{Name: "c", Image: "img"}},
					SecurityContext: &v1.PodSecurityContext{Sysctls: []v1.Sysctl{{Name: tc.sysctl, Value: "1"}}},
				},
			}
			if got := a.admit(context.Background(), pod); got != tc.wantAdmit {
				t.Fatalf("admit = %v, want %v", got, tc.wantAdmit)
			}
			if tc.wantAdmit {
				return
			}
			st, ok := statuses.GetPodStatus(pod.UID)
			if !ok || st.Phase != v1.PodFailed || st.Reason != tc.wantReason || st.Message != tc.wantMsg {
				t.Errorf("status = %s %s %q, want Failed %s %q", st.Phase, st.Reason, st.Message, tc.wantReason, tc.wantMsg)
			}
		})
	}
}
