// Package pluginwatcher discovers node plugins through the kubelet plugin
// registration API (pluginregistration.v1), as node-driver-registrar and
// device plugins expect: a plugin puts a Unix socket into the registry
// directory (<root-dir>/plugins_registry); the watcher calls GetInfo on
// it, checks the answer, hands the plugin to the Handler of its type and
// tells the plugin the outcome with NotifyRegistrationStatus. When the
// socket goes away, the plugin is deregistered.
package pluginwatcher

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/klog/v2"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	"k8s.io/utils/clock"
)

// Handler takes the plugins of one type (registerapi.CSIPlugin, ...).
//
// Contract: Register validates and takes the plugin; an error refuses it
// (the plugin is told the error) and the watcher tries again when the
// socket is recreated or at the next resync. Register is idempotent for
// the same name and endpoint. Deregister forgets the plugin of that name
// registered from that endpoint and is safe for one never registered; its
// context is not ended by the watcher's stop (it has a deadline of
// deregisterTimeout instead), so a plugin that went away just before the
// agent stopped is still removed from what the node publishes. Calls are
// serialized by the watcher.
type Handler interface {
	Register(ctx context.Context, name, endpoint string, versions []string) error
	Deregister(ctx context.Context, name, endpoint string)
}

// Defaults of Options.
const (
	// DefaultResync is how often the directory is listed again, in case an
	// event was missed or a registration failed.
	DefaultResync = 30 * time.Second
	// callTimeout bounds each call to a plugin's registration socket.
	callTimeout = 10 * time.Second
	// deregisterTimeout bounds a Deregister, which may outlive the stop.
	deregisterTimeout = 10 * time.Second
)

// Options configures a Watcher.
type Options struct {
	// Dir is the registry directory (<root-dir>/plugins_registry); created
	// (0750) when missing.
	Dir string
	// Handlers by plugin type.
	Handlers map[string]Handler
	// Clock drives the resync. Default the real clock.
	Clock clock.WithTicker
	// Resync is the period of the safety-net listing. Default DefaultResync.
	Resync time.Duration
}

// registered is a socket whose plugin a Handler took.
type registered struct {
	typ, name, endpoint string
	mod                 time.Time
}

// Watcher watches the registry directory.
type Watcher struct {
	opts Options

	mu   sync.Mutex
	regs map[string]registered // by socket path
}

// New returns a Watcher; it has no side effects.
func New(opts Options) *Watcher {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Resync <= 0 {
		opts.Resync = DefaultResync
	}
	return &Watcher{opts: opts, regs: map[string]registered{}}
}

// Run watches until ctx ends; it returns nil then, or an error when the
// directory cannot be made or watched.
func (w *Watcher) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	if err := os.MkdirAll(w.opts.Dir, 0o750); err != nil {
		return fmt.Errorf("create plugin registry directory: %w", err)
	}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch plugin registry directory: %w", err)
	}
	defer func() { _ = fw.Close() }()
	if err := fw.Add(w.opts.Dir); err != nil {
		return fmt.Errorf("watch plugin registry directory %s: %w", w.opts.Dir, err)
	}
	logger.V(2).Info("Watching plugin registry", "path", w.opts.Dir)
	t := w.opts.Clock.NewTicker(w.opts.Resync)
	defer t.Stop()
	w.Sync(ctx)
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-fw.Events:
			if !ok {
				return nil
			}
			switch {
			case ev.Has(fsnotify.Create):
				w.forget(ctx, ev.Name) // a recreated socket is a new plugin
				w.add(ctx, ev.Name)
			case ev.Has(fsnotify.Remove), ev.Has(fsnotify.Rename):
				w.forget(ctx, ev.Name)
			}
		case err, ok := <-fw.Errors:
			if !ok {
				return nil
			}
			logger.Error(err, "Plugin registry watch error")
		case <-t.C():
			w.Sync(ctx)
		}
	}
}

