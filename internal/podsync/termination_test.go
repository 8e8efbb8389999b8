package podsync

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/heartlet/heartlet/internal/podworker"
	"github.com/heartlet/heartlet/internal/runtime"
	"github.com/heartlet/heartlet/internal/runtime/fakecri"
)

// termMount returns the termination message mount of a fake container.
func termMount(t *testing.T, c fakecri.Container, containerPath string) *runtimeapi.Mount {
	t.Helper()
	for _, m := range c.Config.GetMounts() {
		if m.GetContainerPath() == containerPath {
			return m
		}
	}
	t.Fatalf("container %s has no mount at %s; mounts %v", c.ID, containerPath, c.Config.GetMounts())
	return nil
}

func TestTerminationMessageFile(t *testing.T) {
	h, _ := lifecycleHarness(t)
	pod := hookPod(v1.RestartPolicyAlways, 30, nil)
	pod.Spec.Containers[0].TerminationMessagePath = "/var/run/msg"
	h.sync(pod)
	first := h.running("app")
	m := termMount(t, first, "/var/run/msg")
	// Upstream: <root-dir>/pods/<uid>/containers/<name>/<8 hex digits>.
	dir := filepath.Join(h.syncer.opts.RootDir, "pods", string(pod.UID), "containers", "app")
	if filepath.Dir(m.HostPath) != dir || !regexp.MustCompile(`^[0-9a-f]{8}$`).MatchString(filepath.Base(m.HostPath)) {
		t.Errorf("host path %s, want %s/<8 hex digits>", m.HostPath, dir)
	}
	fi, err := os.Stat(m.HostPath)
	if err != nil {
		t.Fatalf("termination message file: %v", err)
	}
	if fi.Mode().Perm() != 0o666 || fi.Size() != 0 {
		t.Errorf("file mode %v size %d, want an empty 0666 file", fi.Mode().Perm(), fi.Size())
	}

	// The container writes its message and fails: it is the state's
	// message, then the last state's once it restarted.
	if err := os.WriteFile(m.HostPath, []byte("first attempt failed"), 0o666); err != nil {
		t.Fatal(err)
	}
	h.fake.SetExit(first.ID, 1, "Error")
	if _, err := h.syncer.SyncPod(h.ctx, podworker.UpdateSync, pod); err != nil {
		t.Fatalf("SyncPod: %v", err)
	}
	second := h.running("app")
	m2 := termMount(t, second, "/var/run/msg")
	if m2.HostPath == m.HostPath {
		t.Error("the second attempt shares the first attempt's termination message file")
	}
	st, _ := h.status.GetPodStatus(pod.UID)
	last := findStatus(st, "app").LastTerminationState.Terminated
	if last == nil || last.Message != "first attempt failed" || last.Reason != "Error" {
		t.Fatalf("lastState.terminated = %+v, want message %q", last, "first attempt failed")
	}

	// A fresh syncer (a restart of heartlet) finds the message again
	// through the runtime's mounts.
	fresh := New(h.syncer.opts, h.syncer.rt, nil, h.status)
	if err := os.WriteFile(m2.HostPath, []byte("second"), 0o666); err != nil {
		t.Fatal(err)
	}
	h.fake.SetExit(second.ID, 0, "Completed")
	fresh.reportStatus(h.ctx, pod, nil, false, nil)
	st, _ = h.status.GetPodStatus(pod.UID)
	cs := findStatus(st, "app")
	if term := cs.State.Terminated; term == nil || term.Message != "second" {
		t.Errorf("state = %+v, want terminated with message %q", cs.State, "second")
	}

	// Removing the pod removes its files.
	if err := h.syncer.SyncTerminatingPod(h.ctx, pod, 1); err != nil {
		t.Fatal(err)
	}
	if err := h.syncer.RemovePod(h.ctx, pod.UID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(h.syncer.opts.RootDir, "pods", string(pod.UID))); !os.IsNotExist(err) {
		t.Errorf("pod directory still there after RemovePod: %v", err)
	}
}

