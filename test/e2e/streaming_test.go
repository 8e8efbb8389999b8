//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
)

// TestClusterStreaming drives exec, attach and port-forward with kubectl
// through the API server, which reaches heartlet's kubelet API with its
// kubelet-client identity, and exec, attach and run directly against the
// kubelet API over WebSocket and SPDY with that identity's certificate.
func TestClusterStreaming(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{})

	createPod(t, apiPod("stream", func(p *v1.Pod) {
		// talk prints a tick a second and echoes what it reads on stdin;
		// "quit" ends it.
		talk := shContainer("talk", `i=0; (while true; do i=$((i+1)); echo tick-$i; sleep 1; done) &
while read line; do echo "got: $line"; [ "$line" = quit ] && exit 0; done; sleep 3600`)
		talk.Stdin = true
		web := v1.Container{Name: "web", Image: testserverImage, ImagePullPolicy: v1.PullIfNotPresent,
			Command: []string{"/testserver", "serve", "-http-port", "8089"}}
		p.Spec.Containers = []v1.Container{shContainer("main", sleeper), talk, web}
	}))
	waitAPIPodRunning(t, h, "stream")

	t.Run("exec", func(t *testing.T) { testKubectlExec(t) })
	t.Run("exec-tty", func(t *testing.T) { testKubectlExecTTY(t) })
	t.Run("port-forward", func(t *testing.T) { testKubectlPortForward(t) })
	t.Run("kubelet-direct", func(t *testing.T) { testKubeletStreamingDirect(t, h) })
	// Last: quitting ends the talk container.
	t.Run("attach", func(t *testing.T) { testKubectlAttach(t) })

	// Which protocol reached the kubelet from kubectl: the API server
	// translates kubectl's WebSocket to SPDY unless the node declares
	// ExtendWebSocketsToKubelet.
	if data, err := os.ReadFile(h.logPath); err == nil {
		seen := map[string]bool{}
		for _, m := range regexp.MustCompile(`"Streaming request".*?verb="(\w+)" protocol="([^"]+)"`).FindAllStringSubmatch(string(data), -1) {
			seen[m[1]+" over "+m[2]] = true
		}
		t.Logf("streaming requests seen by the kubelet API: %v", seen)
	}
}

// exitCode is the exit status of a failed kubectl run, -1 if it did not
// exit with one.
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

func testKubectlExec(t *testing.T) {
	execArgs := func(container string, cmd ...string) []string {
		return append([]string{"exec", "-n", "default", "stream", "-c", container, "--"}, cmd...)
	}
	if out, err := kubectl(execArgs("main", "sh", "-c", "echo out-$((6*7)); echo err-1 >&2")...); err != nil || out != "out-42\n" {
		t.Errorf("kubectl exec stdout = %q, %v; want %q", out, err, "out-42\n")
	}
	_, err := kubectl(execArgs("main", "sh", "-c", "exit 3")...)
	if got := exitCode(err); got != 3 {
		t.Errorf("kubectl exec of 'exit 3': exit status %d (%v), want 3", got, err)
	}
	out, err := kubectlIn([]byte("line one\nline two\n"), append([]string{"exec", "-i", "-n", "default", "stream", "-c", "main", "--"}, "cat")...)
	if err != nil || out != "line one\nline two\n" {
		t.Errorf("kubectl exec -i cat = %q, %v; want the piped input back", out, err)
	}
	if out, err := kubectl(execArgs("nope", "true")...); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("kubectl exec into an unknown container = %q, %v; want an error naming it", out, err)
	}
	logKubectlProtocol(t, kubectlTimeout, execArgs("main", "true")...)
}

// logKubectlProtocol runs kubectl -v=8 for at most d and logs the
// protocol it upgraded to with the API server (and any fallback from
// WebSocket to SPDY).
func logKubectlProtocol(t *testing.T, d time.Duration, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kubectl", append([]string{"--kubeconfig", adminKubeconfig, "-v=8"}, args...)...)
	cmd.WaitDelay = 5 * time.Second
	out, _ := cmd.CombinedOutput()
	var seen []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "Response Status") || strings.Contains(strings.ToLower(l), "fallback") ||
			strings.Contains(l, "Sec-Websocket-Protocol:") || strings.Contains(l, "X-Stream-Protocol-Version:") {
			seen = append(seen, strings.TrimSpace(l))
		}
	}
	t.Logf("kubectl %s with the API server:\n%s", args[0], strings.Join(seen, "\n"))
}

