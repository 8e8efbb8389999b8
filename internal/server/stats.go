package server

import (
	"context"
	"encoding/json"
	"net/http"

	"k8s.io/klog/v2"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// SummaryProvider returns the node's stats summary; onlyCPUAndMemory
// limits it to the CPU and memory of the node, pods and containers.
type SummaryProvider interface {
	Summary(ctx context.Context, onlyCPUAndMemory bool) (*statsapi.Summary, error)
}

// StatsHandlers are the stats endpoints; nil members are left out.
type StatsHandlers struct {
	// Summary serves /stats/summary.
	Summary SummaryProvider
	// ResourceMetrics serves /metrics/resource, CadvisorMetrics
	// /metrics/cadvisor.
	ResourceMetrics http.Handler
	CadvisorMetrics http.Handler
}

// installStats adds /stats/summary, /metrics/resource and
// /metrics/cadvisor to mux.
func installStats(mux *http.ServeMux, h StatsHandlers) {
	if h.Summary != nil {
		mux.Handle("GET /stats/summary", summaryHandler(h.Summary))
	}
	if h.ResourceMetrics != nil {
		mux.Handle("GET /metrics/resource", h.ResourceMetrics)
	}
	if h.CadvisorMetrics != nil {
		mux.Handle("GET /metrics/cadvisor", h.CadvisorMetrics)
	}
}

// InstallStats adds the stats endpoints to a server built with
// NewReadOnly, which serves them too, as the kubelet's read-only port.
func (s *Server) InstallStats(h StatsHandlers) {
	installStats(s.mux, h)
}

// summaryHandler serves the summary as JSON; only_cpu_and_memory=true
// asks for CPU and memory only, as the kubelet's query parameter.
func summaryHandler(p SummaryProvider) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		only := r.URL.Query().Get("only_cpu_and_memory") == "true"
		sum, err := p.Summary(r.Context(), only)
		if err != nil {
			klog.FromContext(r.Context()).Error(err, "Failed to get the stats summary")
			http.Error(w, "internal server error: "+err.Error(), http.StatusInternalServerError)
			return
		}
		data, err := json.Marshal(sum)
		if err != nil {
			http.Error(w, "internal server error: encode summary", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(data)
	})
}