// writeCRILog writes lines in the CRI log format.
func writeCRILog(t *testing.T, path string, lines ...string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestTerminationMessageFallbackToLogs(t *testing.T) {
	tests := []struct {
		name     string
		exitCode int32
		file     string
		log      []string
		want     string
	}{
		{
			// Upstream e2e runtime.go: "DONE" from the log of a failed
			// container whose message file is empty.
			name:     "failed with empty file uses the log",
			exitCode: 1,
			log:      []string{"2026-01-01T00:00:00.000000000Z stdout P DONE"},
			want:     "DONE",
		},
		{
			name:     "succeeded: no fallback",
			exitCode: 0,
			log:      []string{"2026-01-01T00:00:00.000000000Z stdout F DONE"},
			want:     "",
		},
		{
			name:     "the file wins over the log",
			exitCode: 1,
			file:     "OK",
			log:      []string{"2026-01-01T00:00:00.000000000Z stdout F DONE"},
			want:     "OK",
		},
		{
			name:     "both streams, full and partial lines",
			exitCode: 2,
			log: []string{
				"2026-01-01T00:00:00.000000000Z stdout F one",
				"2026-01-01T00:00:00.000000001Z stderr P tw",
				"2026-01-01T00:00:00.000000002Z stderr F o",
				"not a CRI line",
				"2026-01-01T00:00:00.000000003Z stdout F three",
			},
			want: "one\ntwo\nthree\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, _ := lifecycleHarness(t)
			pod := hookPod(v1.RestartPolicyNever, 30, nil)
			pod.Spec.Containers[0].TerminationMessagePolicy = v1.TerminationMessageFallbackToLogsOnError
			h.sync(pod)
			c := h.running("app")
			if tt.file != "" {
				if err := os.WriteFile(termMount(t, c, v1.TerminationMessagePathDefault).HostPath, []byte(tt.file), 0o666); err != nil {
					t.Fatal(err)
				}
			}
			writeCRILog(t, c.LogPath, tt.log...)
			h.fake.SetExit(c.ID, tt.exitCode, "")
			h.sync(pod)
			st, _ := h.status.GetPodStatus(pod.UID)
			term := findStatus(st, "app").State.Terminated
			if term == nil || term.Message != tt.want {
				t.Errorf("state = %+v, want terminated with message %q", findStatus(st, "app").State, tt.want)
			}
		})
	}
}

func TestTailCRILogLimits(t *testing.T) {
	dir := t.TempDir()
	var lines []string
	for i := 1; i <= 200; i++ {
		lines = append(lines, fmt.Sprintf("2026-01-01T00:00:00.000000000Z stdout F line %03d", i))
	}
	short := filepath.Join(dir, "short.log")
	writeCRILog(t, short, lines...)
	got, err := tailCRILog(short, maxTerminationLogLines, maxTerminationLogBytes)
	if err != nil {
		t.Fatal(err)
	}
	// Upstream: the last 80 lines (MaxContainerTerminationMessageLogLines).
	var want strings.Builder
	for i := 121; i <= 200; i++ {
		fmt.Fprintf(&want, "line %03d\n", i)
	}
	if got != want.String() {
		t.Errorf("tail of 200 short lines:\n%q\nwant the last 80:\n%q", got, want.String())
	}

	// Long lines: the last 2 KiB of the last 80 lines
	// (MaxContainerTerminationMessageLogLength).
	lines = lines[:0]
	for i := 1; i <= 100; i++ {
		lines = append(lines, fmt.Sprintf("2026-01-01T00:00:00.000000000Z stderr F %03d%s", i, strings.Repeat("x", 97)))
	}
	long := filepath.Join(dir, "long.log")
	writeCRILog(t, long, lines...)
	got, err = tailCRILog(long, maxTerminationLogLines, maxTerminationLogBytes)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != maxTerminationLogBytes || !strings.HasSuffix(got, "100"+strings.Repeat("x", 97)+"\n") {
		t.Errorf("tail of long lines: %d bytes ending %q, want 2048 ending with line 100", len(got), got[max(0, len(got)-20):])
	}

	if _, err := tailCRILog(filepath.Join(dir, "missing.log"), 80, 2048); err == nil {
		t.Error("tail of a missing log succeeded")
	}
}

