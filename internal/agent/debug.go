package agent

import (
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/heartlet/heartlet/internal/server"
)

// debugOptions are the kubelet API's debugging endpoints as the
// configuration enables them (every field defaults to true).
func debugOptions(cfg *kubeletv1beta1.KubeletConfiguration) server.DebugOptions {
	on := func(b *bool) bool { return b == nil || *b }
	return server.DebugOptions{
		EnableDebuggingHandlers:   on(cfg.EnableDebuggingHandlers),
		EnableSystemLogHandler:    on(cfg.EnableSystemLogHandler),
		LogDir:                    server.DefaultNodeLogDir,
		EnableProfilingHandler:    on(cfg.EnableProfilingHandler),
		EnableContentionProfiling: cfg.EnableContentionProfiling,
		EnableDebugFlagsHandler:   on(cfg.EnableDebugFlagsHandler),
	}
}