// testKubectlExecTTY runs kubectl exec -it under script(1), which gives it
// a terminal as stdin, and checks the command runs on a terminal.
func testKubectlExecTTY(t *testing.T) {
	kc := fmt.Sprintf("kubectl --kubeconfig %s exec -it -n default stream -c main -- sh -c 'tty; test -t 0 && echo stdin-is-a-tty; exit 0'", adminKubeconfig)
	ctx, cancel := context.WithTimeout(context.Background(), kubectlTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "script", "-qec", kc, "/dev/null")
	cmd.WaitDelay = 5 * time.Second
	// An open, silent stdin (closed by Wait): kubectl reads the terminal
	// script made.
	if _, err := cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("script -c kubectl exec -it: %v: %q", err, out.String())
	}
	got := strings.ReplaceAll(out.String(), "\r", "")
	if !regexp.MustCompile(`(?m)^/dev/pts/\d+$`).MatchString(got) || !strings.Contains(got, "stdin-is-a-tty\n") {
		t.Errorf("kubectl exec -it output = %q, want a /dev/pts/N terminal and stdin-is-a-tty", got)
	}
}

func testKubectlAttach(t *testing.T) {
	// Without -i: the container's output.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	attach := exec.CommandContext(ctx, "kubectl", "--kubeconfig", adminKubeconfig, "attach", "-n", "default", "stream", "-c", "talk")
	attach.WaitDelay = 5 * time.Second
	out, _ := attach.Output() // killed by the timeout
	if !regexp.MustCompile(`tick-\d+\n`).Match(out) {
		t.Errorf("kubectl attach for 4 s = %q, want ticks", out)
	}

	// With -i: what we type reaches the process; quit ends it and the
	// session. stdin stays open until the answer arrives: containerd ends
	// an attach session once its stdin reaches EOF (the container has
	// stdin but not stdinOnce).
	ctx, cancel = context.WithTimeout(context.Background(), kubectlTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kubectl", "--kubeconfig", adminKubeconfig, "attach", "-i", "-n", "default", "stream", "-c", "talk")
	cmd.WaitDelay = 5 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	await := func(want string) {
		t.Helper()
		timeout := time.After(20 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("kubectl attach -i ended before %q: %s", want, stderr.String())
				}
				if l == want {
					return
				}
			case <-timeout:
				t.Fatalf("kubectl attach -i: no %q after 20 s: %s", want, stderr.String())
			}
		}
	}
	if _, err := io.WriteString(stdin, "hello\n"); err != nil {
		t.Fatal(err)
	}
	await("got: hello")
	if _, err := io.WriteString(stdin, "quit\n"); err != nil {
		t.Fatal(err)
	}
	await("got: quit")
	for range lines { // the session ends with the container
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("kubectl attach -i after the container exited: %v: %s", err, stderr.String())
	}
}

func testKubectlPortForward(t *testing.T) {
	local := freePort(t)
	ctx, cancel := context.WithTimeout(context.Background(), kubectlTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kubectl", "--kubeconfig", adminKubeconfig, "port-forward", "-n", "default",
		"pod/stream", fmt.Sprintf("%d:8089", local))
	cmd.WaitDelay = 5 * time.Second
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		_ = cmd.Wait()
	}()
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "Forwarding from 127.0.0.1:") {
				ready <- sc.Text()
			}
		}
		close(ready)
	}()
	select {
	case line, ok := <-ready:
		if !ok {
			t.Fatalf("kubectl port-forward ended without forwarding: %s", stderr.String())
		}
		t.Logf("kubectl: %s", line)
	case <-time.After(30 * time.Second):
		t.Fatalf("kubectl port-forward not ready after 30 s: %s", stderr.String())
	}
	c := &http.Client{Timeout: 10 * time.Second}
	defer logKubectlProtocol(t, 5*time.Second, "port-forward", "-n", "default", "pod/stream", fmt.Sprintf("%d:8089", freePort(t)), "--address", "127.0.0.1", "--pod-running-timeout", "5s")
	for i := range 3 { // several connections over the one session
		resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/hostname", local))
		if err != nil {
			t.Fatalf("GET %d through the port-forward: %v (kubectl: %s)", i, err, stderr.String())
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "stream" {
			t.Errorf("GET /hostname through the port-forward = %d %q, want 200 \"stream\"", resp.StatusCode, body)
		}
	}
}

// kubeletClientConfig is a client of heartlet's kubelet API with the API
// server's kubelet-client certificate.
func kubeletClientConfig(t *testing.T, h *heartlet) (*rest.Config, string) {
	t.Helper()
	node, err := getNode()
	if err != nil {
		t.Fatal(err)
	}
	var ip string
	for _, a := range node.Status.Addresses {
		if a.Type == v1.NodeInternalIP {
			ip = a.Address
		}
	}
	if ip == "" {
		t.Fatalf("node has no InternalIP: %v", node.Status.Addresses)
	}
	pki := filepath.Dir(clusterCAFile())
	base := "https://" + net.JoinHostPort(ip, strconv.Itoa(h.apiPort))
	return &rest.Config{Host: base, TLSClientConfig: rest.TLSClientConfig{
		Insecure: true, // the serving certificate is self-signed
		CertFile: filepath.Join(pki, "apiserver-kubelet-client.crt"),
		KeyFile:  filepath.Join(pki, "apiserver-kubelet-client.key"),
	}}, base
}

