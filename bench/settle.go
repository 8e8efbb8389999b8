package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// settleMachine brings the kernel to the same state before every agent of
// a comparison: it writes back dirty pages and drops the page cache and
// the reclaimable slab caches. Without it, each agent runs on a kernel
// that keeps the memory cgroups of every container deleted before it:
// cgroup v1 keeps a deleted memory cgroup (offline, but still walked by
// the kernel's reclaim and statistics code) as long as page cache or slab
// objects are charged to it, and on this machine a few thousand of them
// made the agent that ran second 10–50 % slower than the same agent run
// first. It prints the memory cgroup count before and after; an error is
// printed and the comparison goes on. The binaries of every agent are read
// from disk again after it, alike.
func settleMachine(w io.Writer, agent string) {
	before, _ := memoryCgroups("/proc/cgroups")
	syscall.Sync()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0o200); err != nil {
		fmt.Fprintf(w, "compare: %s: caches not dropped (%v): the agent runs with %d memory cgroups\n", agent, err, before)
		return
	}
	// The kernel frees the released cgroups asynchronously: wait until
	// their count has not changed for two seconds (at most 30 s).
	start := time.Now()
	after, stable := before, time.Now()
	for time.Since(stable) < 2*time.Second && time.Since(start) < 30*time.Second {
		time.Sleep(250 * time.Millisecond)
		n, err := memoryCgroups("/proc/cgroups")
		if err != nil {
			fmt.Fprintf(w, "compare: %s: %v\n", agent, err)
			return
		}
		if n != after {
			after, stable = n, time.Now()
		}
	}
	fmt.Fprintf(w, "compare: %s: caches dropped, memory cgroups %d → %d in %.1f s\n", agent, before, after, time.Since(start).Seconds())
}

// Quiet is a machine whose CPUs are less than quietBusy busy in each of
// quietSamples samples of quietSample.
const (
	quietBusy    = 0.15
	quietSample  = 500 * time.Millisecond
	quietSamples = 4
	quietMax     = time.Minute
)

// waitQuiet waits, at most quietMax, until the machine is quiet, before
// each burst of every agent: the kernel tears down the network namespaces
// of deleted pods in the background (and containerd collects its
// garbage), which takes CPU from whatever runs next for seconds after a
// burst of deletions.
func waitQuiet(w io.Writer, agent string) {
	start := time.Now()
	quiet := 0
	var busy float64
	b0, t0, _ := machineCPUms()
	for quiet < quietSamples && time.Since(start) < quietMax {
		time.Sleep(quietSample)
		b1, t1, _ := machineCPUms()
		if t1 > t0 {
			busy = (b1 - b0) / (t1 - t0)
		}
		b0, t0 = b1, t1
		if busy < quietBusy {
			quiet++
		} else {
			quiet = 0
		}
	}
	state := "quiet"
	if quiet < quietSamples {
		state = "still busy"
	}
	fmt.Fprintf(w, "compare: %s: machine %s after %.1f s (CPUs %.0f %% busy)\n", agent, state, time.Since(start).Seconds(), 100*busy)
}

// memoryCgroups reads the number of memory cgroups, deleted ones still held
// by the kernel included, from a /proc/cgroups table.
func memoryCgroups(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return parseMemoryCgroups(f)
}

// parseMemoryCgroups reads the num_cgroups column of the memory row of a
// /proc/cgroups table ("subsys_name hierarchy num_cgroups enabled").
func parseMemoryCgroups(r io.Reader) (int, error) {
	s := bufio.NewScanner(r)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 3 || fields[0] != "memory" {
			continue
		}
		n, err := strconv.Atoi(fields[2])
		if err != nil {
			return 0, fmt.Errorf("/proc/cgroups: memory count %q: %w", fields[2], err)
		}
		return n, nil
	}
	if err := s.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("/proc/cgroups: no memory controller")
}
