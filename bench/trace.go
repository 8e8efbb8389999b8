package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/heartlet/heartlet/internal/journal"
)

// The steps of a pod's start as heartlet's journal records them, in order,
// each found by a part of its message; the last step is the watch showing
// the pod Running.
var traceSteps = []struct{ name, match string }{
	{"admitted", "admitted"},
	{"volumes ready", "volumes ready"},
	{"sandbox started", "pod sandbox started"},
	{"container created", "container created"},
	{"container started", "container started"},
	{"status Running written", "status written: Running"},
}

// stepTimes is, per step (the index in traceSteps, then one more for the
// watch), the offsets from the pods' create calls.
type stepTimes [][]time.Duration

// traceStarts reads every pod's journal from heartlet's read-only server
// and returns, per start step, the offsets from the pod's create call.
// Pods whose journal cannot be read are skipped and counted.
func traceStarts(base, namespace string, times map[string]podTimes) (stepTimes, int) {
	out := make(stepTimes, len(traceSteps)+1)
	missing := 0
	c := &http.Client{Timeout: 10 * time.Second}
	for name, t := range times {
		pj, err := readJournal(c, fmt.Sprintf("%s/debug/pods/%s/%s/journal", base, namespace, name))
		if err != nil {
			missing++
			continue
		}
		for i, st := range traceSteps {
			for _, e := range pj.Entries {
				if strings.Contains(e.Message, st.match) {
					when := e.Time
					if !e.First.IsZero() {
						when = e.First
					}
					out[i] = append(out[i], when.Sub(t.created))
					break
				}
			}
		}
		out[len(traceSteps)] = append(out[len(traceSteps)], t.running.Sub(t.created))
	}
	for _, d := range out {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	}
	return out, missing
}

func readJournal(c *http.Client, url string) (*journal.PodJournal, error) {
	resp, err := c.Get(url)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("get %s: %s: %s", url, resp.Status, b)
	}
	var pj journal.PodJournal
	if err := json.NewDecoder(resp.Body).Decode(&pj); err != nil {
		return nil, fmt.Errorf("decode %s: %w", url, err)
	}
	return &pj, nil
}

// printTrace prints the start steps' offsets from the create call.
func printTrace(w io.Writer, agent string, n int, st stepTimes, missing int) {
	names := make([]string, 0, len(traceSteps)+1)
	for _, t := range traceSteps {
		names = append(names, t.name)
	}
	s := &steps{names: append(names, "Running seen by a watch"), times: st}
	s.print(w, fmt.Sprintf("%s, %d pods: start steps, offset from the create call (journals of %d pods)", agent, n, n-missing))
}