// fillTerminationMessages works on the runtime's records alone: mounts,
// annotations, exit code, runtime reason and message.
func TestFillTerminationMessages(t *testing.T) {
	dir := t.TempDir()
	n := 0
	// file writes a termination message file of container c1 of pod uid1
	// as terminationMessageMount names it.
	file := func(content string) string {
		n++
		cdir := podContainerDir(dir, "uid1", "c1")
		if err := os.MkdirAll(cdir, 0o750); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(cdir, fmt.Sprintf("%08x", n))
		if err := os.WriteFile(p, []byte(content), 0o666); err != nil {
			t.Fatal(err)
		}
		return p
	}
	rec := func(id, path, policy string, exit int32, reason, msg, hostPath string) *runtime.ContainerStatus {
		r := &runtime.ContainerStatus{
			ID: id, Name: id, State: runtime.ContainerExited, ExitCode: exit, Reason: reason, Message: msg,
			LogPath: filepath.Join(dir, "no-such.log"),
			Annotations: map[string]string{
				runtime.AnnotationTermPath: path,
				runtime.AnnotationTermPol:  policy,
			},
		}
		if hostPath != "" {
			r.Mounts = []runtime.Mount{{HostPath: hostPath, ContainerPath: "/dev/termination-log"}}
		}
		return r
	}
	big := strings.Repeat("a", 1000) + strings.Repeat("b", 4096)
	tests := []struct {
		name       string
		containers int
		rec        *runtime.ContainerStatus
		want       string
	}{
		{name: "file", containers: 1, rec: rec("c1", "/dev/termination-log", "File", 0, "Completed", "", file("bye")), want: "bye"},
		{name: "relative path is made absolute", containers: 1, rec: rec("c1", "dev/termination-log", "File", 0, "Completed", "", file("rel")), want: "rel"},
		// Upstream getTerminationMessage: the last 4 KiB of the file.
		{name: "file over 4 KiB keeps its end", containers: 1, rec: rec("c1", "/dev/termination-log", "File", 1, "Error", "", file(big)), want: strings.Repeat("b", 4096)},
		// Upstream convertToKubeContainerStatus: "<runtime message>: <file>".
		{name: "runtime message first", containers: 1, rec: rec("c1", "/dev/termination-log", "File", 137, "OOMKilled", "out of memory", file("oom")), want: "out of memory: oom"},
		{name: "runtime message alone", containers: 1, rec: rec("c1", "/dev/termination-log", "File", 128, "StartError", "exec: \"nope\": executable file not found", file("")), want: "exec: \"nope\": executable file not found"},
		{name: "no mount", containers: 1, rec: rec("c1", "/dev/termination-log", "File", 1, "Error", "", ""), want: ""},
		{name: "missing file", containers: 1, rec: rec("c1", "/dev/termination-log", "File", 1, "Error", "", filepath.Join(podContainerDir(dir, "uid1", "c1"), "0000abcd")), want: ""},
		// Under FallbackToLogsOnError a failed container with no file
		// reads its log; an unreadable log says so, as upstream.
		{name: "fallback with a missing log", containers: 1, rec: rec("c1", "/dev/termination-log", "FallbackToLogsOnError", 1, "Error", "", ""), want: "Error on reading termination message from logs: open " + filepath.Join(dir, "no-such.log") + ": no such file or directory"},
		// A container that could not run has no log to fall back to.
		{name: "no fallback for ContainerCannotRun", containers: 1, rec: rec("c1", "/dev/termination-log", "FallbackToLogsOnError", 128, "ContainerCannotRun", "", ""), want: ""},
		// Upstream normalizeStatus: 12 KiB shared by the pod's containers.
		{name: "pod limit shared by four containers", containers: 4, rec: rec("c1", "/dev/termination-log", "File", 1, "Error", "", file(strings.Repeat("z", 4096))), want: strings.Repeat("z", 3072)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(Options{RootDir: dir}, nil, nil, nil)
			pod := testPod(v1.RestartPolicyNever, nil)
			for i := 0; i < tt.containers; i++ {
				pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: fmt.Sprintf("c%d", i+1)})
			}
			rs := &runtime.PodStatus{UID: pod.UID, Containers: []*runtime.ContainerStatus{tt.rec}}
			s.fillTerminationMessages(t.Context(), pod, rs)
			if got := rs.Containers[0].Message; got != tt.want {
				t.Errorf("message = %q (%d bytes), want %q (%d bytes)", abbreviate(got), len(got), abbreviate(tt.want), len(tt.want))
			}
		})
	}
}

