package certificate

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	certutil "k8s.io/client-go/util/cert"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// errNoCertKey is what fileStore.Current returns (wrapped, with the places
// it looked) when none of them holds a certificate and key.
var errNoCertKey = errors.New("no certificate and key")

// pairTimeFormat names each stored pair after the time it was stored, as
// upstream's kubelet does (kubelet-client-2026-01-31-23-59-59.pem).
const pairTimeFormat = "2006-01-02-15-04-05"

// pairStore holds the current certificate and key of a renewer.
//
// Contract: Current returns the stored pair with its Leaf parsed, or an
// error wrapping errNoCertKey when nothing is stored (any other error
// means something is stored but cannot be used). Update stores a new pair
// and makes it the current one only once it is complete on disk; on error
// the current pair is unchanged.
type pairStore interface {
	Current() (*tls.Certificate, error)
	Update(certPEM, keyPEM []byte) (*tls.Certificate, error)
}

// fileStore is the certificate directory's layout, the upstream kubelet's
// (and so kubeadm's, whose kubelet.conf names the current client pair):
// each pair is one file <dir>/<prefix>-<timestamp>.pem (the certificates,
// then the key, mode 0600), and <dir>/<prefix>-current.pem is a symbolic
// link to the newest, switched by renaming <prefix>-updated.pem over it.
type fileStore struct {
	logger klog.Logger
	prefix string
	dir    string
	// certFile and keyFile, when set and present, are the pair used while
	// the directory has no current pair.
	certFile, keyFile string
	clock             clock.PassiveClock
}

// newFileStore returns the store of the pairs named prefix in dir and
// finishes a switch of the current pair that was interrupted (a
// <prefix>-updated.pem left without <prefix>-current.pem). Its logs go to
// logger (callers pass a verbosity); the clock names the stored pairs
// (nil is the real clock).
func newFileStore(logger klog.Logger, prefix, dir, certFile, keyFile string, clk clock.PassiveClock) (*fileStore, error) {
	if clk == nil {
		clk = clock.RealClock{}
	}
	s := &fileStore{logger: logger, prefix: prefix, dir: dir, certFile: certFile, keyFile: keyFile, clock: clk}
	if err := s.recover(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *fileStore) path(qualifier string) string {
	return filepath.Join(s.dir, s.prefix+"-"+qualifier+".pem")
}

// CurrentPath is <dir>/<prefix>-current.pem.
func (s *fileStore) CurrentPath() string { return s.path("current") }

// recover moves an <prefix>-updated.pem symlink to <prefix>-current.pem
// when the switch to it was interrupted before the rename.
func (s *fileStore) recover() error {
	current, updated := s.CurrentPath(), s.path("updated")
	if ok, err := exists(current); err != nil || ok {
		return err
	}
	fi, err := os.Lstat(updated)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("certificate pair link %s: %w", updated, err)
	}
	if fi.Mode()&os.ModeSymlink == 0 {
		return fmt.Errorf("certificate pair link %s: is a regular file, want a symbolic link", updated)
	}
	if err := os.Rename(updated, current); err != nil {
		return fmt.Errorf("finish switching the current certificate pair: %w", err)
	}
	return nil
}

// Current loads the first pair found of, in this order: the
// <prefix>-current.pem link's target; certFile and keyFile; <dir>/<prefix>.crt
// and <dir>/<prefix>.key. A candidate counts when its files exist (a
// dangling link does not); a candidate that exists but does not load is an
// error naming its files. With none it is an error wrapping errNoCertKey.
func (s *fileStore) Current() (*tls.Certificate, error) {
	current := s.CurrentPath()
	ok, err := exists(current)
	if err != nil {
		return nil, err
	}
	if ok {
		s.logger.Info("Loading certificate and key", "path", current)
		return loadPair(current, current)
	}
	for _, p := range [][2]string{
		{s.certFile, s.keyFile},
		{filepath.Join(s.dir, s.prefix+".crt"), filepath.Join(s.dir, s.prefix+".key")},
	} {
		certOK, err := exists(p[0])
		if err != nil {
			return nil, err
		}
		keyOK, err := exists(p[1])
		if err != nil {
			return nil, err
		}
		if certOK && keyOK {
			s.logger.Info("Loading certificate and key", "certFile", p[0], "keyFile", p[1])
			return loadPair(p[0], p[1])
		}
	}
	return nil, fmt.Errorf("%w: none at %s, (%q, %q) or (%s, %s)", errNoCertKey, current, s.certFile, s.keyFile,
		filepath.Join(s.dir, s.prefix+".crt"), filepath.Join(s.dir, s.prefix+".key"))
}

