package agent

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"

	"github.com/heartlet/heartlet/internal/metrics"
	"github.com/heartlet/heartlet/internal/nodepage"
	"github.com/heartlet/heartlet/internal/server"
)

// newNodePage builds the node page over the components; the components
// built later (the Node's manager, the workers) are read when the page is.
func (a *Agent) newNodePage(c *components, stats server.SummaryProvider) *nodepage.Page {
	var events func(int) []nodepage.Event
	if c.events != nil {
		events = c.events.Latest
	}
	return nodepage.New(nodepage.Options{
		NodeName: a.opts.NodeName,
		Node: func() *v1.Node {
			if c.node == nil {
				return nil
			}
			return c.node.Node()
		},
		Allocatable: func() v1.ResourceList {
			if c.allocatable == nil {
				return nil
			}
			return c.allocatable()
		},
		Pods:    c.statuses.Pods,
		Journal: c.journal.Latest,
		Events:  events,
		Stats:   stats,
		Health:  c.loopHealth,
		Clock:   a.clock,
	})
}

// loopHealth is heartlet's own health for the node page: the PLEG's and
// the runtime's checks with the mean relist time, the sync loop, the pod
// workers and the mean API request latency.
func (c *components) loopHealth() []nodepage.Check {
	check := func(name string, err error, extra string) nodepage.Check {
		if err != nil {
			return nodepage.Check{Name: name, Value: err.Error()}
		}
		return nodepage.Check{Name: name, Value: "healthy" + extra, OK: true}
	}
	relist := ""
	if d, ok := meanDuration(metrics.PLEGRelistDuration); ok {
		relist = fmt.Sprintf(", mean relist %s", d.Round(time.Microsecond))
	}
	out := []nodepage.Check{
		check("PLEG", c.pleg.Healthy(), relist),
		check("container runtime", c.pleg.RuntimeHealthy(), ""),
		check("sync loop", c.syncLoop.Check(), ""),
	}
	if c.workers != nil {
		out = append(out, nodepage.Check{Name: "pod workers", Value: fmt.Sprint(len(c.workers.Pods())), OK: true})
	}
	if d, ok := meanDuration(metrics.RESTClientRequestDuration); ok {
		out = append(out, nodepage.Check{Name: "API requests", Value: fmt.Sprintf("mean latency %s since start", d.Round(time.Microsecond)), OK: true})
	}
	return out
}

// meanDuration is the mean of every histogram c collects (seconds), and
// false when nothing was observed.
func meanDuration(c prometheus.Collector) (time.Duration, bool) {
	ch := make(chan prometheus.Metric, 16)
	go func() {
		c.Collect(ch)
		close(ch)
	}()
	var sum float64
	var count uint64
	for m := range ch {
		var pb dto.Metric
		if m.Write(&pb) != nil || pb.Histogram == nil {
			continue
		}
		sum += pb.Histogram.GetSampleSum()
		count += pb.Histogram.GetSampleCount()
	}
	if count == 0 {
		return 0, false
	}
	return time.Duration(sum / float64(count) * float64(time.Second)), true
}