// Once read, an exited container's message is kept: it survives the
// removal of its file (the pod directory goes when the pod terminates).
func TestTerminationMessageKept(t *testing.T) {
	root := t.TempDir()
	p := filepath.Join(podContainerDir(root, "uid1", "app"), "0123abcd")
	if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("kept"), 0o666); err != nil {
		t.Fatal(err)
	}
	newRec := func() *runtime.ContainerStatus {
		return &runtime.ContainerStatus{
			ID: "c1", Name: "app", State: runtime.ContainerExited, ExitCode: 0,
			Annotations: map[string]string{runtime.AnnotationTermPath: "/dev/termination-log"},
			Mounts:      []runtime.Mount{{HostPath: p, ContainerPath: "/dev/termination-log"}},
		}
	}
	s := New(Options{RootDir: root}, nil, nil, nil)
	pod := testPod(v1.RestartPolicyNever, nil, "app")
	rs := &runtime.PodStatus{UID: pod.UID, Containers: []*runtime.ContainerStatus{newRec()}}
	s.fillTerminationMessages(t.Context(), pod, rs)
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	rs = &runtime.PodStatus{UID: pod.UID, Containers: []*runtime.ContainerStatus{newRec()}}
	s.fillTerminationMessages(t.Context(), pod, rs)
	if got := rs.Containers[0].Message; got != "kept" {
		t.Errorf("message after the file was removed = %q, want %q", got, "kept")
	}
	// A removed pod's messages are forgotten.
	s.forgetTerminationMessages(pod.UID)
	rs = &runtime.PodStatus{UID: pod.UID, Containers: []*runtime.ContainerStatus{newRec()}}
	s.fillTerminationMessages(t.Context(), pod, rs)
	if got := rs.Containers[0].Message; got != "" {
		t.Errorf("message after forgetting = %q, want none (the file is gone)", got)
	}
}

func abbreviate(s string) string {
	if len(s) > 60 {
		return s[:30] + "..." + s[len(s)-30:]
	}
	return s
}

// A message taken from the log is read again on every status: the runtime
// may still be writing the last output of the container just after its
// exit.
func TestTerminationMessageFromLogIsReread(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "0.log")
	writeCRILog(t, logPath, "2026-01-01T00:00:00.000000000Z stdout F first")
	rec := func() *runtime.ContainerStatus {
		return &runtime.ContainerStatus{
			ID: "c1", Name: "app", State: runtime.ContainerExited, ExitCode: 1, Reason: "Error", LogPath: logPath,
			Annotations: map[string]string{
				runtime.AnnotationTermPath: "/dev/termination-log",
				runtime.AnnotationTermPol:  string(v1.TerminationMessageFallbackToLogsOnError),
			},
		}
	}
	s := New(Options{}, nil, nil, nil)
	pod := testPod(v1.RestartPolicyNever, nil, "app")
	rs := &runtime.PodStatus{UID: pod.UID, Containers: []*runtime.ContainerStatus{rec()}}
	s.fillTerminationMessages(t.Context(), pod, rs)
	if got := rs.Containers[0].Message; got != "first\n" {
		t.Fatalf("message = %q, want %q", got, "first\n")
	}
	writeCRILog(t, logPath, "2026-01-01T00:00:00.000000000Z stdout F first", "2026-01-01T00:00:00.000000001Z stderr F late")
	rs = &runtime.PodStatus{UID: pod.UID, Containers: []*runtime.ContainerStatus{rec()}}
	s.fillTerminationMessages(t.Context(), pod, rs)
	if got := rs.Containers[0].Message; got != "first\nlate\n" {
		t.Errorf("message after the log grew = %q, want %q", got, "first\nlate\n")
	}
}

