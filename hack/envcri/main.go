// Command envcri is the CRI client of hack/env.sh: it checks that the
// environment's containerd answers, removes every pod sandbox and container
// it holds, and counts them. It is built from this module, so hack/run.sh
// needs no separate CRI tool (building crictl took minutes on a fresh
// machine; this shares heartlet's dependencies and builds in seconds).
//
// Usage: envcri -endpoint unix:///path ready|clean|count
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	criapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/heartlet/heartlet/internal/criclient"
)

func main() {
	endpoint := flag.String("endpoint", "", "the CRI endpoint, unix:///path")
	timeout := flag.Duration("timeout", 30*time.Second, "timeout of each CRI call")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: envcri -endpoint unix:///path ready|clean|count")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *endpoint == "" || flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := run(ctx, *endpoint, *timeout, flag.Arg(0)); err != nil {
		fmt.Fprintln(os.Stderr, "envcri:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, endpoint string, timeout time.Duration, cmd string) error {
	rs, err := criclient.NewRuntimeService(ctx, endpoint, timeout)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", endpoint, err)
	}
	defer func() { _ = rs.Close(ctx) }()
	switch cmd {
	case "ready":
		_, err := rs.Version(ctx, "v1")
		return err
	case "clean":
		return clean(ctx, rs)
	case "count":
		pods, err := rs.ListPodSandbox(ctx, nil)
		if err != nil {
			return fmt.Errorf("list pod sandboxes: %w", err)
		}
		ctrs, err := rs.ListContainers(ctx, nil)
		if err != nil {
			return fmt.Errorf("list containers: %w", err)
		}
		fmt.Printf("%d pods, %d containers\n", len(pods), len(ctrs))
		return nil
	default:
		return fmt.Errorf("unknown command %q (want ready, clean or count)", cmd)
	}
}

// clean stops and removes every pod sandbox, so that CNI DEL runs and
// releases addresses and iptables rules, then removes the containers left.
// It carries on past a failure and returns all of them.
func clean(ctx context.Context, rs criapi.RuntimeService) error {
	pods, err := rs.ListPodSandbox(ctx, nil)
	if err != nil {
		return fmt.Errorf("list pod sandboxes: %w", err)
	}
	var errs []error
	for _, p := range pods {
		if err := rs.StopPodSandbox(ctx, p.Id); err != nil {
			errs = append(errs, fmt.Errorf("stop pod sandbox %s: %w", p.Id, err))
		}
		if err := rs.RemovePodSandbox(ctx, p.Id); err != nil {
			errs = append(errs, fmt.Errorf("remove pod sandbox %s: %w", p.Id, err))
		}
	}
	ctrs, err := rs.ListContainers(ctx, &runtimeapi.ContainerFilter{})
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("list containers: %w", err))...)
	}
	for _, c := range ctrs {
		if err := rs.RemoveContainer(ctx, c.Id); err != nil {
			errs = append(errs, fmt.Errorf("remove container %s: %w", c.Id, err))
		}
	}
	return errors.Join(errs...)
}
