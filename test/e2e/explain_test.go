//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	v1 "k8s.io/api/core/v1"
)

// explain runs heartlet explain with args and returns its output and exit
// code.
func explain(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := exec.Command(heartletBin, append([]string{"explain"}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return out.String(), errOut.String(), ee.ExitCode()
	}
	if err != nil {
		t.Fatalf("run heartlet explain: %v", err)
	}
	return out.String(), errOut.String(), 0
}

// TestExplain runs a pod whose container crashes and one whose image does
// not exist, and reads why from heartlet explain, through the read-only
// port and the kubelet API.
func TestExplain(t *testing.T) {
	h := startHeartlet(t)
	h.addPod(t, "ex-crash.yaml", "ex-crash", manifest(t, "ex-crash", func(p *v1.Pod) {
		p.Spec.Containers = []v1.Container{shContainer("app", "sleep 3600"), shContainer("crash", "echo bye; exit 3")}
	}))
	h.addPod(t, "ex-missing.yaml", "ex-missing", manifest(t, "ex-missing", func(p *v1.Pod) {
		c := shContainer("app", "sleep 3600")
		c.Image = "localhost:5000/does-not-exist:1.0"
		p.Spec.Containers = []v1.Container{c}
	}))
	ro := fmt.Sprintf("http://127.0.0.1:%d", h.roPort)

	crash := "default/" + staticPodName("ex-crash")
	var out string
	waitFor(t, podStartTimeout, "ex-crash's journal to show its crash-loop backoff", func() (bool, string) {
		var code int
		out, _, code = explain(t, "--server", ro, crash)
		return code == 0 && strings.Contains(out, "[crash] back-off restarting failed container (CrashLoopBackOff)"), out
	})
	t.Logf("heartlet explain %s:\n%s", crash, out)
	for _, want := range []string{
		"Pod " + crash + " (uid ",
		"admission  admitted\n",
		"container  pod sandbox started (attempt 0",
		"container  [app] container created (restart count 0)\n",
		"container  [app] container started\n",
		"container  [crash] container started\n",
		"next retry in ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("explain %s lacks %q", crash, want)
		}
	}

	missing := "default/" + staticPodName("ex-missing")
	waitFor(t, podStartTimeout, "ex-missing's journal to show the failed pull", func() (bool, string) {
		var code int
		out, _, code = explain(t, "--server", ro, missing)
		return code == 0 && strings.Contains(out, `image      [app] pull of "localhost:5000/does-not-exist:1.0" failed`) &&
			strings.Contains(out, "back-off pulling image"), out
	})
	t.Logf("heartlet explain %s:\n%s", missing, out)

	// The kubelet API serves the same journal (standalone: anyone may).
	api := fmt.Sprintf("https://127.0.0.1:%d", h.apiPort)
	if out, errOut, code := explain(t, "--server", api, "--insecure-skip-tls-verify", "--output", "json", missing); code != 0 || !strings.Contains(out, `"kind": "image"`) {
		t.Errorf("explain through the kubelet API: exit %d, stdout %s, stderr %s", code, out, errOut)
	}

	_, errOut, code := explain(t, "--server", ro, "default/nope")
	if code != 1 || !strings.Contains(errOut, "does not know pod default/nope") {
		t.Errorf("explain of an unknown pod: exit %d, stderr %q", code, errOut)
	}
}

