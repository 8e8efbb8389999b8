package server

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/heartlet/heartlet/internal/journal"
)

func journalLookup(namespace, name string) (journal.PodJournal, bool) {
	if namespace != "ns" || name != "web" {
		return journal.PodJournal{}, false
	}
	return journal.PodJournal{Namespace: namespace, Name: name, UID: "u1",
		Entries: []journal.Entry{{Time: time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC), Kind: journal.KindAdmission, Message: "admitted"}}}, true
}

func TestJournalHandler(t *testing.T) {
	tests := []struct {
		name     string
		lookup   JournalLookup
		path     string
		wantCode int
		wantBody string
	}{
		{"known pod", journalLookup, "/debug/pods/ns/web/journal", http.StatusOK, `"message":"admitted"`},
		{"unknown pod", journalLookup, "/debug/pods/ns/db/journal", http.StatusNotFound, `pod "db" not found in namespace "ns"`},
		{"other namespace", journalLookup, "/debug/pods/other/web/journal", http.StatusNotFound, "not found"},
		{"no entries yet", func(ns, name string) (journal.PodJournal, bool) { return journal.PodJournal{Name: name}, true },
			"/debug/pods/ns/web/journal", http.StatusOK, `"entries":[]`},
		{"no lookup", nil, "/debug/pods/ns/web/journal", http.StatusNotFound, "not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mux := http.NewServeMux()
			mux.Handle(JournalPath, JournalHandler(tt.lookup))
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tt.path, nil))
			if rec.Code != tt.wantCode || !strings.Contains(rec.Body.String(), tt.wantBody) {
				t.Fatalf("GET %s = %d %q, want %d with %q", tt.path, rec.Code, rec.Body.String(), tt.wantCode, tt.wantBody)
			}
			if rec.Code == http.StatusOK {
				var pj journal.PodJournal
				if err := json.Unmarshal(rec.Body.Bytes(), &pj); err != nil {
					t.Fatalf("decode: %v", err)
				}
			}
		})
	}
}

func TestKubeletAPIJournal(t *testing.T) {
	tests := []struct {
		name     string
		debug    *DebugOptions
		wantCode int
	}{
		{"debugging handlers on", &DebugOptions{EnableDebuggingHandlers: true}, http.StatusOK},
		{"no debug options", nil, http.StatusOK},
		{"debugging handlers off", &DebugOptions{}, http.StatusMethodNotAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var authed []string
			s := NewKubeletAPI(KubeletAPIOptions{
				Auth: func(next http.Handler) http.Handler {
					return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						authed = append(authed, r.URL.Path)
						if r.Header.Get("Authorization") == "" {
							http.Error(w, "Unauthorized", http.StatusUnauthorized)
							return
						}
						next.ServeHTTP(w, r)
					})
				},
				Journal: journalLookup,
				Debug:   tt.debug,
			})
			ts := httptest.NewServer(s.Handler())
			defer ts.Close()
			get := func(auth string) (int, string) {
				req, _ := http.NewRequest(http.MethodGet, ts.URL+"/debug/pods/ns/web/journal", nil)
				if auth != "" {
					req.Header.Set("Authorization", auth)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(b)
			}
			if code, body := get(""); code != http.StatusUnauthorized {
				t.Errorf("without credentials: %d %q, want 401", code, body)
			}
			if code, body := get("Bearer x"); code != tt.wantCode {
				t.Errorf("with credentials: %d %q, want %d", code, body, tt.wantCode)
			}
			if len(authed) != 2 {
				t.Errorf("the authorization filter saw %v, want both requests", authed)
			}
		})
	}
}
