package agent

import (
	"testing"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"

	"github.com/heartlet/heartlet/internal/server"
)

func TestDebugOptions(t *testing.T) {
	tests := []struct {
		name string
		cfg  kubeletv1beta1.KubeletConfiguration
		want server.DebugOptions
	}{
		{"unset: on", kubeletv1beta1.KubeletConfiguration{}, server.DebugOptions{
			EnableDebuggingHandlers: true, EnableSystemLogHandler: true, LogDir: "/var/log",
			EnableProfilingHandler: true, EnableDebugFlagsHandler: true,
		}},
		{"all off", kubeletv1beta1.KubeletConfiguration{
			EnableDebuggingHandlers: ptr.To(false), EnableSystemLogHandler: ptr.To(false),
			EnableProfilingHandler: ptr.To(false), EnableDebugFlagsHandler: ptr.To(false),
		}, server.DebugOptions{LogDir: "/var/log"}},
		{"contention profiling", kubeletv1beta1.KubeletConfiguration{
			EnableDebuggingHandlers: ptr.To(true), EnableSystemLogHandler: ptr.To(false), EnableContentionProfiling: true,
		}, server.DebugOptions{
			EnableDebuggingHandlers: true, LogDir: "/var/log", EnableProfilingHandler: true,
			EnableContentionProfiling: true, EnableDebugFlagsHandler: true,
		}},
	}
	for _, tt := range tests {
		if got := debugOptions(&tt.cfg); got != tt.want {
			t.Errorf("%s: debugOptions = %+v, want %+v", tt.name, got, tt.want)
		}
		if got, want := debugOptions(&tt.cfg).ContentionProfiling(), tt.cfg.EnableContentionProfiling; got != want {
			t.Errorf("%s: ContentionProfiling = %v, want %v", tt.name, got, want)
		}
	}
}
