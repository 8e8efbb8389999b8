package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/heartlet/heartlet/internal/config"
	"github.com/heartlet/heartlet/internal/doctor"
	"github.com/heartlet/heartlet/internal/kubeclient"
	"github.com/heartlet/heartlet/internal/kubeletsetup"
	"github.com/heartlet/heartlet/internal/runtime"
	"github.com/heartlet/heartlet/internal/version"
)

const fromKubeletUsage = `heartlet validate --from-kubelet reads how the kubelet is set up on this node
(the running kubelet's command line, else the one kubeadm's systemd unit
kubelet.service and its drop-ins would start, with their environment files)
and lists what heartlet would do differently with the same flags,
configuration and root directory: flags and fields it does not act on,
feature gates, the cgroup driver against the runtime's, pods using pod
fields it refuses or does not honour, kubelet state files it ignores and
image credential providers. It changes nothing. The exit status is 1 when
something would break pods or keep heartlet from starting, 0 otherwise
(warnings included).

Usage:
  heartlet validate --from-kubelet [flags]

Flags:
      --root string        the node's / (default "/"): read the node's files under this directory
      --output string      text or json (default "text")
      --timeout duration   bound of each check (default 15s)
`

// hasFromKubelet says whether validate's arguments ask for
// --from-kubelet.
func hasFromKubelet(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a == "--from-kubelet" || a == "-from-kubelet" || strings.HasPrefix(a, "--from-kubelet=") {
			return true
		}
	}
	return false
}

type fromKubeletFlags struct {
	root    string
	output  string
	timeout time.Duration
	help    bool
}

func parseFromKubeletFlags(args []string) (fromKubeletFlags, error) {
	f := fromKubeletFlags{root: "/", output: "text", timeout: doctor.DefaultTimeout}
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") {
			return f, fmt.Errorf("unexpected argument %q: the kubelet's flags are read from the node", a)
		}
		switch name {
		case "from-kubelet":
			if hasValue && value != "true" {
				return f, fmt.Errorf("--from-kubelet takes no value")
			}
			continue
		case "help", "h":
			f.help = true
			continue
		case "root", "output", "timeout":
		default:
			return f, fmt.Errorf("unknown flag %s: validate --from-kubelet reads the kubelet's flags from the node and takes only --root, --output and --timeout", a)
		}
		if !hasValue {
			if i+1 >= len(args) {
				return f, fmt.Errorf("--%s needs a value", name)
			}
			i++
			value = args[i]
		}
		switch name {
		case "root":
			f.root = value
		case "output":
			if value != "text" && value != "json" {
				return f, fmt.Errorf("--output %q: want text or json", value)
			}
			f.output = value
		case "timeout":
			d, err := time.ParseDuration(value)
			if err != nil || d <= 0 {
				return f, fmt.Errorf("--timeout %q: want a positive duration such as 15s", value)
			}
			f.timeout = d
		}
	}
	return f, nil
}

// fromKubelet runs heartlet validate --from-kubelet; see fromKubeletUsage.
func (c *command) fromKubelet(ctx context.Context, args []string) int {
	flags, err := parseFromKubeletFlags(args)
	if err != nil {
		fmt.Fprintf(c.stderr, "heartlet validate: %v\n", err)
		return 1
	}
	if flags.help {
		fmt.Fprint(c.stdout, fromKubeletUsage)
		return 0
	}
	node := kubeletsetup.Node{Root: flags.root, Self: os.Getpid()}
	src, err := node.Discover()
	if err != nil {
		fmt.Fprintf(c.stderr, "heartlet validate: reading the kubelet's set-up: %v\n", err)
		return 1
	}
	// The clients' own logs would interleave with the report.
	ctx = klog.NewContext(ctx, logr.Discard())
	lines := kubeletsetup.Report(ctx, kubeletsetup.Inputs{
		Node:   node,
		Source: src,
		ConnectRuntime: func(ctx context.Context, opts *config.Options) (kubeletsetup.Runtime, error) {
			rt, err := runtime.New(ctx, opts.Config.ContainerRuntimeEndpoint, flags.timeout, runtime.WithImageEndpoint(opts.Config.ImageServiceEndpoint))
			if err != nil {
				return nil, err
			}
			return rt, nil
		},
		Pods: func(ctx context.Context, opts *config.Options) ([]v1.Pod, error) {
			return nodePods(ctx, node.Path(opts.Kubeconfig), opts.NodeName)
		},
	}, flags.timeout)
	write := doctor.WriteText
	if flags.output == "json" {
		write = doctor.WriteJSON
	}
	if err := write(c.stdout, lines); err != nil {
		fmt.Fprintf(c.stderr, "heartlet validate: %v\n", err)
		return 1
	}
	if doctor.Failed(lines) {
		return 1
	}
	return 0
}

// nodePods lists the pods bound to node with the kubeconfig.
func nodePods(ctx context.Context, kubeconfig, node string) ([]v1.Pod, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	cfg.UserAgent = version.UserAgent()
	cs, err := kubeclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	list, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()})
	if err != nil {
		return nil, fmt.Errorf("list the pods of node %s: %w", node, err)
	}
	return list.Items, nil
}
