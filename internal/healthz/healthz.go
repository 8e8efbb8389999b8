// Package healthz holds heartlet's health checks that are not owned by a
// component: the log check and the sync loop check, as upstream's
// /healthz/log and /healthz/syncloop.
package healthz

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

const (
	// logFlushPeriod is how often the log check flushes the log.
	logFlushPeriod = time.Minute
	// logThreshold is how old the last completed flush may be.
	logThreshold = 2 * time.Minute
	// minSyncLoopThreshold is the least time the sync loop may go without
	// an iteration before the check fails; it is twice the sync frequency
	// when that is longer, as upstream.
	minSyncLoopThreshold = 5 * time.Minute
)

// Log fails when flushing the log has not completed for two minutes, as
// upstream's log check: a blocked log blocks everything that logs.
type Log struct {
	clk   clock.WithTicker
	flush func()

	mu   sync.Mutex
	last time.Time
}

// NewLog returns a log check that counts its start as a flush.
func NewLog(clk clock.WithTicker) *Log {
	return &Log{clk: clk, flush: klog.Flush, last: clk.Now()}
}

// Run flushes the log every minute until ctx is done.
func (l *Log) Run(ctx context.Context) error {
	t := l.clk.NewTicker(logFlushPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
			l.flushOnce()
		}
	}
}

// flushOnce flushes the log and records when that completed.
func (l *Log) flushOnce() {
	l.flush()
	now := l.clk.Now()
	l.mu.Lock()
	l.last = now
	l.mu.Unlock()
}

// Check returns an error when the last flush completed more than two
// minutes ago.
func (l *Log) Check() error {
	l.mu.Lock()
	last := l.last
	l.mu.Unlock()
	if since := l.clk.Since(last); since >= logThreshold {
		return fmt.Errorf("logging blocked: last flush completed %v ago", since.Round(time.Second))
	}
	return nil
}

// SyncLoop fails when the sync loop has not started an iteration for
// longer than twice the sync frequency, and at least five minutes, as
// upstream. Before the first iteration it passes.
type SyncLoop struct {
	clk       clock.PassiveClock
	threshold time.Duration

	mu   sync.Mutex
	last time.Time
}

// NewSyncLoop returns the check for a loop that syncs pods every
// syncFrequency.
func NewSyncLoop(clk clock.PassiveClock, syncFrequency time.Duration) *SyncLoop {
	return &SyncLoop{clk: clk, threshold: max(2*syncFrequency, minSyncLoopThreshold)}
}

// Enter records the start of an iteration of the loop.
func (s *SyncLoop) Enter() {
	now := s.clk.Now()
	s.mu.Lock()
	s.last = now
	s.mu.Unlock()
}

// Check returns an error when the last iteration started longer ago than
// the threshold.
func (s *SyncLoop) Check() error {
	s.mu.Lock()
	last := s.last
	s.mu.Unlock()
	if last.IsZero() {
		return nil
	}
	if since := s.clk.Since(last); since > s.threshold {
		return fmt.Errorf("%w: last iteration started %v ago, threshold is %v", errSyncLoop, since.Round(time.Second), s.threshold)
	}
	return nil
}

var errSyncLoop = errors.New("sync loop took longer than expected")
