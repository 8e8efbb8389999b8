package certificate

import (
	"crypto/x509/pkix"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2"
	clocktesting "k8s.io/utils/clock/testing"
)

// storeEnv is a certificate directory with a store on a fake clock.
type storeEnv struct {
	ca  *testCA
	dir string
	clk *clocktesting.FakeClock
}

func newStoreEnv(t *testing.T) *storeEnv {
	return &storeEnv{
		ca:  newTestCA(t),
		dir: filepath.Join(t.TempDir(), "pki"),
		clk: clocktesting.NewFakeClock(time.Date(2026, 3, 4, 5, 6, 7, 0, time.Local)),
	}
}

func (e *storeEnv) store(t *testing.T, certFile, keyFile string) *fileStore {
	t.Helper()
	s, err := newFileStore(klog.Background(), "kubelet-client", e.dir, certFile, keyFile, e.clk)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// pair is a valid pair with this common name.
func (e *storeEnv) pair(t *testing.T, cn string) (certPEM, keyPEM []byte) {
	return e.ca.pair(t, pkix.Name{CommonName: cn}, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
}

func commonName(t *testing.T, s *fileStore) (string, error) {
	t.Helper()
	c, err := s.Current()
	if err != nil {
		return "", err
	}
	if c.Leaf == nil {
		t.Fatal("current pair without a parsed leaf")
	}
	return c.Leaf.Subject.CommonName, nil
}

// TestStoreUpdate: each pair is stored as <prefix>-<timestamp>.pem (the
// clock's time, upstream's format), mode 0600, the certificate and then
// the key; <prefix>-current.pem is a symbolic link to the newest by
// absolute path, and the pairs before it stay.
func TestStoreUpdate(t *testing.T) {
	e := newStoreEnv(t)
	s := e.store(t, "", "")
	c1, k1 := e.pair(t, "first")
	stored, err := s.Update(c1, k1)
	if err != nil {
		t.Fatal(err)
	}
	if stored.Leaf == nil || stored.Leaf.Subject.CommonName != "first" {
		t.Fatalf("Update returned %v", stored.Leaf)
	}
	e.clk.Step(time.Hour + 2*time.Second)
	c2, k2 := e.pair(t, "second")
	if _, err := s.Update(c2, k2); err != nil {
		t.Fatal(err)
	}

	first := filepath.Join(e.dir, "kubelet-client-2026-03-04-05-06-07.pem")
	second := filepath.Join(e.dir, "kubelet-client-2026-03-04-06-06-09.pem")
	entries, err := os.ReadDir(e.dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range entries {
		names = append(names, de.Name())
	}
	want := []string{filepath.Base(first), filepath.Base(second), "kubelet-client-current.pem"}
	if !slices.Equal(names, want) {
		t.Errorf("directory holds %q, want %q (no temporary or updated files)", names, want)
	}
	target, err := os.Readlink(filepath.Join(e.dir, "kubelet-client-current.pem"))
	if err != nil {
		t.Fatal(err)
	}
	if abs, _ := filepath.Abs(second); target != abs {
		t.Errorf("kubelet-client-current.pem -> %s, want %s", target, abs)
	}
	for _, p := range []string{first, second} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", p, fi.Mode().Perm())
		}
	}
	data, err := os.ReadFile(second)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(data), "-----BEGIN CERTIFICATE-----") || !strings.Contains(string(data), "PRIVATE KEY-----") {
		t.Errorf("pair file is not the certificate then the key:\n%s", data)
	}
	if got, err := commonName(t, s); err != nil || got != "second" {
		t.Errorf("Current = %q %v, want second", got, err)
	}
	// A store opened again finds the same pair.
	if got, err := commonName(t, e.store(t, "", "")); err != nil || got != "second" {
		t.Errorf("Current of a new store = %q %v, want second", got, err)
	}

	// Within the same second the pair file is replaced whole.
	c3, k3 := e.pair(t, "third")
	if _, err := s.Update(c3, k3); err != nil {
		t.Fatal(err)
	}
	if got, err := commonName(t, s); err != nil || got != "third" {
		t.Errorf("Current after a second update in the same second = %q %v, want third", got, err)
	}
}

// TestStoreUpdateRefuses: a pair that does not hold together is refused
// before anything is written, and the current pair stays.
func TestStoreUpdateRefuses(t *testing.T) {
	e := newStoreEnv(t)
	c1, k1 := e.pair(t, "first")
	c2, _ := e.pair(t, "second")
	_, otherKey := e.pair(t, "other")
	for _, tc := range []struct {
		name      string
		cert, key []byte
		want      string
	}{
		{"key of another certificate", c2, otherKey, "private key does not match public key"},
		{"no certificate", []byte("junk"), k1, "invalid certificate data"},
		{"no key", c2, []byte("junk"), "invalid key data"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.dir = filepath.Join(t.TempDir(), "pki")
			s := e.store(t, "", "")
			if _, err := s.Update(c1, k1); err != nil {
				t.Fatal(err)
			}
			e.clk.Step(time.Minute)
			_, err := s.Update(tc.cert, tc.key)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Update = %v, want an error with %q", err, tc.want)
			}
			entries, _ := os.ReadDir(e.dir)
			if len(entries) != 2 {
				t.Errorf("%d files in the directory, want the first pair and its link", len(entries))
			}
			if got, err := commonName(t, s); err != nil || got != "first" {
				t.Errorf("Current = %q %v, want first", got, err)
			}
		})
	}
}

