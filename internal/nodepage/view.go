package nodepage

import (
	"fmt"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/heartlet/heartlet/internal/journal"
	"github.com/heartlet/heartlet/internal/podspec"
)

// view is what the templates render. Every string in it is data, escaped
// by html/template where it is written.
type view struct {
	Nonce         string
	NodeName      string
	Now           string
	RefreshMillis int64
	SampleEvery   string
	Conditions    []condView
	Resources     []resourceView
	NodeCPU       sparkline
	NodeMemory    sparkline
	Pods          []podView
	Latest        []latestView
	EventsOn      bool
	Events        []eventView
	Health        []Check
}

type eventView struct {
	Ago, Type, Object, Reason, Message string
	Count                              int
	Warning                            bool
}

type condView struct {
	Type, Status, Reason, Message string
	Bad                           bool
}

type resourceView struct {
	Name, Allocatable, Requested, Used string
}

type podView struct {
	Namespace, Name, UID   string
	Phase, Reason, Message string
	Containers             []containerView
	CPU, Memory            sparkline
	Journal                []entryView
}

type containerView struct {
	Name, Kind    string
	State, Detail string
	Restarts      int32
	Ready         bool
	Started       string
	Probes        string
}

type entryView struct {
	Ago, Kind, Text string
}

type latestView struct {
	Pod string
	entryView
}

// view reads every input once and builds the page's data.
func (p *Page) view() view {
	now := p.opts.Clock.Now()
	v := view{
		NodeName:      p.opts.NodeName,
		Now:           now.UTC().Format(time.RFC3339),
		RefreshMillis: p.opts.Refresh.Milliseconds(),
		SampleEvery:   p.opts.SampleEvery.String(),
	}
	var node *v1.Node
	if p.opts.Node != nil {
		node = p.opts.Node()
	}
	if node != nil {
		for _, c := range node.Status.Conditions {
			bad := c.Status != v1.ConditionFalse
			if c.Type == v1.NodeReady {
				bad = c.Status != v1.ConditionTrue
			}
			v.Conditions = append(v.Conditions, condView{Type: string(c.Type), Status: string(c.Status), Reason: c.Reason, Message: c.Message, Bad: bad})
		}
	}
	var pods []*v1.Pod
	if p.opts.Pods != nil {
		pods = append(pods, p.opts.Pods()...)
	}
	sort.Slice(pods, func(a, b int) bool {
		if pods[a].Namespace != pods[b].Namespace {
			return pods[a].Namespace < pods[b].Namespace
		}
		return pods[a].Name < pods[b].Name
	})
	nodeSeries := p.samples.nodeSeries()
	v.NodeCPU, v.NodeMemory = cpuLine(nodeSeries), memoryLine(nodeSeries)
	v.Resources = resources(p.allocatable(node), pods, nodeSeries)

	var latest []latestView
	var latestTimes []time.Time
	for _, pod := range pods {
		pv := podView{Namespace: pod.Namespace, Name: pod.Name, UID: string(pod.UID), Phase: string(pod.Status.Phase), Reason: pod.Status.Reason, Message: pod.Status.Message}
		if pv.Phase == "" {
			pv.Phase = "Pending"
		}
		pv.Containers = containers(pod, now)
		ps := p.samples.podSeries(pod.UID)
		pv.CPU, pv.Memory = cpuLine(ps), memoryLine(ps)
		if p.opts.Journal != nil {
			for _, e := range p.opts.Journal(pod.UID, journalLines) {
				ev := entryView{Ago: journal.Ago(now, e.Time), Kind: string(e.Kind), Text: e.Describe(now)}
				pv.Journal = append(pv.Journal, ev)
				latest = append(latest, latestView{Pod: pod.Namespace + "/" + pod.Name, entryView: ev})
				latestTimes = append(latestTimes, e.Time)
			}
		}
		v.Pods = append(v.Pods, pv)
	}
	idx := make([]int, len(latest))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return latestTimes[idx[a]].After(latestTimes[idx[b]]) })
	for _, i := range idx[:min(len(idx), latestLines)] {
		v.Latest = append(v.Latest, latest[i])
	}
	if p.opts.Events != nil {
		v.EventsOn = true
		for _, e := range p.opts.Events(eventLines) {
			v.Events = append(v.Events, eventView{Ago: journal.Ago(now, e.Time), Type: e.Type, Object: e.Object,
				Reason: e.Reason, Message: e.Message, Count: e.Count, Warning: e.Type != v1.EventTypeNormal})
		}
	}
	if p.opts.Health != nil {
		v.Health = p.opts.Health()
	}
	return v
}

