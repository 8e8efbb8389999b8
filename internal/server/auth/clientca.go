package auth

import (
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// caCheckInterval is how often Run reads the client CA file whatever the
// directory watch reports.
const caCheckInterval = time.Minute

// clientCA is the CA bundle of authentication.x509.clientCAFile, which
// client certificates are verified against. The file is read when the
// clientCA is made; Run reads it again on every change its directory
// reports, and every caCheckInterval besides (changes a directory watch
// does not see: a symbolic link to another directory, a watch that could
// not be set). A read that fails, or a file without certificates, leaves
// the last good bundle in use.
type clientCA struct {
	file  string
	clk   clock.WithTicker
	watch bool // Run watches the file's directory; false checks on the clock only

	current atomic.Pointer[caBundle]

	mu      sync.Mutex
	changed chan struct{} // closed, and replaced, when current changes

	failing bool // the last read failed and was logged; Run's goroutine only
}

// caBundle is a CA file's content and the verify options of its
// certificates: roots for client authentication.
type caBundle struct {
	pem  []byte
	opts x509.VerifyOptions
}

// newClientCA reads file; an error names it.
func newClientCA(file string, clk clock.WithTicker) (*clientCA, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	b, err := parseCABundle(file, data)
	if err != nil {
		return nil, err
	}
	c := &clientCA{file: file, clk: clk, watch: true, changed: make(chan struct{})}
	c.current.Store(b)
	return c, nil
}

// parseCABundle reads the PEM certificates of data, read from file.
func parseCABundle(file string, data []byte) (*caBundle, error) {
	certs, err := certutil.ParseCertsPEM(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	roots := x509.NewCertPool()
	for _, c := range certs {
		roots.AddCert(c)
	}
	return &caBundle{pem: data, opts: x509.VerifyOptions{
		Roots:     roots,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}}, nil
}

// VerifyOptions are the options client certificates are verified with:
// the current bundle's roots, for client authentication. It is an
// x509request.VerifyOptionFunc.
func (c *clientCA) VerifyOptions() (x509.VerifyOptions, bool) {
	b := c.current.Load()
	if b == nil {
		return x509.VerifyOptions{}, false
	}
	return b.opts, true
}

// changes returns a channel closed when the bundle next changes.
func (c *clientCA) changes() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

// Run reloads the file when it changes until ctx is done; it returns then,
// its watch closed.
func (c *clientCA) Run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithValues("file", c.file)
	ctx = klog.NewContext(ctx, logger)
	dir := filepath.Dir(c.file)

	var (
		w        *fsnotify.Watcher
		events   <-chan fsnotify.Event
		errs     <-chan error
		watching bool
	)
	if c.watch {
		var err error
		if w, err = fsnotify.NewWatcher(); err != nil {
			logger.Error(err, "Cannot watch the client CA file, checking it periodically", "interval", caCheckInterval)
		} else {
			defer func() { _ = w.Close() }()
			events, errs = w.Events, w.Errors
		}
	}
	// addWatch watches dir when it is not, as at start or after the
	// directory went away.
	addWatch := func() {
		if w == nil || watching {
			return
		}
		if err := w.Add(dir); err != nil {
			logger.V(2).Info("Cannot watch the client CA file's directory, checking it periodically", "dir", dir, "err", err, "interval", caCheckInterval)
			return
		}
		watching = true
	}

	addWatch()
	c.reload(ctx) // changes since the clientCA was made
	ticker := c.clk.NewTicker(caCheckInterval)
	defer ticker.Stop()
	logger.V(2).Info("Watching the client CA file", "interval", caCheckInterval)
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			logger.V(5).Info("Client CA directory event", "event", ev.String())
			if filepath.Clean(ev.Name) == dir && ev.Has(fsnotify.Remove|fsnotify.Rename) {
				// The directory itself went away, and its watch with it.
				_ = w.Remove(dir)
				watching = false
			}
			c.reload(ctx)
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			// Typically a queue overflow: events may have been lost.
			logger.Error(err, "Client CA directory watch error")
			c.reload(ctx)
		case <-ticker.C():
			addWatch()
			c.reload(ctx)
		}
	}
}

// reload reads the file and, when its content changed and holds
// certificates, makes it the bundle client certificates are verified
// against. A failure keeps the current bundle and is logged once until a
// read succeeds.
func (c *clientCA) reload(ctx context.Context) {
	logger := klog.FromContext(ctx)
	data, err := os.ReadFile(c.file)
	var b *caBundle
	if err == nil {
		if cur := c.current.Load(); cur != nil && bytes.Equal(cur.pem, data) {
			c.failing = false
			return
		}
		b, err = parseCABundle(c.file, data)
	}
	if err != nil {
		if !c.failing {
			logger.Error(err, "Cannot reload the client CA file, keeping the current CA bundle")
		}
		c.failing = true
		return
	}
	c.failing = false
	c.current.Store(b)
	c.mu.Lock()
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
	logger.Info("Reloaded the client CA file")
}
