package main

import (
	"bytes"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestFetch(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok-123" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte(`{"kind":"APIVersions"}`))
	}))
	defer srv.Close()
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(ca, pemBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	tok := filepath.Join(dir, "token")
	if err := os.WriteFile(tok, []byte("tok-123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")

	tests := []struct {
		name    string
		args    []string
		wantErr string
		want    string
	}{
		{name: "CA and token", args: []string{"-ca-file", ca, "-token-file", tok, srv.URL}, want: "APIVersions"},
		{name: "to a file", args: []string{"-ca-file", ca, "-token-file", tok, "-o", out, srv.URL}},
		{name: "no token is 401", args: []string{"-ca-file", ca, srv.URL}, wantErr: "401"},
		{name: "unknown CA", args: []string{"-token-file", tok, srv.URL}, wantErr: "certificate"},
		{name: "insecure", args: []string{"-insecure", "-token-file", tok, srv.URL}, want: "APIVersions"},
		{name: "no URL", args: []string{"-insecure"}, wantErr: "exactly one URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := fetch(tt.args, &buf)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(buf.String(), tt.want) {
				t.Errorf("body %q does not contain %q", buf.String(), tt.want)
			}
		})
	}
	b, err := os.ReadFile(out)
	if err != nil || !strings.Contains(string(b), "APIVersions") {
		t.Errorf("-o file: %q, %v", b, err)
	}
}

func TestHandler(t *testing.T) {
	s := &server{opts: serveOptions{readyAfter: time.Hour}, start: time.Now()}
	h := s.handler()
	get := func(path string) int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code
	}
	steps := []struct {
		path string
		want int
	}{
		{"/healthz", 200},
		{"/readyz", 500}, // ready only after an hour
		{"/set?healthz=fail", 200},
		{"/healthz", 500},
		{"/set?healthz=ok", 200},
		{"/healthz", 200},
		{"/status/418", 418},
		{"/status/abc", 400},
		{"/redirect?to=/healthz", 302},
	}
	for _, st := range steps {
		if got := get(st.path); got != st.want {
			t.Errorf("GET %s = %d, want %d", st.path, got, st.want)
		}
	}
}
