package main

import (
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certutil "k8s.io/client-go/util/cert"

	"github.com/heartlet/heartlet/internal/journal"
	"github.com/heartlet/heartlet/internal/server"
)

var explainNow = time.Date(2026, 12, 4, 15, 0, 0, 0, time.UTC)

// journalServer serves one known pod, default/web, through the server's
// own handler; it remembers the last request.
func journalServer(t *testing.T, tlsServer bool) (*httptest.Server, *http.Request) {
	t.Helper()
	last := &http.Request{}
	mux := http.NewServeMux()
	mux.Handle(server.JournalPath, server.JournalHandler(func(ns, name string) (journal.PodJournal, bool) {
		if ns != "default" || name != "web" {
			return journal.PodJournal{}, false
		}
		return journal.PodJournal{Namespace: ns, Name: name, UID: "u-1", Now: explainNow, Entries: []journal.Entry{
			{Time: explainNow.Add(-2 * time.Minute), Kind: journal.KindAdmission, Message: "admitted"},
			{Time: explainNow.Add(-110 * time.Second), Kind: journal.KindImage, Container: "app", Message: `pull of "nope:1" failed: not found`,
				Reason: "ErrImagePull", Duration: 1500 * time.Millisecond, NextRetry: explainNow.Add(10 * time.Second)},
		}}, true
	}))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*last = *r.Clone(r.Context())
		if r.Header.Get("Authorization") == "Bearer forbidden" {
			http.Error(w, "Forbidden (user=x, verb=get, resource=nodes, subresource(s)=[proxy])", http.StatusForbidden)
			return
		}
		mux.ServeHTTP(w, r)
	})
	var ts *httptest.Server
	if tlsServer {
		ts = httptest.NewUnstartedServer(h)
		ts.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
		ts.StartTLS()
	} else {
		ts = httptest.NewServer(h)
	}
	t.Cleanup(ts.Close)
	return ts, last
}

func TestExplainCommand(t *testing.T) {
	ts, last := journalServer(t, false)
	token := writeFile(t, "token", "forbidden\n")
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout []string
		wantStderr string
	}{
		{"timeline", []string{"explain", "--server", ts.URL, "default/web"}, 0, []string{
			"Pod default/web (uid u-1), 2 entries, node time 2026-12-04T15:00:00Z\n",
			"      -2m0s  admission  admitted\n",
			`     -1m50s  image      [app] pull of "nope:1" failed: not found (ErrImagePull); took 1.5s; next retry in 10s` + "\n",
		}, ""},
		{"bare name is in default", []string{"explain", "--server=" + ts.URL, "web"}, 0, []string{"Pod default/web"}, ""},
		{"json", []string{"explain", "--server", ts.URL, "--output", "json", "default/web"}, 0, []string{`"uid": "u-1"`, `"kind": "image"`}, ""},
		{"unknown pod", []string{"explain", "--server", ts.URL, "default/db"}, 1, nil,
			`heartlet explain: heartlet at ` + ts.URL + ` does not know pod default/db: pod "db" not found in namespace "default" on this node`},
		{"forbidden", []string{"explain", "--server", ts.URL, "--token-file", token, "default/web"}, 1, nil, "pass credentials allowed nodes/proxy"},
		{"no pod", []string{"explain", "--server", ts.URL}, 1, nil, "want one pod as NAMESPACE/POD, got 0 arguments"},
		{"bad pod", []string{"explain", "--server", ts.URL, "a/b/c"}, 1, nil, `pod "a/b/c": want NAMESPACE/POD`},
		{"empty namespace", []string{"explain", "/web"}, 1, nil, `pod "/web": want NAMESPACE/POD`},
		{"bad server", []string{"explain", "--server", "ftp://x", "web"}, 1, nil, `--server "ftp://x": want http://host:port`},
		{"bad output", []string{"explain", "--output", "yaml", "web"}, 1, nil, `--output "yaml": want text or json`},
		{"bad flag", []string{"explain", "--bogus", "web"}, 1, nil, "unknown flag: --bogus"},
		{"key without certificate", []string{"explain", "--client-key", "k", "web"}, 1, nil, "--client-certificate and --client-key go together"},
		{"help", []string{"explain", "--help"}, 0, []string{"heartlet explain prints why a pod is (not) running", "--certificate-authority"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runCommand(t, tt.args...)
			if r.code != tt.wantCode {
				t.Errorf("exit code %d, want %d; stderr %q", r.code, tt.wantCode, r.stderr)
			}
			for _, want := range tt.wantStdout {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("stdout:\n%s\nwant it to contain %q", r.stdout, want)
				}
			}
			if !strings.Contains(r.stderr, tt.wantStderr) || (tt.wantStderr == "") != (r.stderr == "") {
				t.Errorf("stderr %q, want %q", r.stderr, tt.wantStderr)
			}
		})
	}
	if got := last.URL.Path; got != "/debug/pods/default/web/journal" {
		t.Errorf("last request path %q", got)
	}
}

