// Command heartlet is a Kubernetes node agent (a kubelet).
//
//	heartlet [flags]                          run the node agent
//	heartlet validate --config FILE [flags]   check a configuration, print the effective one
//	heartlet validate --from-kubelet          list what heartlet would do differently from this node's kubelet
//	heartlet doctor [flags]                   check the node as heartlet would run on it
//	heartlet explain [flags] NAMESPACE/POD    print heartlet's decisions about a pod
//	heartlet version                          print the version and build information
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/klog/v2"

	"github.com/heartlet/heartlet/internal/agent"
	"github.com/heartlet/heartlet/internal/config"
	"github.com/heartlet/heartlet/internal/version"
)

func main() {
	c := &command{
		stdout:   os.Stdout,
		stderr:   os.Stderr,
		runAgent: runAgent,
		exit:     os.Exit,
	}
	os.Exit(c.run(context.Background(), os.Args[1:]))
}

// runAgent builds the agent from opts and runs it until ctx is done.
func runAgent(ctx context.Context, opts *config.Options) error {
	ctx, release, err := holdLockFile(ctx, opts)
	if err != nil {
		return err
	}
	defer release()
	a, err := agent.New(opts)
	if err != nil {
		return fmt.Errorf("building the agent: %w", err)
	}
	err = a.Run(ctx)
	if errors.Is(context.Cause(ctx), errLockContention) {
		// As upstream: the node agent taking over is expected.
		return nil
	}
	return err
}

// command is one invocation of heartlet, with its outputs and the agent
// runner replaceable for tests.
type command struct {
	stdout   io.Writer
	stderr   io.Writer
	runAgent func(ctx context.Context, opts *config.Options) error
	// exit ends the process at once (on a second signal).
	exit func(code int)
}

const usageHeader = `heartlet runs the pods of one Kubernetes node through a CRI container runtime.

Usage:
  heartlet [flags]                          run the node agent
  heartlet validate --config FILE [flags]   check a configuration and print the effective one
  heartlet validate --from-kubelet          list what heartlet would do differently from this node's kubelet (see heartlet validate --from-kubelet --help)
  heartlet doctor [flags]                   check this node as heartlet would run on it (see heartlet doctor --help)
  heartlet explain [flags] NAMESPACE/POD    print why a pod is (not) running (see heartlet explain --help)
  heartlet version                          print the version and build information

Flags:
`

// run executes the command line args (without the program name) and
// returns the process exit code.
func (c *command) run(ctx context.Context, args []string) int {
	if len(args) > 0 {
		switch args[0] {
		case "validate":
			if hasFromKubelet(args[1:]) {
				return c.fromKubelet(ctx, args[1:])
			}
			return c.validate(args[1:])
		case "doctor":
			return c.doctor(ctx, args[1:])
		case "explain":
			return c.explain(ctx, args[1:])
		case "version":
			if len(args) > 1 {
				fmt.Fprintf(c.stderr, "heartlet: version takes no arguments, got %q\n", args[1])
				return 1
			}
			c.printVersion()
			return 0
		}
	}
	return c.serve(ctx, args)
}

// printVersion prints the version and build information (commit, tree
// state, dates, Go version, platform).
func (c *command) printVersion() {
	fmt.Fprint(c.stdout, version.Get().String())
}

// load runs config.Load and handles --help, --version and errors; ok is
// false when the command is done with the returned exit code.
func (c *command) load(args []string) (opts *config.Options, code int, ok bool) {
	opts, err := config.Load(args)
	switch {
	case errors.Is(err, config.ErrHelp):
		fmt.Fprint(c.stdout, usageHeader+config.FlagUsages())
		return nil, 0, false
	case errors.Is(err, config.ErrVersion):
		c.printVersion()
		return nil, 0, false
	case err != nil:
		fmt.Fprintln(c.stderr, err)
		return nil, 1, false
	}
	return opts, 0, true
}

// validate checks the configuration without side effects and prints the
// effective KubeletConfiguration.
func (c *command) validate(args []string) int {
	opts, code, ok := c.load(args)
	if !ok {
		return code
	}
	if msg := config.IgnoredMessage(opts.Ignored); msg != "" {
		fmt.Fprintln(c.stderr, "warning: "+msg)
	}
	for _, w := range opts.Warnings {
		fmt.Fprintln(c.stderr, "warning: "+w)
	}
	out, err := config.MarshalYAML(opts.Config)
	if err != nil {
		fmt.Fprintf(c.stderr, "heartlet: %v\n", err)
		return 1
	}
	if _, err := c.stdout.Write(out); err != nil {
		return 1
	}
	return 0
}

// ignoredWarning is logged at start with the configuration fields that
// heartlet does not act on and that are set to other than their defaults.
const ignoredWarning = "Warning: these configuration fields are not acted on by heartlet and are ignored"

// serve runs the node agent until SIGINT or SIGTERM.
func (c *command) serve(ctx context.Context, args []string) int {
	opts, code, ok := c.load(args)
	if !ok {
		return code
	}
	flushLogs, err := initLogging(opts, os.Stderr)
	if err != nil {
		fmt.Fprintf(c.stderr, "heartlet: %v\n", err)
		return 1
	}
	defer flushLogs()
	ctx, stop := c.signalContext(ctx)
	defer stop()
	info := version.Get()
	klog.InfoS("Starting heartlet", "version", info.Version, "gitCommit", info.GitCommit, "gitTreeState", info.GitTreeState, "node", opts.NodeName, "config", opts.ConfigFile)
	if len(opts.Ignored) > 0 {
		klog.InfoS(ignoredWarning, "fields", config.IgnoredList(opts.Ignored))
	}
	for _, w := range opts.Warnings {
		klog.InfoS("Configuration warning", "warning", w)
	}
	err = c.runAgent(ctx, opts)
	if err != nil && !(ctx.Err() != nil && errors.Is(err, context.Canceled)) {
		fmt.Fprintf(c.stderr, "heartlet: %v\n", err)
		return 1
	}
	klog.InfoS("Heartlet stopped")
	return 0
}

// signalContext returns a context cancelled by the first SIGINT or SIGTERM;
// a second one exits the process at once. stop releases the signals.
func (c *command) signalContext(parent context.Context) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(parent)
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-signals:
			klog.InfoS("Shutting down on signal, send another to exit at once", "signal", s.String())
			cancel()
		case <-done:
			return
		}
		select {
		case s := <-signals:
			klog.InfoS("Exiting at once on second signal", "signal", s.String())
			c.exit(1)
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(signals)
		close(done)
		cancel()
	}
}
