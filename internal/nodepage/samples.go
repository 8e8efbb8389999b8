package nodepage

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// usage is one CPU and memory sample.
type usage struct {
	cpuNanoCores uint64
	memoryBytes  uint64
}

// series is a bounded ring of samples, oldest first once listed.
type series struct {
	values []usage
	next   int
}

func (s *series) add(u usage, size int) {
	if len(s.values) < size {
		s.values = append(s.values, u)
		return
	}
	s.values[s.next] = u
	s.next = (s.next + 1) % size
}

func (s *series) list() []usage {
	out := make([]usage, 0, len(s.values))
	out = append(out, s.values[s.next:]...)
	return append(out, s.values[:s.next]...)
}

// samples keeps the node's and each pod's recent usage. Safe for
// concurrent use.
type samples struct {
	size int

	mu   sync.Mutex
	node series
	pods map[types.UID]*series
}

func newSamples(size int) *samples {
	return &samples{size: size, pods: map[types.UID]*series{}}
}

// take adds one sample from a summary; pods missing from it are dropped.
func (s *samples) take(sum *statsapi.Summary) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.node.add(usageOf(sum.Node.CPU, sum.Node.Memory), s.size)
	seen := map[types.UID]bool{}
	for _, p := range sum.Pods {
		uid := types.UID(p.PodRef.UID)
		seen[uid] = true
		ps := s.pods[uid]
		if ps == nil {
			ps = &series{}
			s.pods[uid] = ps
		}
		ps.add(usageOf(p.CPU, p.Memory), s.size)
	}
	for uid := range s.pods {
		if !seen[uid] {
			delete(s.pods, uid)
		}
	}
}

func usageOf(cpu *statsapi.CPUStats, mem *statsapi.MemoryStats) usage {
	var u usage
	if cpu != nil && cpu.UsageNanoCores != nil {
		u.cpuNanoCores = *cpu.UsageNanoCores
	}
	if mem != nil && mem.WorkingSetBytes != nil {
		u.memoryBytes = *mem.WorkingSetBytes
	}
	return u
}

func (s *samples) nodeSeries() []usage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.node.list()
}

func (s *samples) podSeries(uid types.UID) []usage {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ps := s.pods[uid]; ps != nil {
		return ps.list()
	}
	return nil
}

// sample takes one summary from p into s.
func sample(ctx context.Context, p SummaryProvider, s *samples) error {
	sum, err := p.Summary(ctx, true)
	if err != nil {
		return fmt.Errorf("stats summary: %w", err)
	}
	s.take(sum)
	return nil
}

// sparkline is an inline SVG polyline of values, scaled to the largest.
type sparkline struct {
	Points string // "x,y x,y ...", numbers only
	Latest string
	Width  int
	Height int
}

const (
	sparkWidth  = 120
	sparkHeight = 24
)

func newSparkline(values []float64, latest string) sparkline {
	sl := sparkline{Latest: latest, Width: sparkWidth, Height: sparkHeight}
	if len(values) == 0 {
		return sl
	}
	peak := 0.0
	for _, v := range values {
		peak = max(peak, v)
	}
	step := 0.0
	if len(values) > 1 {
		step = float64(sparkWidth) / float64(len(values)-1)
	}
	var b strings.Builder
	for i, v := range values {
		y := float64(sparkHeight - 1)
		if peak > 0 {
			y = float64(sparkHeight-1) - v/peak*float64(sparkHeight-2)
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%.1f,%.1f", float64(i)*step, y)
	}
	sl.Points = b.String()
	return sl
}

// cpuLine and memoryLine are the sparklines of a series.
func cpuLine(us []usage) sparkline {
	vals := make([]float64, len(us))
	for i, u := range us {
		vals[i] = float64(u.cpuNanoCores)
	}
	latest := "no samples yet"
	if len(us) > 0 {
		latest = formatCores(us[len(us)-1].cpuNanoCores)
	}
	return newSparkline(vals, latest)
}

func memoryLine(us []usage) sparkline {
	vals := make([]float64, len(us))
	for i, u := range us {
		vals[i] = float64(u.memoryBytes)
	}
	latest := "no samples yet"
	if len(us) > 0 {
		latest = formatBytes(us[len(us)-1].memoryBytes)
	}
	return newSparkline(vals, latest)
}

// formatCores is nanocores as millicores: "12m".
func formatCores(n uint64) string {
	return fmt.Sprintf("%dm", n/1_000_000)
}

// formatBytes is bytes in binary units: "34.5 MiB".
func formatBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}

// sampleTimeout bounds one stats request.
const sampleTimeout = 5 * time.Second
