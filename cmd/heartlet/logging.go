package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"go.uber.org/zap/zapcore"
	logsapi "k8s.io/component-base/logs/api/v1"
	logsjson "k8s.io/component-base/logs/json"
	"k8s.io/klog/v2"

	"github.com/heartlet/heartlet/internal/config"
)

// logBackups is how many rotated log files are kept (heartlet.log.1 is the
// newest).
const logBackups = 5

// initLogging applies the configured verbosity, format (logging.format:
// text or json, as upstream's component-base) and output (standard error,
// or --log-file / --log-dir rotated by size) to klog. The returned
// function flushes and closes the output.
func initLogging(opts *config.Options, stderr io.Writer) (func(), error) {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	klog.InitFlags(fs)
	if err := fs.Set("v", strconv.Itoa(opts.Verbosity)); err != nil {
		return nil, fmt.Errorf("setting log verbosity: %w", err)
	}
	vmodule := logsapi.VModuleConfigurationPflag(&opts.Config.Logging.VModule).String()
	if err := fs.Set("vmodule", vmodule); err != nil {
		return nil, fmt.Errorf("setting log vmodule %q: %w", vmodule, err)
	}

	out := stderr
	closeOut := func() {}
	if opts.LogFile != "" {
		f, err := openRotatingFile(opts.LogFile, int64(opts.LogFileMaxSizeMB)<<20, logBackups)
		if err != nil {
			return nil, err
		}
		out, closeOut = f, func() { _ = f.Close() }
	}
	switch opts.Config.Logging.Format {
	case "json":
		// One stream: info and errors go to the same output, in order.
		logger, ctl := logsjson.NewJSONLogger(logsapi.VerbosityLevel(opts.Verbosity), zapcore.AddSync(out), nil, nil)
		klog.SetLoggerWithOptions(logger, klog.ContextualLogger(true), klog.FlushLogger(ctl.Flush))
	default:
		if opts.LogFile != "" {
			if err := fs.Set("logtostderr", "false"); err != nil {
				return nil, fmt.Errorf("setting klog output: %w", err)
			}
			klog.SetOutput(out)
		}
	}
	return func() {
		klog.Flush()
		closeOut()
	}, nil
}

// rotatingFile is an append-only log file that is renamed to .1 (and the
// older ones shifted up to .<backups>, the oldest dropped) once a write
// would take it past maxSize bytes.
type rotatingFile struct {
	path    string
	maxSize int64 // 0: never rotate
	backups int

	mu   sync.Mutex
	f    *os.File
	size int64
}

func openRotatingFile(path string, maxSize int64, backups int) (*rotatingFile, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("log file directory: %w", err)
	}
	r := &rotatingFile{path: path, maxSize: maxSize, backups: backups}
	if err := r.open(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *rotatingFile) open() error {
	f, err := os.OpenFile(r.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open log file: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("open log file: %w", err)
	}
	r.f, r.size = f, fi.Size()
	return nil
}

func (r *rotatingFile) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.maxSize > 0 && r.size > 0 && r.size+int64(len(p)) > r.maxSize {
		if err := r.rotate(); err != nil {
			return 0, err
		}
	}
	n, err := r.f.Write(p)
	r.size += int64(n)
	return n, err
}

// rotate shifts path.<i> to path.<i+1>, path to path.1, and reopens path.
func (r *rotatingFile) rotate() error {
	if err := r.f.Close(); err != nil {
		return fmt.Errorf("close log file: %w", err)
	}
	_ = os.Remove(fmt.Sprintf("%s.%d", r.path, r.backups))
	for i := r.backups - 1; i >= 1; i-- {
		_ = os.Rename(fmt.Sprintf("%s.%d", r.path, i), fmt.Sprintf("%s.%d", r.path, i+1))
	}
	if err := os.Rename(r.path, r.path+".1"); err != nil {
		return fmt.Errorf("rotate log file: %w", err)
	}
	return r.open()
}

func (r *rotatingFile) Sync() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.f.Sync()
}

func (r *rotatingFile) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.f.Close()
}
