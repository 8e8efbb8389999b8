//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// heartlet's own log: --logging-format=json writes one JSON object per
// line (component-base's format: ts, v, msg and the key/value pairs), and
// --log-file sends it to a file instead of standard error.
func TestOwnLogJSONToFile(t *testing.T) {
	h := newHeartlet(t, "")
	t.Cleanup(h.cleanup)
	logFile := filepath.Join(t.TempDir(), "logs", "heartlet.log")
	h.run("standalone",
		"--config", h.configPath,
		"--root-dir", h.rootDir,
		"--pod-manifest-path", h.manifestDir,
		"--container-runtime-endpoint", criEndpoint,
		"--hostname-override", nodeName,
		"--anonymous-auth=true", "--authentication-token-webhook=false", "--authorization-mode=AlwaysAllow",
		"--logging-format=json", "--log-file", logFile, "--v", "2",
	)
	h.stop()

	data, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatalf("read --log-file: %v", err)
	}
	var sawStart bool
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	lines := 0
	for sc.Scan() {
		lines++
		var entry map[string]any
		if err := json.Unmarshal(sc.Bytes(), &entry); err != nil {
			t.Fatalf("line %d is not JSON: %v: %s", lines, err, sc.Text())
		}
		for _, k := range []string{"ts", "msg"} {
			if _, ok := entry[k]; !ok {
				t.Fatalf("line %d lacks %q: %s", lines, k, sc.Text())
			}
		}
		if entry["msg"] == "Starting heartlet" && entry["node"] == nodeName {
			sawStart = true
		}
	}
	if !sawStart {
		t.Errorf("no \"Starting heartlet\" entry with the node name among %d lines", lines)
	}
	// Standard error (the test's log of the process) got none of it.
	if h.logContains(`"Starting heartlet"`) || strings.Contains(string(mustRead(t, h.logPath)), `"msg":`) {
		t.Error("log entries also went to standard error")
	}
}