// allocatable is the node's allocatable resources: from Allocatable, else
// from the Node, else unknown (nil).
func (p *Page) allocatable(node *v1.Node) v1.ResourceList {
	if p.opts.Allocatable != nil {
		if a := p.opts.Allocatable(); len(a) > 0 {
			return a
		}
	}
	if node != nil {
		return node.Status.Allocatable
	}
	return nil
}

// resources are CPU, memory and pods: allocatable, requested by the pods
// that have not finished, and used (the latest sample).
func resources(alloc v1.ResourceList, pods []*v1.Pod, nodeSeries []usage) []resourceView {
	var cpuReq, memReq resource.Quantity
	active := 0
	for _, pod := range pods {
		if podspec.IsTerminalPhase(pod.Status.Phase) {
			continue
		}
		active++
		for _, c := range pod.Spec.Containers {
			cpuReq.Add(c.Resources.Requests[v1.ResourceCPU])
			memReq.Add(c.Resources.Requests[v1.ResourceMemory])
		}
	}
	show := func(name v1.ResourceName) string {
		if q, ok := alloc[name]; ok {
			if name == v1.ResourceMemory {
				return formatBytes(uint64(q.Value()))
			}
			return q.String()
		}
		return "unknown"
	}
	cpuUsed, memUsed := "no samples yet", "no samples yet"
	if n := len(nodeSeries); n > 0 {
		cpuUsed, memUsed = formatCores(nodeSeries[n-1].cpuNanoCores), formatBytes(nodeSeries[n-1].memoryBytes)
	}
	return []resourceView{
		{Name: "cpu", Allocatable: show(v1.ResourceCPU), Requested: fmt.Sprintf("%dm", cpuReq.MilliValue()), Used: cpuUsed},
		{Name: "memory", Allocatable: show(v1.ResourceMemory), Requested: formatBytes(uint64(memReq.Value())), Used: memUsed},
		{Name: "pods", Allocatable: show(v1.ResourcePods), Requested: fmt.Sprint(active), Used: fmt.Sprint(active)},
	}
}

// containers are the pod's init and regular containers with their status.
func containers(pod *v1.Pod, now time.Time) []containerView {
	var out []containerView
	add := func(specs []v1.Container, statuses []v1.ContainerStatus, init bool) {
		for _, c := range specs {
			kind := ""
			if init {
				kind = "init"
				if podspec.IsSidecar(&c) {
					kind = "sidecar"
				}
			}
			cv := containerView{Name: c.Name, Kind: kind, State: "not created", Probes: probes(&c)}
			for _, st := range statuses {
				if st.Name != c.Name {
					continue
				}
				cv.Restarts, cv.Ready = st.RestartCount, st.Ready
				if st.Started != nil {
					cv.Started = fmt.Sprint(*st.Started)
				}
				cv.State, cv.Detail = state(st.State, now)
			}
			out = append(out, cv)
		}
	}
	add(pod.Spec.InitContainers, pod.Status.InitContainerStatuses, true)
	add(pod.Spec.Containers, pod.Status.ContainerStatuses, false)
	return out
}

// state is a container state's name and its detail.
func state(s v1.ContainerState, now time.Time) (string, string) {
	switch {
	case s.Running != nil:
		return "running", "since " + journal.Ago(now, s.Running.StartedAt.Time)
	case s.Waiting != nil:
		return "waiting", strings.TrimSpace(s.Waiting.Reason + " " + s.Waiting.Message)
	case s.Terminated != nil:
		return "terminated", fmt.Sprintf("%s, exit code %d", s.Terminated.Reason, s.Terminated.ExitCode)
	}
	return "unknown", ""
}

// probes names the container's probes: "startup, liveness, readiness".
func probes(c *v1.Container) string {
	var ps []string
	if c.StartupProbe != nil {
		ps = append(ps, "startup")
	}
	if c.LivenessProbe != nil {
		ps = append(ps, "liveness")
	}
	if c.ReadinessProbe != nil {
		ps = append(ps, "readiness")
	}
	if len(ps) == 0 {
		return "none"
	}
	return strings.Join(ps, ", ")
}
