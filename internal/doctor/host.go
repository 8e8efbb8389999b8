package doctor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/client-go/rest"

	"github.com/heartlet/heartlet/internal/config"
	"github.com/heartlet/heartlet/internal/kubeclient"
	"github.com/heartlet/heartlet/internal/runtime"
	"github.com/heartlet/heartlet/internal/version"
)

// MachineHost reads this machine.
func MachineHost() Host {
	return Host{
		ReadFile:    os.ReadFile,
		ReadDir:     os.ReadDir,
		Stat:        os.Stat,
		Statfs:      statfs,
		Listen:      net.Listen,
		Now:         time.Now,
		CgroupRoot:  "/sys/fs/cgroup",
		ProcCgroups: "/proc/cgroups",
		Swaps:       "/proc/swaps",
	}
}

func statfs(path string) (FsStats, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return FsStats{}, fmt.Errorf("statfs %s: %w", path, err)
	}
	bsize := uint64(st.Bsize)
	return FsStats{
		TotalBytes:     st.Blocks * bsize,
		AvailableBytes: st.Bavail * bsize,
		TotalInodes:    st.Files,
		FreeInodes:     st.Ffree,
	}, nil
}

// NewInputs returns the inputs of a check of this machine with opts: the
// API server and runtime are reached as heartlet reaches them, each
// request bounded by timeout.
func NewInputs(opts *config.Options, timeout time.Duration) Inputs {
	in := Inputs{
		Opts: opts,
		Host: MachineHost(),
		ConnectRuntime: func(ctx context.Context) (Runtime, error) {
			rt, err := runtime.New(ctx, opts.Config.ContainerRuntimeEndpoint, timeout, runtime.WithImageEndpoint(opts.Config.ImageServiceEndpoint))
			if err != nil {
				return nil, err
			}
			return rt, nil
		},
	}
	if opts.Kubeconfig != "" {
		in.Connect = func(ctx context.Context) (*API, error) {
			return connect(ctx, opts, timeout)
		}
	}
	return in
}

// connect loads the kubeconfig with heartlet's client settings and checks
// the server with heartlet's start checks.
func connect(ctx context.Context, opts *config.Options, timeout time.Duration) (*API, error) {
	path, bootstrap, err := kubeconfigToUse(opts, os.Stat)
	if err != nil {
		return nil, err
	}
	cl, err := kubeclient.Load(ctx, kubeclient.Options{
		Kubeconfig:       path,
		UserAgent:        version.UserAgent(),
		ContentType:      opts.Config.ContentType,
		PreflightTimeout: timeout,
	})
	if err != nil {
		return nil, err
	}
	api := &API{
		Kube:          cl.Kube,
		Kubeconfig:    cl.Path,
		Server:        cl.Server,
		Identity:      cl.Identity,
		ServerVersion: cl.ServerVersion,
		Bootstrap:     bootstrap,
	}
	switch {
	case len(cl.Rest.CertData) > 0:
		api.ClientCert, api.ClientCertSource = cl.Rest.CertData, "in "+cl.Path
	case cl.Rest.CertFile != "":
		if data, err := os.ReadFile(cl.Rest.CertFile); err == nil {
			api.ClientCert, api.ClientCertSource = data, cl.Rest.CertFile
		}
	}
	api.ServerTime = func(ctx context.Context) (time.Time, time.Time, time.Time, error) {
		return serverTime(ctx, cl.Rest)
	}
	return api, nil
}

// kubeconfigToUse is the kubeconfig heartlet would reach the API server
// with at start: --kubeconfig, or --bootstrap-kubeconfig (bootstrap true)
// when that is set and --kubeconfig does not exist yet.
func kubeconfigToUse(opts *config.Options, stat func(string) (fs.FileInfo, error)) (path string, bootstrap bool, err error) {
	if opts.BootstrapKubeconfig == "" {
		return opts.Kubeconfig, false, nil
	}
	_, err = stat(opts.Kubeconfig)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return opts.BootstrapKubeconfig, true, nil
	case err != nil:
		return "", false, fmt.Errorf("kubeconfig (--kubeconfig) %s: %w", opts.Kubeconfig, err)
	}
	return opts.Kubeconfig, false, nil
}

// serverTime reads the Date header of the API server's answer to GET
// /version.
func serverTime(ctx context.Context, cfg *rest.Config) (server, sent, received time.Time, err error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return server, sent, received, fmt.Errorf("building an HTTP client: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+"/version", nil)
	if err != nil {
		return server, sent, received, fmt.Errorf("building the request: %w", err)
	}
	sent = time.Now()
	resp, err := hc.Do(req)
	received = time.Now()
	if err != nil {
		return server, sent, received, fmt.Errorf("GET /version: %w", err)
	}
	_ = resp.Body.Close()
	date := resp.Header.Get("Date")
	if date == "" {
		return server, sent, received, fmt.Errorf("GET /version: no Date header (HTTP %d)", resp.StatusCode)
	}
	server, err = http.ParseTime(date)
	if err != nil {
		return server, sent, received, fmt.Errorf("GET /version: Date header %q: %w", date, err)
	}
	return server, sent, received, nil
}
