package eviction

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Value is a threshold's or a minimum reclaim's amount: a quantity, or a
// fraction of the signal's capacity.
type Value struct {
	// Quantity is the amount; nil when Percentage applies.
	Quantity *resource.Quantity
	// Percentage is a fraction of the capacity, 0 to 1.
	Percentage float64
}

// Of is the amount v stands for on a signal of capacity c.
func (v Value) Of(c resource.Quantity) resource.Quantity {
	if v.Quantity != nil {
		return v.Quantity.DeepCopy()
	}
	return *resource.NewQuantity(int64(float64(c.Value())*v.Percentage), c.Format)
}

// String is the value as configured.
func (v Value) String() string {
	if v.Quantity != nil {
		return v.Quantity.String()
	}
	return strconv.FormatFloat(v.Percentage*100, 'f', -1, 64) + "%"
}

// Threshold is one eviction threshold: the signal is met when its
// available amount falls below Value.
type Threshold struct {
	Signal Signal
	Value  Value
	// GracePeriod is how long a soft threshold must be met before pods
	// are evicted for it; 0 for a hard threshold.
	GracePeriod time.Duration
	// Hard is true for an evictionHard threshold.
	Hard bool
	// MinReclaim, when set, is how far above Value the signal must come
	// back before a threshold that caused evictions stops being met.
	MinReclaim *Value
}

// key tells thresholds apart: a signal may have a hard and a soft one.
func (t Threshold) key() string {
	if t.Hard {
		return "hard/" + string(t.Signal)
	}
	return "soft/" + string(t.Signal)
}

// Config is the eviction part of the kubelet configuration, as maps of
// signal name to value.
type Config struct {
	Hard            map[string]string
	Soft            map[string]string
	SoftGracePeriod map[string]string
	MinimumReclaim  map[string]string
	// EnforcePods is true when enforceNodeAllocatable has "pods": every
	// hard memory.available threshold is then also an
	// allocatableMemory.available one, as upstream adds it.
	EnforcePods bool
}