// browser starts a headless chromium (Debian's package) and returns a
// context for chromedp actions in one tab.
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium is not installed (hack/setup.sh installs it): %v", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // the tests run as root
		chromedp.DisableGPU,
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(t.Context(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(cancel)
	// The first call starts the browser, for the life of ctx.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// TestNodePage loads the node page in a real browser: the pod and its
// containers are shown with their journal, and a pod added later appears
// without a reload.
func TestNodePage(t *testing.T) {
	h := startHeartlet(t)
	h.addPod(t, "np-web.yaml", "np-web", manifest(t, "np-web", func(p *v1.Pod) {
		p.Spec.Containers = []v1.Container{shContainer("app", "sleep 3600"), shContainer("helper", "sleep 3600")}
	}))
	h.waitRunning(t, "np-web")
	ctx := browser(t)
	url := fmt.Sprintf("http://127.0.0.1:%d/node", h.roPort)
	web := `section[data-pod="default/` + staticPodName("np-web") + `"]`

	// within runs one step with a timeout; the browser lives on.
	within := func(timeout time.Duration) context.Context {
		tctx, cancel := context.WithTimeout(ctx, timeout)
		t.Cleanup(cancel)
		return tctx
	}
	step := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	step("load the node page", chromedp.Do(within(time.Minute),
		chromedp.Navigate(url),
		chromedp.WaitVisible(chromedp.CSS(web)),
	))
	title, err := chromedp.Run(within(time.Minute), chromedp.Title())
	step("read the title", err)
	// A reload would lose this.
	_, err = chromedp.Run(within(time.Minute), chromedp.Evaluate[string](`window.loadedOnce = "yes"`))
	step("mark the page", err)
	// The containers run and have been started, as the journal says.
	step("wait for the containers", chromedp.Do(within(time.Minute),
		chromedp.WaitVisible(chromedp.CSS(web+` tr[data-container="app"] td.ok`)),
		chromedp.WaitVisible(chromedp.CSS(web+` tr[data-container="helper"] td.ok`)),
	))
	podText, err := chromedp.Run(within(time.Minute), chromedp.Text(chromedp.CSS(web)))
	step("read the pod's section", err)
	t.Logf("node page, pod np-web:\n%s", podText)
	if title != "heartlet: "+nodeName {
		t.Errorf("title %q", title)
	}
	for _, want := range []string{staticPodName("np-web"), "Running", "app", "helper", "running", "[app] container started", "[helper] container started"} {
		if !strings.Contains(podText, want) {
			t.Errorf("the pod's section lacks %q", want)
		}
	}

	// A new pod appears without a reload.
	h.addPod(t, "np-late.yaml", "np-late", manifest(t, "np-late", func(p *v1.Pod) {
		p.Spec.Containers = []v1.Container{shContainer("late", "sleep 3600")}
	}))
	late := `section[data-pod="default/` + staticPodName("np-late") + `"]`
	step("wait for the new pod on the page", chromedp.Do(within(podStartTimeout),
		chromedp.WaitVisible(chromedp.CSS(late+` tr[data-container="late"] td.ok`))))
	loaded, err := chromedp.Run(within(time.Minute), chromedp.Evaluate[string](`window.loadedOnce || "reloaded"`))
	step("read the mark", err)
	if loaded != "yes" {
		t.Errorf("the page was reloaded (%q); it should update itself", loaded)
	}
	updated, err := chromedp.Run(within(time.Minute), chromedp.Text(chromedp.ID("updated")))
	step("read the update line", err)
	if !strings.HasPrefix(updated, "Updated ") {
		t.Errorf("update line %q, want the time of the last update", updated)
	}
	lateText, err := chromedp.Run(within(time.Minute), chromedp.Text(chromedp.CSS(late)))
	step("read the new pod's section", err)
	t.Logf("node page, pod np-late:\n%s", lateText)

	// The kubelet API serves the same page (standalone: anyone may).
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := client.Get(fmt.Sprintf("https://127.0.0.1:%d/node", h.apiPort))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `data-pod="default/`+staticPodName("np-web")+`"`) {
		t.Errorf("GET /node on the kubelet API: %s\n%.500s", resp.Status, body)
	}
}

// TestClusterNodePageEvents loads the node page of a cluster-mode heartlet
// in a real browser: it shows the node's conditions from the Node object
// and the events heartlet recorded, including a pod's Warning events, as
// they happen and without a reload.
func TestClusterNodePageEvents(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{})
	ctx := browser(t)
	within := func(timeout time.Duration) context.Context {
		tctx, cancel := context.WithTimeout(ctx, timeout)
		t.Cleanup(cancel)
		return tctx
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/node", h.roPort)
	if err := chromedp.Do(within(time.Minute), chromedp.Navigate(url), chromedp.WaitVisible(chromedp.ID("conditions"))); err != nil {
		t.Fatalf("load the node page: %v", err)
	}
	// A pod that starts, and one whose container keeps failing.
	createPod(t, apiPod("npev-ok", nil))
	createPod(t, apiPod("npev-crash", func(p *v1.Pod) {
		p.Spec.Containers = []v1.Container{shContainer("crash", "exit 3")}
	}))
	waitAPIPodRunning(t, h, "npev-ok")
	want := []string{
		"Pod default/npev-ok", "Started", "Container started",
		"Pod default/npev-crash", "BackOff", "Back-off restarting failed container crash",
	}
	var text string
	deadline := time.Now().Add(podStartTimeout)
	for {
		var err error
		// The table is there once there are events; read it without waiting.
		text, err = chromedp.Run(within(time.Minute), chromedp.Evaluate[string](`document.getElementById("events")?.innerText || ""`))
		missing := ""
		for _, w := range want {
			if !strings.Contains(text, w) {
				missing = w
				break
			}
		}
		if err == nil && missing == "" {
			break
		}
		if time.Now().After(deadline) {
			body, _ := chromedp.Run(within(time.Minute), chromedp.Evaluate[string](`document.body.innerText`))
			t.Fatalf("the page's events lack %q (err %v):\n%s\nthe whole page:\n%s", missing, err, text, body)
		}
		time.Sleep(time.Second)
	}
	t.Logf("node page, events:\n%s", text)
	conditions, err := chromedp.Run(within(time.Minute), chromedp.Text(chromedp.ID("conditions")))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(conditions, "Ready") || !strings.Contains(conditions, "KubeletReady") {
		t.Errorf("the page's conditions lack Ready/KubeletReady:\n%s", conditions)
	}
	// The Warning is marked as bad.
	cls, err := chromedp.Run(within(time.Minute), chromedp.Evaluate[string](
		`[...document.querySelectorAll("#events tr")].filter(r => r.textContent.includes("BackOff"))[0].children[1].className`))
	if err != nil || cls != "bad" {
		t.Errorf("the BackOff event's type cell has class %q (err %v), want bad", cls, err)
	}
}