// testKubeletStreamingDirect talks to the kubelet API as the API server
// would without translating: WebSocket v5 (which heartlet translates to
// the runtime's SPDY), SPDY, and /run.
func testKubeletStreamingDirect(t *testing.T, h *heartlet) {
	cfg, base := kubeletClientConfig(t, h)
	// The kubelet's parameter names, as the API server sends them.
	execURL := base + "/exec/default/stream/main?" + url.Values{
		"command": {"sh", "-c", "read x; echo got-$x; echo to-stderr >&2; exit 5"},
		"input":   {"1"}, "output": {"1"}, "error": {"1"},
	}.Encode()
	for _, tc := range []struct {
		name string
		new  func() (remotecommand.Executor, error)
	}{
		{"websocket", func() (remotecommand.Executor, error) { return remotecommand.NewWebSocketExecutor(cfg, "GET", execURL) }},
		{"spdy", func() (remotecommand.Executor, error) {
			u, err := url.Parse(execURL)
			if err != nil {
				return nil, err
			}
			return remotecommand.NewSPDYExecutor(cfg, "POST", u)
		}},
	} {
		t.Run("exec-"+tc.name, func(t *testing.T) {
			e, err := tc.new()
			if err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err = e.StreamWithContext(ctx, remotecommand.StreamOptions{
				Stdin: strings.NewReader("ping\n"), Stdout: &stdout, Stderr: &stderr})
			var ce utilexec.CodeExitError
			if !errors.As(err, &ce) || ce.Code != 5 {
				t.Errorf("exec error = %v, want exit code 5", err)
			}
			if stdout.String() != "got-ping\n" || stderr.String() != "to-stderr\n" {
				t.Errorf("stdout %q stderr %q, want %q and %q", stdout.String(), stderr.String(), "got-ping\n", "to-stderr\n")
			}
		})
	}

	t.Run("exec-websocket-tty", func(t *testing.T) {
		e, err := remotecommand.NewWebSocketExecutor(cfg, "GET", base+"/exec/default/stream/main?command=tty&input=1&output=1&tty=1")
		if err != nil {
			t.Fatal(err)
		}
		var stdout bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		pr, pw := io.Pipe()
		defer pw.Close()
		if err := e.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: pr, Stdout: &stdout, Tty: true}); err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile(`^/dev/pts/\d+\r?\n$`).MatchString(stdout.String()) {
			t.Errorf("tty over WebSocket = %q, want /dev/pts/N", stdout.String())
		}
	})

	// kubectl's WebSocket port-forward protocol (SPDY tunneled in
	// WebSocket), which heartlet unwraps for the runtime's SPDY server.
	t.Run("port-forward-websocket", func(t *testing.T) {
		u, err := url.Parse(base + "/portForward/default/stream")
		if err != nil {
			t.Fatal(err)
		}
		dialer, err := portforward.NewSPDYOverWebsocketDialer(u, cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		local := freePort(t)
		ready := make(chan struct{})
		var out, errOut bytes.Buffer
		pf, err := portforward.NewOnAddressesWithContext(ctx, dialer, []string{"127.0.0.1"}, []string{fmt.Sprintf("%d:8089", local)}, ready, &out, &errOut)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- pf.ForwardPorts() }()
		select {
		case <-ready:
		case err := <-done:
			t.Fatalf("port forward over WebSocket ended: %v (%s)", err, errOut.String())
		}
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(fmt.Sprintf("http://127.0.0.1:%d/hostname", local))
		if err != nil {
			t.Fatalf("GET through the WebSocket port forward: %v (%s)", err, errOut.String())
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.TrimSpace(string(body)) != "stream" {
			t.Errorf("GET /hostname through the WebSocket port forward = %q, want \"stream\"", body)
		}
		cancel()
		<-done
	})

	t.Run("run", func(t *testing.T) {
		c, err := rest.HTTPClientFor(cfg)
		if err != nil {
			t.Fatal(err)
		}
		post := func(path string) (int, string) {
			t.Helper()
			resp, err := c.Post(base+path, "", nil)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		if code, body := post("/run/default/stream/main?cmd=echo+run-ok"); code != http.StatusOK || body != "run-ok\n" {
			t.Errorf("/run echo = %d %q, want 200 \"run-ok\\n\"", code, body)
		}
		if code, body := post("/run/default/stream/main?cmd=false"); code != http.StatusInternalServerError || !strings.Contains(body, "exited with 1") {
			t.Errorf("/run false = %d %q, want 500 naming exit code 1", code, body)
		}
		if code, body := post("/run/default/nope/main?cmd=true"); code != http.StatusNotFound {
			t.Errorf("/run in an unknown pod = %d %q, want 404", code, body)
		}
	})
}