// Update stores the certificates of certPEM (the leaf first) and the
// first PEM block of keyPEM as <prefix>-<timestamp>.pem and switches
// <prefix>-current.pem to it. The pair is checked (the key must be the
// certificate's) before anything is written, and the file is written
// under a temporary name and renamed into place, so that the link never
// names a partial file. It returns the stored pair.
func (s *fileStore) Update(certPEM, keyPEM []byte) (*tls.Certificate, error) {
	certs, err := certutil.ParseCertsPEM(certPEM)
	if err != nil {
		return nil, fmt.Errorf("invalid certificate data: %w", err)
	}
	keyBlock, _ := pem.Decode(keyPEM)
	if keyBlock == nil {
		return nil, errors.New("invalid key data: no PEM block")
	}
	var data []byte
	for _, c := range certs {
		data = append(data, pem.EncodeToMemory(&pem.Block{Type: certutil.CertificateBlockType, Bytes: c.Raw})...)
	}
	data = append(data, pem.EncodeToMemory(keyBlock)...)
	pair, err := parsePair(data, data)
	if err != nil {
		return nil, err
	}

	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, fmt.Errorf("certificate directory %s: %w", s.dir, err)
	}
	if err := s.checkLinks(); err != nil {
		return nil, err
	}
	target := s.path(s.clock.Now().Format(pairTimeFormat))
	if err := writeFileAtomic(target, data); err != nil {
		return nil, err
	}
	if err := s.switchCurrent(target); err != nil {
		return nil, err
	}
	s.logger.Info("Stored the new certificate and key", "path", target, "link", s.CurrentPath())
	return pair, nil
}

// writeFileAtomic writes data to path (mode 0600) through a temporary
// file in the same directory, synced before it is renamed into place.
func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	// CreateTemp makes the file 0600; the chmod states it for the key.
	err = f.Chmod(0o600)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// checkLinks fails when something other than a symbolic link is where
// <prefix>-current.pem or <prefix>-updated.pem belong: such a file is left
// alone, as upstream.
func (s *fileStore) checkLinks() error {
	for _, link := range []string{s.CurrentPath(), s.path("updated")} {
		fi, err := os.Lstat(link)
		switch {
		case errors.Is(err, os.ErrNotExist):
			continue
		case err != nil:
			return fmt.Errorf("certificate pair link %s: %w", link, err)
		case fi.Mode()&os.ModeSymlink == 0:
			return fmt.Errorf("certificate pair link %s: is a regular file, want a symbolic link", link)
		}
	}
	return nil
}

// switchCurrent points <prefix>-current.pem at target: a new link
// <prefix>-updated.pem is made and renamed over the current one, which
// replaces it atomically. Update has run checkLinks before.
func (s *fileStore) switchCurrent(target string) error {
	current, updated := s.CurrentPath(), s.path("updated")
	if err := os.Remove(updated); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove the stale link %s: %w", updated, err)
	}
	// An absolute target, so that the link is right whatever the
	// directory is relative to.
	abs, err := filepath.Abs(target)
	if err != nil {
		return fmt.Errorf("certificate pair %s: %w", target, err)
	}
	if err := os.Symlink(abs, updated); err != nil {
		return fmt.Errorf("link %s to %s: %w", updated, abs, err)
	}
	if err := os.Rename(updated, current); err != nil {
		return fmt.Errorf("switch %s to %s: %w", current, abs, err)
	}
	return nil
}

// loadPair reads a certificate and key (certFile and keyFile may be one
// file) and parses the leaf; errors name the files.
func loadPair(certFile, keyFile string) (*tls.Certificate, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("certificate: %w", err)
	}
	keyPEM := certPEM
	if keyFile != certFile {
		if keyPEM, err = os.ReadFile(keyFile); err != nil {
			return nil, fmt.Errorf("key: %w", err)
		}
	}
	pair, err := parsePair(certPEM, keyPEM)
	if err != nil {
		if keyFile == certFile {
			return nil, fmt.Errorf("certificate and key in %s: %w", certFile, err)
		}
		return nil, fmt.Errorf("certificate %s and key %s: %w", certFile, keyFile, err)
	}
	return pair, nil
}

// parsePair is tls.X509KeyPair with the leaf certificate parsed.
func parsePair(certPEM, keyPEM []byte) (*tls.Certificate, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	if pair.Leaf == nil {
		if pair.Leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, fmt.Errorf("parse the leaf certificate: %w", err)
		}
	}
	return &pair, nil
}

// exists says whether path names an existing file, following links; an
// empty path does not.
func exists(path string) (bool, error) {
	if path == "" {
		return false, nil
	}
	_, err := os.Stat(path)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, os.ErrNotExist):
		return false, nil
	default:
		return false, fmt.Errorf("%s: %w", path, err)
	}
}
