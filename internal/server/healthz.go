package server

import (
	"bytes"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"k8s.io/klog/v2"
)

// pingCheck is installed when a healthz server is given no checks.
var pingCheck = HealthCheck{Name: "ping", Check: func() error { return nil }}

// installHealthz registers /healthz and /healthz/{name} on mux.
func installHealthz(mux *http.ServeMux, checks []HealthCheck) {
	if len(checks) == 0 {
		checks = []HealthCheck{pingCheck}
	}
	checks = append([]HealthCheck(nil), checks...)
	byName := make(map[string]HealthCheck, len(checks))
	for _, c := range checks {
		byName[c.Name] = c
	}
	mux.Handle("GET /healthz", rootHealthz(checks))
	mux.HandleFunc("GET /healthz/{name}", func(w http.ResponseWriter, r *http.Request) {
		c, ok := byName[r.PathValue("name")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		if err := runCheck(c); err != nil {
			http.Error(w, fmt.Sprintf("internal server error: %v", err), http.StatusInternalServerError)
			return
		}
		writeOK(w)
	})
}

// rootHealthz runs every check not excluded with ?exclude=<name>
// (repeatable). Healthy: 200 "ok", or with ?verbose one line per check.
// Unhealthy: 500 with one line per check; failures read
// "[-]<name> failed: reason withheld" and their errors go to the log.
func rootHealthz(checks []HealthCheck) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		logger := klog.FromContext(r.Context())
		query := r.URL.Query()
		excluded := map[string]bool{}
		for _, name := range query["exclude"] {
			excluded[strings.TrimSpace(name)] = true
		}
		var out bytes.Buffer
		var failed []string
		for _, c := range checks {
			if excluded[c.Name] {
				delete(excluded, c.Name)
				fmt.Fprintf(&out, "[+]%s excluded: ok\n", c.Name)
				continue
			}
			if err := runCheck(c); err != nil {
				logger.V(2).Info("Health check failed", "check", c.Name, "err", err)
				fmt.Fprintf(&out, "[-]%s failed: reason withheld\n", c.Name)
				failed = append(failed, c.Name)
				continue
			}
			fmt.Fprintf(&out, "[+]%s ok\n", c.Name)
		}
		if len(excluded) > 0 {
			names := make([]string, 0, len(excluded))
			for n := range excluded {
				names = append(names, fmt.Sprintf("%q", n))
			}
			sort.Strings(names)
			fmt.Fprintf(&out, "warn: some health checks cannot be excluded: no matches for %s\n", strings.Join(names, ","))
		}
		if len(failed) > 0 {
			http.Error(w, out.String()+"healthz check failed", http.StatusInternalServerError)
			return
		}
		if _, verbose := query["verbose"]; !verbose {
			writeOK(w)
			return
		}
		setTextHeaders(w)
		_, _ = out.WriteTo(w)
		fmt.Fprint(w, "healthz check passed\n")
	})
}

// runCheck runs one check; a check without a function passes.
func runCheck(c HealthCheck) error {
	if c.Check == nil {
		return nil
	}
	return c.Check()
}

func writeOK(w http.ResponseWriter) {
	setTextHeaders(w)
	fmt.Fprint(w, "ok")
}

func setTextHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
}
