package doctor

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

func TestServerTime(t *testing.T) {
	date := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/version" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Date", date.Format(http.TimeFormat))
		_, _ = w.Write([]byte(`{"gitVersion": "v1.37.2"}`))
	}))
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	server, sent, received, err := serverTime(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !server.Equal(date) {
		t.Errorf("server time %v, want %v", server, date)
	}
	if received.Before(sent) {
		t.Errorf("received %v before sent %v", received, sent)
	}

	srv.Close()
	if _, _, _, err := serverTime(context.Background(), cfg); err == nil {
		t.Error("no error from a closed server")
	}
}

func TestStatfs(t *testing.T) {
	st, err := statfs(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if st.TotalBytes == 0 || st.AvailableBytes > st.TotalBytes {
		t.Errorf("statfs = %+v", st)
	}
	if _, err := statfs("/no/such/dir"); err == nil {
		t.Error("no error for a missing directory")
	}
}