// ParseThresholds turns the configuration into thresholds, hard ones
// first, each group in Signals order. A value of 0% or 100% disables the
// threshold. containerfs.* signals are refused: heartlet has no container
// filesystem apart from the node and image filesystems, whose thresholds
// apply. A soft threshold needs a grace period.
func ParseThresholds(c Config) ([]Threshold, error) {
	var errs []error
	var out []Threshold
	add := func(field string, m map[string]string, hard bool) {
		for _, sig := range sortedSignals(m) {
			raw := m[string(sig)]
			if err := knownSignal(sig); err != nil {
				errs = append(errs, fmt.Errorf("%s[%s]: %w", field, sig, err))
				continue
			}
			v, err := parseValue(raw)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s[%s]: %w", field, sig, err))
				continue
			}
			if v.Quantity == nil && (v.Percentage == 0 || v.Percentage == 1) {
				continue // disabled
			}
			if v.Quantity != nil && v.Quantity.Sign() <= 0 {
				errs = append(errs, fmt.Errorf("%s[%s]: %q must be greater than 0", field, sig, raw))
				continue
			}
			t := Threshold{Signal: sig, Value: v, Hard: hard}
			if !hard {
				g, ok := c.SoftGracePeriod[string(sig)]
				if !ok {
					errs = append(errs, fmt.Errorf("%s[%s]: needs a grace period in evictionSoftGracePeriod[%s]", field, sig, sig))
					continue
				}
				d, err := time.ParseDuration(g)
				if err != nil || d < 0 {
					errs = append(errs, fmt.Errorf("evictionSoftGracePeriod[%s]: %q must be a duration such as \"1m30s\"", sig, g))
					continue
				}
				t.GracePeriod = d
			}
			out = append(out, t)
		}
	}
	add("evictionHard", c.Hard, true)
	add("evictionSoft", c.Soft, false)
	for _, sig := range sortedSignals(c.MinimumReclaim) {
		raw := c.MinimumReclaim[string(sig)]
		if err := knownSignal(sig); err != nil {
			errs = append(errs, fmt.Errorf("evictionMinimumReclaim[%s]: %w", sig, err))
			continue
		}
		v, err := parseValue(raw)
		if err != nil || (v.Quantity != nil && v.Quantity.Sign() < 0) {
			errs = append(errs, fmt.Errorf("evictionMinimumReclaim[%s]: %q must be a quantity or percentage", sig, raw))
			continue
		}
		for i := range out {
			if out[i].Signal == sig {
				out[i].MinReclaim = &v
			}
		}
	}
	for _, sig := range sortedSignals(c.SoftGracePeriod) {
		if err := knownSignal(sig); err != nil {
			errs = append(errs, fmt.Errorf("evictionSoftGracePeriod[%s]: %w", sig, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("eviction thresholds: %w", err)
	}
	if c.EnforcePods {
		out = addAllocatableThresholds(out)
	}
	return out, nil
}

// addAllocatableThresholds appends, for each hard memory.available
// threshold, an allocatableMemory.available one with its value and
// minimum reclaim, unless one is configured already.
func addAllocatableThresholds(ts []Threshold) []Threshold {
	out := slices.Clone(ts)
	for _, t := range ts {
		if t.Signal != SignalMemoryAvailable || !t.Hard {
			continue
		}
		a := Threshold{Signal: SignalAllocatableMemoryAvailable, Value: t.Value, Hard: true, MinReclaim: t.MinReclaim}
		if !slices.ContainsFunc(out, func(x Threshold) bool { return x.key() == a.key() }) {
			out = append(out, a)
		}
	}
	return out
}

// knownSignal refuses the signals heartlet does not observe.
func knownSignal(s Signal) error {
	if slices.Contains(Signals, s) {
		return nil
	}
	if strings.HasPrefix(string(s), "containerfs.") {
		return errors.New("not supported: the containers' writable layers are on the image filesystem, set imagefs.* (or nodefs.*) instead")
	}
	return fmt.Errorf("unknown signal; supported: %v", Signals)
}

// sortedSignals are m's keys in Signals order, unknown ones last by name.
func sortedSignals(m map[string]string) []Signal {
	out := make([]Signal, 0, len(m))
	for k := range m {
		out = append(out, Signal(k))
	}
	slices.SortFunc(out, func(a, b Signal) int {
		ia, ib := slices.Index(Signals, a), slices.Index(Signals, b)
		if ia < 0 {
			ia = math.MaxInt
		}
		if ib < 0 {
			ib = math.MaxInt
		}
		if ia != ib {
			return ia - ib
		}
		return strings.Compare(string(a), string(b))
	})
	return out
}

func parseValue(raw string) (Value, error) {
	if pct, ok := strings.CutSuffix(raw, "%"); ok {
		f, err := strconv.ParseFloat(pct, 64)
		if err != nil || math.IsNaN(f) || f < 0 || f > 100 {
			return Value{}, fmt.Errorf("%q must be a percentage between 0%% and 100%%", raw)
		}
		return Value{Percentage: f / 100}, nil
	}
	q, err := resource.ParseQuantity(raw)
	if err != nil {
		return Value{}, fmt.Errorf("%q must be a quantity such as \"100Mi\" or a percentage such as \"10%%\"", raw)
	}
	return Value{Quantity: &q}, nil
}

// ThresholdsMet are the thresholds whose signal is below their value;
// with enforceMinReclaim, below their value plus their minimum reclaim.
// A threshold without an observation of its signal is not met.
func ThresholdsMet(ts []Threshold, obs Observations, enforceMinReclaim bool) []Threshold {
	var out []Threshold
	for _, t := range ts {
		o, ok := obs[t.Signal]
		if !ok {
			continue
		}
		q := t.Value.Of(o.Capacity)
		if enforceMinReclaim && t.MinReclaim != nil {
			q.Add(t.MinReclaim.Of(o.Capacity))
		}
		if q.Cmp(o.Available) > 0 {
			out = append(out, t)
		}
	}
	return out
}

// mergeThresholds is a and those of b not in a.
func mergeThresholds(a, b []Threshold) []Threshold {
	out := slices.Clone(a)
	for _, t := range b {
		if !slices.ContainsFunc(out, func(x Threshold) bool { return x.key() == t.key() }) {
			out = append(out, t)
		}
	}
	return out
}

// FirstObserved keeps, for each threshold met now, when it was first met
// without interruption: the earlier time from prev, else now.
func FirstObserved(met []Threshold, prev map[string]time.Time, now time.Time) map[string]time.Time {
	out := make(map[string]time.Time, len(met))
	for _, t := range met {
		if at, ok := prev[t.key()]; ok {
			out[t.key()] = at
		} else {
			out[t.key()] = now
		}
	}
	return out
}

// PastGracePeriod are the thresholds of met that have been met for at
// least their grace period (hard thresholds at once).
func PastGracePeriod(met []Threshold, firstObserved map[string]time.Time, now time.Time) []Threshold {
	var out []Threshold
	for _, t := range met {
		at, ok := firstObserved[t.key()]
		if ok && now.Sub(at) >= t.GracePeriod {
			out = append(out, t)
		}
	}
	return out
}

// ConditionOf is the node condition a signal's pressure is reported as.
func ConditionOf(s Signal) v1.NodeConditionType {
	switch s {
	case SignalMemoryAvailable, SignalAllocatableMemoryAvailable:
		return v1.NodeMemoryPressure
	case SignalPIDAvailable:
		return v1.NodePIDPressure
	}
	return v1.NodeDiskPressure
}

// Conditions keeps, for each pressure condition of a met threshold, the
// last time it was observed (now) and, for the others, the time in prev
// while it is within the transition period: a condition holds until its
// signal has been back above every threshold for that long.
func Conditions(met []Threshold, prev map[v1.NodeConditionType]time.Time, transition time.Duration, now time.Time) map[v1.NodeConditionType]time.Time {
	out := map[v1.NodeConditionType]time.Time{}
	for c, at := range prev {
		if now.Sub(at) < transition {
			out[c] = at
		}
	}
	for _, t := range met {
		out[ConditionOf(t.Signal)] = now
	}
	return out
}