// Names are path segments: a name cannot reach another path.
func TestExplainEscapesThePodName(t *testing.T) {
	ts, last := journalServer(t, false)
	r := runCommand(t, "explain", "--server", ts.URL, "default/..%2F..%2Fpods")
	if r.code != 1 {
		t.Fatalf("exit %d, want 1 (unknown pod)", r.code)
	}
	if last.URL.Path != "/debug/pods/default/..%2F..%2Fpods/journal" || !strings.Contains(r.stderr, `pod "..%2F..%2Fpods" not found`) {
		t.Errorf("request path %q, stderr %q, want the name as one segment", last.URL.Path, r.stderr)
	}
}

func TestExplainTLS(t *testing.T) {
	ts, last := journalServer(t, true)
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("admin", []net.IP{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cert, key := filepath.Join(dir, "admin.crt"), filepath.Join(dir, "admin.key")
	if err := os.WriteFile(cert, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Run("unknown authority", func(t *testing.T) {
		r := runCommand(t, "explain", "--server", ts.URL, "default/web")
		if r.code != 1 || !strings.Contains(r.stderr, "certificate") {
			t.Errorf("exit %d, stderr %q, want a certificate error", r.code, r.stderr)
		}
	})
	t.Run("verified with client certificate", func(t *testing.T) {
		r := runCommand(t, "explain", "--server", ts.URL, "--certificate-authority", ca, "--client-certificate", cert, "--client-key", key, "--output", "json", "default/web")
		if r.code != 0 {
			t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
		}
		var pj journal.PodJournal
		if err := json.Unmarshal([]byte(r.stdout), &pj); err != nil || pj.UID != "u-1" {
			t.Errorf("output %q: %v", r.stdout, err)
		}
		if last.TLS == nil || len(last.TLS.PeerCertificates) == 0 || last.TLS.PeerCertificates[0].Subject.CommonName == "" {
			t.Errorf("the server saw no client certificate")
		}
	})
	t.Run("insecure", func(t *testing.T) {
		if r := runCommand(t, "explain", "--server", ts.URL, "--insecure-skip-tls-verify", "default/web"); r.code != 0 {
			t.Errorf("exit %d, stderr %q", r.code, r.stderr)
		}
	})
	t.Run("bad CA file", func(t *testing.T) {
		r := runCommand(t, "explain", "--server", ts.URL, "--certificate-authority", key, "default/web")
		if r.code != 1 || !strings.Contains(r.stderr, "no PEM certificate") {
			t.Errorf("exit %d, stderr %q", r.code, r.stderr)
		}
	})
}

func TestExplainUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	r := runCommand(t, "explain", "--server", "http://"+addr, "default/web")
	if r.code != 1 || !strings.Contains(r.stderr, "read the journal from http://"+addr) {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
}