// The termination message is read only from the file heartlet created for
// the attempt, below <root>/pods/<uid>/containers/<name>/, without
// following a symbolic link or blocking on a FIFO: anything a pod could
// plant to make heartlet read a file of the node into its status yields no
// content of that file.
func TestReadTerminationFileRefusesPlantedFiles(t *testing.T) {
	const (
		uid    = "uid1"
		name   = "app"
		secret = "NODE-SECRET-0f3c"
		path   = "/dev/termination-log"
	)
	secretFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretFile, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	write := func(t *testing.T, p, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o666); err != nil {
			t.Fatal(err)
		}
	}
	link := func(t *testing.T, target, p string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	const own = "0000abcd"
	tests := []struct {
		name string
		// setup prepares root and returns the container's mounts.
		setup      func(t *testing.T, root, cdir string) []runtime.Mount
		want       string
		wantPrefix string
	}{
		{
			name: "own file",
			setup: func(t *testing.T, root, cdir string) []runtime.Mount {
				write(t, filepath.Join(cdir, own), "bye")
				return []runtime.Mount{{HostPath: filepath.Join(cdir, own), ContainerPath: path}}
			},
			want: "bye",
		},
		{
			name: "symlink in the file's place",
			setup: func(t *testing.T, root, cdir string) []runtime.Mount {
				link(t, secretFile, filepath.Join(cdir, own))
				return []runtime.Mount{{HostPath: filepath.Join(cdir, own), ContainerPath: path}}
			},
			wantPrefix: "Error on reading termination log",
		},
		{
			name: "symlink in the container directory's place",
			setup: func(t *testing.T, root, cdir string) []runtime.Mount {
				evil := t.TempDir()
				link(t, secretFile, filepath.Join(evil, own))
				link(t, evil, cdir)
				return []runtime.Mount{{HostPath: filepath.Join(cdir, own), ContainerPath: path}}
			},
			wantPrefix: "Error on reading termination log",
		},
		{
			name: "symlink in the pod directory's place",
			setup: func(t *testing.T, root, cdir string) []runtime.Mount {
				evil := t.TempDir()
				write(t, filepath.Join(evil, "containers", name, own), secret)
				link(t, evil, filepath.Join(root, "pods", uid))
				return []runtime.Mount{{HostPath: filepath.Join(cdir, own), ContainerPath: path}}
			},
			wantPrefix: "Error on reading termination log",
		},
		{
			name: "FIFO does not block",
			setup: func(t *testing.T, root, cdir string) []runtime.Mount {
				if err := os.MkdirAll(cdir, 0o750); err != nil {
					t.Fatal(err)
				}
				if err := unix.Mkfifo(filepath.Join(cdir, own), 0o666); err != nil {
					t.Fatal(err)
				}
				return []runtime.Mount{{HostPath: filepath.Join(cdir, own), ContainerPath: path}}
			},
			wantPrefix: "Error on reading termination log",
		},
		{
			name: "directory",
			setup: func(t *testing.T, root, cdir string) []runtime.Mount {
				write(t, filepath.Join(cdir, own, "x"), secret)
				return []runtime.Mount{{HostPath: filepath.Join(cdir, own), ContainerPath: path}}
			},
			wantPrefix: "Error on reading termination log",
		},
		{
			name: "path outside the container directory",
			setup: func(t *testing.T, root, cdir string) []runtime.Mount {
				return []runtime.Mount{{HostPath: secretFile, ContainerPath: path}}
			},
		},
		{
			name: "another container's file",
			setup: func(t *testing.T, root, cdir string) []runtime.Mount {
				p := filepath.Join(podContainerDir(root, uid, "other"), own)
				write(t, p, secret)
				return []runtime.Mount{{HostPath: p, ContainerPath: path}}
			},
		},
		{
			name: "a name heartlet does not give",
			setup: func(t *testing.T, root, cdir string) []runtime.Mount {
				p := filepath.Join(cdir, "secret")
				write(t, p, secret)
				return []runtime.Mount{{HostPath: p, ContainerPath: path}}
			},
		},
		{
			// The exploit: a volume's file (subPath) mounted at the path,
			// swapped for a link to a file of the node by another
			// container. heartlet's own file is the message.
			name: "volume host path before the own file",
			setup: func(t *testing.T, root, cdir string) []runtime.Mount {
				vol := filepath.Join(root, "pods", uid, "volumes", "kubernetes.io~empty-dir", "shared", "msg")
				link(t, secretFile, vol)
				write(t, filepath.Join(cdir, own), "own")
				return []runtime.Mount{
					{HostPath: vol, ContainerPath: path},
					{HostPath: filepath.Join(cdir, own), ContainerPath: path},
				}
			},
			want: "own",
		},
		{
			name: "volume host path alone",
			setup: func(t *testing.T, root, cdir string) []runtime.Mount {
				vol := filepath.Join(root, "pods", uid, "volumes", "kubernetes.io~empty-dir", "shared", "msg")
				link(t, secretFile, vol)
				return []runtime.Mount{{HostPath: vol, ContainerPath: path}}
			},
		},
		{
			name: "oversize file keeps its last 4 KiB",
			setup: func(t *testing.T, root, cdir string) []runtime.Mount {
				write(t, filepath.Join(cdir, own), secret+strings.Repeat("a", 8<<10)+strings.Repeat("z", 4<<10))
				return []runtime.Mount{{HostPath: filepath.Join(cdir, own), ContainerPath: path}}
			},
			want: strings.Repeat("z", 4<<10),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			cdir := podContainerDir(root, uid, name)
			mounts := tt.setup(t, root, cdir)
			got, checkLogs := readTerminationFile(root, uid, name, mounts, path, false)
			if strings.Contains(got, secret) || strings.Contains(got, secret[:6]) {
				t.Fatalf("message %q holds the node's file", abbreviate(got))
			}
			if checkLogs {
				t.Error("checkLogs without fallback")
			}
			switch {
			case tt.wantPrefix != "":
				if !strings.HasPrefix(got, tt.wantPrefix) {
					t.Errorf("message = %q, want prefix %q", got, tt.wantPrefix)
				}
			case got != tt.want:
				t.Errorf("message = %q (%d bytes), want %q (%d bytes)", abbreviate(got), len(got), abbreviate(tt.want), len(tt.want))
			}
		})
	}
}
