package main

import (
	"errors"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"
)

func TestRun(t *testing.T) {
	tests := []struct {
		name     string
		signals  []os.Signal
		wantReap int
	}{
		{name: "term", signals: []os.Signal{syscall.SIGTERM}},
		{name: "int", signals: []os.Signal{syscall.SIGINT}},
		{name: "children then term", signals: []os.Signal{syscall.SIGCHLD, syscall.SIGCHLD, syscall.SIGTERM}, wantReap: 2},
		{name: "term stops before later children", signals: []os.Signal{syscall.SIGCHLD, syscall.SIGINT, syscall.SIGCHLD}, wantReap: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sigs := make(chan os.Signal, len(tt.signals))
			for _, s := range tt.signals {
				sigs <- s
			}
			reaped := 0
			if code := run(sigs, func() { reaped++ }); code != 0 {
				t.Errorf("exit code = %d, want 0", code)
			}
			if reaped != tt.wantReap {
				t.Errorf("reaper called %d times, want %d", reaped, tt.wantReap)
			}
		})
	}
}

func TestReapCollectsExitedChild(t *testing.T) {
	truePath := "/bin/true"
	if _, err := os.Stat(truePath); err != nil {
		t.Skipf("%s not available: %v", truePath, err)
	}
	pid, err := syscall.ForkExec(truePath, []string{"true"}, &syscall.ProcAttr{})
	if err != nil {
		t.Fatalf("start %s: %v", truePath, err)
	}
	// A zombie still accepts signal 0; only a reaped child returns ESRCH.
	deadline := time.Now().Add(10 * time.Second)
	for {
		reap()
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("child %d was not reaped", pid)
		}
		runtime.Gosched()
	}
}