// TestStoreCurrent: the current pair is looked for, as upstream, in the
// <prefix>-current.pem link, then the configured files, then
// <prefix>.crt/.key in the directory; with none the error is errNoCertKey,
// and a pair that exists but is broken is an error naming its file.
func TestStoreCurrent(t *testing.T) {
	type layout struct {
		link       string // "", "good", "dangling", "corrupt"
		configured bool   // certFile/keyFile exist ("configured")
		defaults   bool   // kubelet-client.crt/.key exist ("defaults")
		halfConfig bool   // only the configured certificate exists
		corruptCfg bool   // the configured files exist, the key garbled
	}
	tests := []struct {
		name    string
		layout  layout
		wantCN  string
		wantErr string // substring; "NOPAIR" is errNoCertKey
	}{
		{"link first", layout{link: "good", configured: true, defaults: true}, "linked", ""},
		{"configured files next", layout{configured: true, defaults: true}, "configured", ""},
		{"dangling link is no pair", layout{link: "dangling", configured: true}, "configured", ""},
		{"directory defaults last", layout{defaults: true}, "defaults", ""},
		{"half a configured pair is skipped", layout{halfConfig: true, defaults: true}, "defaults", ""},
		{"nothing", layout{}, "", "NOPAIR"},
		{"corrupt linked pair", layout{link: "corrupt", configured: true}, "", "kubelet-client-current.pem"},
		{"corrupt configured pair", layout{corruptCfg: true, defaults: true}, "", "configured.key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newStoreEnv(t)
			if err := os.MkdirAll(e.dir, 0o700); err != nil {
				t.Fatal(err)
			}
			other := t.TempDir()
			certFile, keyFile := filepath.Join(other, "configured.crt"), filepath.Join(other, "configured.key")
			link := filepath.Join(e.dir, "kubelet-client-current.pem")
			switch tt.layout.link {
			case "good":
				c, k := e.pair(t, "linked")
				writeFile(t, filepath.Join(e.dir, "kubelet-client-x.pem"), append(c, k...))
				if err := os.Symlink(filepath.Join(e.dir, "kubelet-client-x.pem"), link); err != nil {
					t.Fatal(err)
				}
			case "dangling":
				if err := os.Symlink(filepath.Join(e.dir, "gone.pem"), link); err != nil {
					t.Fatal(err)
				}
			case "corrupt":
				writeFile(t, filepath.Join(e.dir, "kubelet-client-x.pem"), []byte("garbage"))
				if err := os.Symlink(filepath.Join(e.dir, "kubelet-client-x.pem"), link); err != nil {
					t.Fatal(err)
				}
			}
			if tt.layout.configured || tt.layout.halfConfig || tt.layout.corruptCfg {
				c, k := e.pair(t, "configured")
				writeFile(t, certFile, c)
				switch {
				case tt.layout.corruptCfg:
					writeFile(t, keyFile, []byte("garbage"))
				case tt.layout.configured:
					writeFile(t, keyFile, k)
				}
			}
			if tt.layout.defaults {
				c, k := e.pair(t, "defaults")
				writeFile(t, filepath.Join(e.dir, "kubelet-client.crt"), c)
				writeFile(t, filepath.Join(e.dir, "kubelet-client.key"), k)
			}
			got, err := commonName(t, e.store(t, certFile, keyFile))
			switch {
			case tt.wantErr == "NOPAIR":
				if !errors.Is(err, errNoCertKey) {
					t.Errorf("Current = %q %v, want errNoCertKey", got, err)
				}
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || errors.Is(err, errNoCertKey) {
					t.Errorf("Current = %q %v, want an error naming %s", got, err, tt.wantErr)
				}
			case err != nil || got != tt.wantCN:
				t.Errorf("Current = %q %v, want %s", got, err, tt.wantCN)
			}
		})
	}
}

// TestStoreLinks: an interrupted switch (an updated link left without the
// current one) is finished when the store opens; regular files where the
// links belong are an error rather than overwritten.
func TestStoreLinks(t *testing.T) {
	t.Run("interrupted switch", func(t *testing.T) {
		e := newStoreEnv(t)
		c, k := e.pair(t, "pending")
		pairFile := filepath.Join(e.dir, "kubelet-client-2026-01-01-00-00-00.pem")
		writeFile(t, pairFile, append(c, k...))
		if err := os.Symlink(pairFile, filepath.Join(e.dir, "kubelet-client-updated.pem")); err != nil {
			t.Fatal(err)
		}
		s := e.store(t, "", "")
		if got, err := commonName(t, s); err != nil || got != "pending" {
			t.Errorf("Current = %q %v, want the pair the updated link named", got, err)
		}
		if _, err := os.Lstat(filepath.Join(e.dir, "kubelet-client-updated.pem")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("updated link left: %v", err)
		}
	})
	for _, name := range []string{"kubelet-client-current.pem", "kubelet-client-updated.pem"} {
		t.Run("regular file "+name, func(t *testing.T) {
			e := newStoreEnv(t)
			c, k := e.pair(t, "x")
			writeFile(t, filepath.Join(e.dir, name), append(c, k...))
			s, err := newFileStore(klog.Background(), "kubelet-client", e.dir, "", "", e.clk)
			if err != nil {
				if name == "kubelet-client-updated.pem" && strings.Contains(err.Error(), "want a symbolic link") {
					return // refused already when opening
				}
				t.Fatal(err)
			}
			if _, err := s.Update(c, k); err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("Update = %v, want an error naming %s", err, name)
			}
			if entries, _ := os.ReadDir(e.dir); len(entries) != 1 {
				t.Errorf("%d files in the directory after the refused update, want the regular file only", len(entries))
			}
		})
	}
}
