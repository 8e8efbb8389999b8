package certificate

import (
	"context"
	"crypto/x509/pkix"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	clocktesting "k8s.io/utils/clock/testing"
)

// filesEnv is a Files on a fake clock, run until the test ends.
type filesEnv struct {
	certFile, keyFile string
	clk               *clocktesting.FakeClock
	f                 *Files
}

// newFilesEnv writes the pair and reads it with a Files on a fake clock.
func newFilesEnv(t *testing.T, certPEM, keyPEM []byte) *filesEnv {
	t.Helper()
	dir := t.TempDir()
	e := &filesEnv{
		certFile: filepath.Join(dir, "tls.crt"),
		keyFile:  filepath.Join(dir, "tls.key"),
		clk:      clocktesting.NewFakeClock(time.Now()),
	}
	writeFile(t, e.certFile, certPEM)
	writeFile(t, e.keyFile, keyPEM)
	var err error
	if e.f, err = newFiles(e.certFile, e.keyFile, e.clk); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *filesEnv) run(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.f.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	e.waitCheck(t)
}

// waitCheck waits until Run waits on its timer: it has then made every
// check the clock allowed so far (the timer is made again after each).
func (e *filesEnv) waitCheck(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for e.clk.Waiters() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters on the clock, want Run's check", e.clk.Waiters())
		}
		runtime.Gosched()
	}
}

// tick advances the clock by d and waits for the check it allows.
func (e *filesEnv) tick(t *testing.T, d time.Duration) {
	t.Helper()
	e.clk.Step(d)
	e.waitCheck(t)
}

// TestFilesReload: a serving pair from files is served at the first check
// after the files change, not before; a pair that cannot be served (a
// certificate replaced before its key, an empty, missing or garbled file)
// is refused and the pair before it kept, until a good pair is written.
func TestFilesReload(t *testing.T) {
	ca := newTestCA(t)
	pair := func(cn string) (c, k []byte) {
		return ca.pair(t, pkix.Name{CommonName: cn}, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	}
	c1, k1 := pair("first")
	c2, k2 := pair("second")
	type change struct {
		name       string
		cert, key  []byte // written when not nil; the key first
		removeKey  bool
		emptyCert  bool
		wantServed string // after the next check
	}
	tests := []struct {
		name    string
		changes []change
	}{
		{"new pair", []change{{name: "both files", cert: c2, key: k2, wantServed: "second"}}},
		{"certificate before its key", []change{
			{name: "certificate", cert: c2, wantServed: "first"},
			{name: "key", key: k2, wantServed: "second"},
		}},
		{"empty certificate", []change{
			{name: "emptied", emptyCert: true, wantServed: "first"},
			{name: "rewritten", cert: c2, key: k2, wantServed: "second"},
		}},
		{"key removed", []change{
			{name: "removed", removeKey: true, wantServed: "first"},
			{name: "back", key: k1, wantServed: "first"},
			{name: "new pair", cert: c2, key: k2, wantServed: "second"},
		}},
		{"garbled certificate", []change{
			{name: "garbled", cert: []byte("-----BEGIN CERTIFICATE-----\nbm90IERFUg==\n-----END CERTIFICATE-----\n"), wantServed: "first"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newFilesEnv(t, c1, k1)
			if got := served(t, e.f); got != "first" {
				t.Fatalf("serving %q, want first", got)
			}
			e.run(t)
			prev := "first"
			for _, c := range tt.changes {
				if c.key != nil {
					writeFile(t, e.keyFile, c.key)
				}
				if c.cert != nil {
					writeFile(t, e.certFile, c.cert)
				}
				if c.emptyCert {
					writeFile(t, e.certFile, nil)
				}
				if c.removeKey {
					if err := os.Remove(e.keyFile); err != nil {
						t.Fatal(err)
					}
				}
				// Nothing is read before the check...
				e.tick(t, DefaultCheckInterval-time.Millisecond)
				if got := served(t, e.f); got != prev {
					t.Fatalf("%s: serving %q before the check, want %q", c.name, got, prev)
				}
				// ...and the check serves what can be served.
				e.tick(t, time.Millisecond)
				if got := served(t, e.f); got != c.wantServed {
					t.Fatalf("%s: serving %q, want %q", c.name, got, c.wantServed)
				}
				prev = c.wantServed
			}
		})
	}
}

func TestFilesNew(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t)
	c1, k1 := ca.pair(t, pkix.Name{CommonName: "a"}, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	_, k2 := ca.pair(t, pkix.Name{CommonName: "b"}, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	good, goodKey := filepath.Join(dir, "good.crt"), filepath.Join(dir, "good.key")
	writeFile(t, good, c1)
	writeFile(t, goodKey, k1)
	otherKey := filepath.Join(dir, "other.key")
	writeFile(t, otherKey, k2)
	empty := filepath.Join(dir, "empty")
	writeFile(t, empty, nil)
	for _, tc := range []struct {
		name              string
		certFile, keyFile string
		want              string
	}{
		{"missing", filepath.Join(dir, "no.crt"), filepath.Join(dir, "no.key"), "no.crt"},
		{"no key file named", good, "", "tlsPrivateKeyFile"},
		{"key of another certificate", good, otherKey, "private key does not match public key"},
		{"empty certificate", empty, goodKey, "empty file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewFiles(tc.certFile, tc.keyFile)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("NewFiles = %v, want an error with %q", err, tc.want)
			}
		})
	}
	f, err := NewFiles(good, goodKey)
	if err != nil {
		t.Fatal(err)
	}
	if got := served(t, f); got != "a" {
		t.Errorf("serving %q, want a", got)
	}
}

// TestFilesRunEnds: Run returns when its context ends and leaves nothing
// behind, on its clock or running.
func TestFilesRunEnds(t *testing.T) {
	c, k := newTestCA(t).pair(t, pkix.Name{CommonName: "first"}, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	e := newFilesEnv(t, c, k)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.f.Run(ctx) }()
	e.waitCheck(t)
	e.tick(t, DefaultCheckInterval)
	cancel()
	select {
	case <-done:
	case <-time.After(waitFor):
		t.Fatal("Run did not end with its context")
	}
	if n := e.clk.Waiters(); n != 0 {
		t.Errorf("%d waiters left on the clock", n)
	}
	goleak.VerifyNone(t)
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