// Sync lists the directory once: registers the sockets not registered yet
// (or recreated since) and deregisters the plugins whose socket is gone.
func (w *Watcher) Sync(ctx context.Context) {
	entries, err := os.ReadDir(w.opts.Dir)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Couldn't list plugin registry", "path", w.opts.Dir)
		return
	}
	present := map[string]bool{}
	for _, e := range entries {
		p := filepath.Join(w.opts.Dir, e.Name())
		present[p] = true
		fi, err := e.Info()
		if err != nil {
			continue
		}
		w.mu.Lock()
		r, ok := w.regs[p]
		w.mu.Unlock()
		if ok && r.mod.Equal(fi.ModTime()) {
			continue
		}
		if ok {
			w.forget(ctx, p)
		}
		w.add(ctx, p)
	}
	w.mu.Lock()
	var gone []string
	for p := range w.regs {
		if !present[p] {
			gone = append(gone, p)
		}
	}
	w.mu.Unlock()
	for _, p := range gone {
		w.forget(ctx, p)
	}
}

// add registers the plugin behind the socket at path, if it is one.
func (w *Watcher) add(ctx context.Context, path string) {
	logger := klog.FromContext(ctx)
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&fs.ModeSocket == 0 || strings.HasPrefix(filepath.Base(path), ".") {
		return
	}
	reg, err := w.register(ctx, path)
	if err != nil {
		logger.Error(err, "Plugin registration failed", "path", path)
		return
	}
	reg.mod = fi.ModTime()
	w.mu.Lock()
	w.regs[path] = reg
	w.mu.Unlock()
	logger.Info("Registered plugin", "type", reg.typ, "plugin", reg.name, "endpoint", reg.endpoint)
}

// register asks the socket for its plugin, lets the handler take it and
// tells the plugin the result.
func (w *Watcher) register(ctx context.Context, path string) (registered, error) {
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return registered{}, fmt.Errorf("connect to %s: %w", path, err)
	}
	defer func() { _ = conn.Close() }()
	client := registerapi.NewRegistrationClient(conn)
	callCtx, cancel := context.WithTimeout(ctx, callTimeout)
	// A socket appears (bind) a moment before it is served (listen).
	info, err := client.GetInfo(callCtx, &registerapi.InfoRequest{}, grpc.WaitForReady(true))
	cancel()
	if err != nil {
		return registered{}, fmt.Errorf("GetInfo of %s: %w", path, err)
	}
	reg := registered{typ: info.GetType(), name: info.GetName(), endpoint: info.GetEndpoint()}
	if reg.endpoint == "" {
		reg.endpoint = path
	}
	regErr := w.validate(info)
	if regErr == nil {
		regErr = w.opts.Handlers[reg.typ].Register(ctx, reg.name, reg.endpoint, info.GetSupportedVersions())
	}
	status := &registerapi.RegistrationStatus{PluginRegistered: regErr == nil}
	if regErr != nil {
		status.Error = regErr.Error()
	}
	callCtx, cancel = context.WithTimeout(ctx, callTimeout)
	_, notifyErr := client.NotifyRegistrationStatus(callCtx, status)
	cancel()
	if regErr != nil {
		return registered{}, fmt.Errorf("plugin %q of type %q refused: %w", reg.name, reg.typ, regErr)
	}
	if notifyErr != nil {
		// The plugin does not know it is registered; take it back and try again.
		w.opts.Handlers[reg.typ].Deregister(ctx, reg.name, reg.endpoint)
		return registered{}, fmt.Errorf("NotifyRegistrationStatus of %s: %w", path, notifyErr)
	}
	return reg, nil
}

// validate checks what GetInfo returned.
func (w *Watcher) validate(info *registerapi.PluginInfo) error {
	if info.GetName() == "" {
		return errors.New("plugin has no name")
	}
	if w.opts.Handlers[info.GetType()] == nil {
		return fmt.Errorf("no handler for plugin type %q", info.GetType())
	}
	if len(info.GetSupportedVersions()) == 0 {
		return errors.New("plugin lists no supported versions")
	}
	return nil
}

// forget deregisters the plugin registered from the socket at path.
func (w *Watcher) forget(ctx context.Context, path string) {
	w.mu.Lock()
	reg, ok := w.regs[path]
	delete(w.regs, path)
	w.mu.Unlock()
	if !ok {
		return
	}
	// The socket's removal and the agent's stop often come together (the
	// plugin and the agent stopped at once): finish the removal anyway.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deregisterTimeout)
	defer cancel()
	w.opts.Handlers[reg.typ].Deregister(ctx, reg.name, reg.endpoint)
	klog.FromContext(ctx).Info("Deregistered plugin", "type", reg.typ, "plugin", reg.name)
}
