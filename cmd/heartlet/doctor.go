package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"

	"github.com/heartlet/heartlet/internal/config"
	"github.com/heartlet/heartlet/internal/doctor"
)

const doctorUsage = `heartlet doctor checks this node as heartlet would run on it, with the same
flags and --config, and prints one line per finding: ok, warning or error,
what was found and how to fix it. It changes nothing. The exit status is 1
when any check reports an error.

Usage:
  heartlet doctor [doctor flags] [heartlet flags]

Doctor flags:
      --output string                   text or json (default "text")
      --timeout duration                bound of each check (default 15s)
      --cni-conf-dir string             CNI configuration directory (default: the runtime's, else /etc/cni/net.d)
      --cni-bin-dir string              CNI plugin directories, colon-separated (default: the runtime's, else /opt/cni/bin)
      --apiserver-kubelet-user string   user of the API server's kubelet client certificate (default "kube-apiserver-kubelet-client")

Heartlet flags:
`

// doctorFlags are the flags of heartlet doctor that heartlet itself does
// not have.
type doctorFlags struct {
	output        string
	timeout       time.Duration
	cniConfDir    string
	cniBinDirs    []string
	apiserverUser string
}

// splitDoctorFlags takes doctor's own flags (--name value or --name=value)
// out of args and returns the rest, heartlet's flags.
func splitDoctorFlags(args []string) (doctorFlags, []string, error) {
	f := doctorFlags{output: "text", timeout: doctor.DefaultTimeout}
	set := map[string]func(string) error{
		"output": func(v string) error {
			if v != "text" && v != "json" {
				return fmt.Errorf("--output %q: want text or json", v)
			}
			f.output = v
			return nil
		},
		"timeout": func(v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return fmt.Errorf("--timeout %q: want a positive duration such as 15s", v)
			}
			f.timeout = d
			return nil
		},
		"cni-conf-dir": func(v string) error { f.cniConfDir = v; return nil },
		"cni-bin-dir": func(v string) error {
			f.cniBinDirs = strings.Split(v, ":")
			return nil
		},
		"apiserver-kubelet-user": func(v string) error { f.apiserverUser = v; return nil },
	}
	var rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			rest = append(rest, args[i:]...)
			break
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		apply, ok := set[name]
		if !ok || !strings.HasPrefix(a, "-") {
			rest = append(rest, a)
			continue
		}
		if !hasValue {
			if i+1 >= len(args) {
				return f, nil, fmt.Errorf("--%s needs a value", name)
			}
			i++
			value = args[i]
		}
		if err := apply(value); err != nil {
			return f, nil, err
		}
	}
	return f, rest, nil
}

// doctor runs heartlet doctor; see doctorUsage.
func (c *command) doctor(ctx context.Context, args []string) int {
	flags, args, err := splitDoctorFlags(args)
	if err != nil {
		fmt.Fprintf(c.stderr, "heartlet doctor: %v\n", err)
		return 1
	}
	opts, err := config.Load(args)
	switch {
	case errors.Is(err, config.ErrHelp):
		fmt.Fprint(c.stdout, doctorUsage+config.FlagUsages())
		return 0
	case errors.Is(err, config.ErrVersion):
		c.printVersion()
		return 0
	}
	var lines []doctor.Line
	if err != nil {
		// Nothing else can be checked without a configuration.
		for _, msg := range strings.Split(strings.TrimSpace(err.Error()), "\n") {
			lines = append(lines, doctor.Line{Check: "config", Result: doctor.Result{Level: doctor.Error, Found: msg,
				Fix: "correct the configuration (heartlet validate --config FILE shows every problem)"}})
		}
	} else {
		in := doctor.NewInputs(opts, flags.timeout)
		in.CNIConfDir, in.CNIBinDirs, in.APIServerKubeletUser = flags.cniConfDir, flags.cniBinDirs, flags.apiserverUser
		// The clients' own logs would interleave with the report.
		ctx = klog.NewContext(ctx, logr.Discard())
		lines = doctor.Run(ctx, doctor.Checks(in), flags.timeout)
	}
	write := doctor.WriteText
	if flags.output == "json" {
		write = doctor.WriteJSON
	}
	if err := write(c.stdout, lines); err != nil {
		fmt.Fprintf(c.stderr, "heartlet doctor: %v\n", err)
		return 1
	}
	if doctor.Failed(lines) {
		return 1
	}
	return 0
}
