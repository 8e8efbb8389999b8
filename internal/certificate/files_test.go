package certificate

import (
	"context"
	"crypto/x509/pkix"
	"path/filepath"
	"testing"
	"time"
)

type listenerFunc func()

func (f listenerFunc) Enqueue() { f() }

// TestFilesReload: a serving pair from files is served again after the
// files change; a new certificate whose key does not match is refused and
// the pair before it kept.
func TestFilesReload(t *testing.T) {
	ca := newTestCA(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	now := time.Now()
	c1, k1 := ca.pair(t, pkix.Name{CommonName: "first"}, now.Add(-time.Hour), now.Add(time.Hour))
	writeFile(t, certFile, c1)
	writeFile(t, keyFile, k1)

	f, err := NewFiles(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	changed := make(chan struct{}, 10)
	f.content.AddListener(listenerFunc(func() { changed <- struct{}{} }))
	if got := served(t, f); got != "first" {
		t.Fatalf("serving %q, want first", got)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.Run(ctx) }()
	defer func() { cancel(); <-done }()

	c2, k2 := ca.pair(t, pkix.Name{CommonName: "second"}, now.Add(-time.Hour), now.Add(time.Hour))
	writeFile(t, keyFile, k2)
	writeFile(t, certFile, c2)
	deadline := time.After(waitFor)
	for served(t, f) != "second" {
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("still serving %q after the files changed", served(t, f))
		}
	}

	// Attack: a certificate replaced without its key (or with a key of
	// another pair) is not served.
	c3, _ := ca.pair(t, pkix.Name{CommonName: "third"}, now.Add(-time.Hour), now.Add(time.Hour))
	writeFile(t, certFile, c3)
	if err := f.content.RunOnce(context.Background()); err == nil {
		t.Error("a certificate that does not match the key was loaded")
	}
	if got := served(t, f); got != "second" {
		t.Errorf("serving %q after a mismatched pair, want second", got)
	}
}

func TestFilesMissing(t *testing.T) {
	dir := t.TempDir()
	if _, err := NewFiles(filepath.Join(dir, "no.crt"), filepath.Join(dir, "no.key")); err == nil {
		t.Error("NewFiles of missing files succeeded")
	}
}

func served(t *testing.T, f *Files) string {
	t.Helper()
	c, err := f.GetCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Leaf == nil {
		t.Fatal("no parsed leaf")
	}
	return c.Leaf.Subject.CommonName
}
