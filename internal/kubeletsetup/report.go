package kubeletsetup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/heartlet/heartlet/internal/config"
	"github.com/heartlet/heartlet/internal/doctor"
	"github.com/heartlet/heartlet/internal/podfields"
	"github.com/heartlet/heartlet/internal/podsource/file"
	"github.com/heartlet/heartlet/internal/podsource/manifest"
	"github.com/heartlet/heartlet/internal/runtime"
)

// Runtime is what the report asks the CRI runtime; *runtime.Runtime has
// it.
type Runtime interface {
	doctor.Runtime
	// ListPods returns the pods the runtime has sandboxes or containers
	// of, by their io.kubernetes.pod.* labels.
	ListPods(ctx context.Context) ([]*runtime.PodStatus, error)
}

var _ Runtime = (*runtime.Runtime)(nil)

// Inputs are what Report compares.
type Inputs struct {
	Node   Node
	Source *Source
	// ConnectRuntime reaches the CRI runtime of the loaded configuration;
	// nil leaves out what needs it.
	ConnectRuntime func(ctx context.Context, opts *config.Options) (Runtime, error)
	// Pods lists the API server's pods bound to the node, with the
	// kubeconfig of the loaded configuration; nil when there is no way
	// to reach the API server.
	Pods func(ctx context.Context, opts *config.Options) ([]v1.Pod, error)
}

// The checks' names, as printed.
const (
	checkKubelet      = "kubelet"
	checkFlags        = "flags"
	checkConfig       = "config"
	checkFeatureGates = "feature-gates"
	checkCgroupDriver = "cgroup-driver"
	checkPods         = "pods"
	checkState        = "state"
	checkCredentials  = "credential-providers"
)

// fileFlags are the flags whose files config.Load reads itself: on a node
// under Root they are rewritten to the files under Root.
var fileFlags = map[string]bool{"config": true, "config-dir": true, "image-credential-provider-config": true, "image-credential-provider-bin-dir": true}

// LoadArgs is the kubelet's command line as heartlet loads it on this
// node: the files config.Load reads are taken under Root.
func (n Node) LoadArgs(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || !fileFlags[name] {
			out = append(out, a)
			continue
		}
		if !hasValue {
			out = append(out, a)
			if i+1 < len(args) {
				i++
				out = append(out, n.Path(args[i]))
			}
			continue
		}
		out = append(out, "--"+name+"="+n.Path(value))
	}
	return out
}

// Report loads the kubelet's command line as heartlet would and lists
// what heartlet would do differently on this node, one line per finding:
// an error for what would break pods or keep heartlet from starting, a
// warning for what heartlet does not act on. Each check is bounded by
// timeout.
func Report(ctx context.Context, in Inputs, timeoutEach time.Duration) []doctor.Line {
	lines := []doctor.Line{{Check: checkKubelet, Result: doctor.Result{Level: doctor.OK,
		Found: fmt.Sprintf("%s: %s", in.Source.From, strings.Join(append([]string{in.Source.Program}, in.Source.Args...), " "))}}}
	opts, err := config.Load(in.Node.LoadArgs(in.Source.Args))
	if errors.Is(err, config.ErrHelp) || errors.Is(err, config.ErrVersion) {
		err = fmt.Errorf("the command line asks for --help or --version, not to run")
	}
	if err != nil {
		for _, msg := range strings.Split(strings.TrimSpace(err.Error()), "\n") {
			lines = append(lines, doctor.Line{Check: checkFlags, Result: doctor.Result{Level: doctor.Error, Found: msg,
				Fix: "heartlet refuses to start with this command line: change the flag or configuration field named (heartlet validate --config FILE shows every problem of a file)"}})
		}
		return lines
	}
	r := reporter{in: in, opts: opts}
	if in.ConnectRuntime != nil {
		r.connectRuntime = doctor.Memo(func(ctx context.Context) (Runtime, error) { return in.ConnectRuntime(ctx, opts) })
	}
	checks := []doctor.Check{
		{Name: checkFlags, Run: r.flags},
		{Name: checkConfig, Run: r.config},
		{Name: checkFeatureGates, Run: r.featureGates},
		{Name: checkCgroupDriver, Run: r.cgroupDriver},
		{Name: checkPods, Run: r.pods},
		{Name: checkState, Run: r.state},
		{Name: checkCredentials, Run: r.credentialProviders},
	}
	return append(lines, doctor.Run(ctx, checks, timeoutEach)...)
}

type reporter struct {
	in             Inputs
	opts           *config.Options
	connectRuntime func(ctx context.Context) (Runtime, error)
}

func ok(format string, args ...any) doctor.Result {
	return doctor.Result{Level: doctor.OK, Found: fmt.Sprintf(format, args...)}
}

func warn(fix, format string, args ...any) doctor.Result {
	return doctor.Result{Level: doctor.Warning, Found: fmt.Sprintf(format, args...), Fix: fix}
}

func fail(fix, format string, args ...any) doctor.Result {
	return doctor.Result{Level: doctor.Error, Found: fmt.Sprintf(format, args...), Fix: fix}
}

func skip(format string, args ...any) doctor.Result {
	return doctor.Result{Level: doctor.Skipped, Found: fmt.Sprintf(format, args...)}
}

// flags lists what config.Load warned about: flags heartlet accepts and
// does not act on, deprecated flags, skipped drop-in files.
func (r reporter) flags(context.Context) []doctor.Result {
	if len(r.opts.Warnings) == 0 {
		return []doctor.Result{ok("heartlet accepts every flag of the command line (%d arguments)", len(r.in.Source.Args))}
	}
	var rs []doctor.Result
	for _, w := range r.opts.Warnings {
		rs = append(rs, warn("nothing breaks; leave the flag out if you rely on what it does", "%s", w))
	}
	return rs
}

// config lists the configuration fields set to other than their default
// that heartlet does not act on (feature gates are their own check).
func (r reporter) config(context.Context) []doctor.Result {
	notes := map[string]string{}
	for _, f := range config.Fields {
		notes[f.Path] = f.Note
	}
	var rs []doctor.Result
	for _, ig := range r.opts.Ignored {
		if ig.Path == "featureGates" {
			continue
		}
		from := "the configuration file"
		if ig.Flag != "" {
			from = ig.Flag
		}
		rs = append(rs, warn("the kubelet acts on it here and heartlet will not: accept that, or leave the field at its default",
			"%s = %s (from %s): heartlet does not act on it: %s", ig.Path, ig.Value, from, notes[ig.Path]))
	}
	if len(rs) == 0 {
		src := "flags only"
		if r.opts.ConfigFile != "" {
			src = r.opts.ConfigFile
		}
		return []doctor.Result{ok("heartlet acts on every field set (%s)", src)}
	}
	return rs
}

// featureGates lists the gates set to other than the upstream default:
// heartlet acts on none, so the node would run as with the defaults.
func (r reporter) featureGates(context.Context) []doctor.Result {
	names := make([]string, 0, len(r.opts.Config.FeatureGates))
	for name := range r.opts.Config.FeatureGates {
		names = append(names, name)
	}
	sort.Strings(names)
	var rs []doctor.Result
	for _, name := range names {
		v := r.opts.Config.FeatureGates[name]
		if def, known := config.FeatureGateDefault(name); known && def == v {
			continue
		}
		rs = append(rs, warn("check that nothing on the node relies on the gate's behaviour",
			"%s=%t is set, the upstream default is %t: heartlet acts on no feature gate and behaves as with the default", name, v, !v))
	}
	if len(rs) == 0 {
		return []doctor.Result{ok("no feature gate is set to other than its default")}
	}
	return rs
}

// cgroupDriver is doctor's comparison of the configured cgroup driver with
// the runtime's.
func (r reporter) cgroupDriver(ctx context.Context) []doctor.Result {
	if r.connectRuntime == nil {
		return []doctor.Result{skip("no container runtime to ask")}
	}
	in := doctor.Inputs{Opts: r.opts, ConnectRuntime: func(ctx context.Context) (doctor.Runtime, error) { return r.connectRuntime(ctx) }}
	for _, c := range doctor.Checks(in) {
		if c.Name == "cgroup-driver" {
			return c.Run(ctx)
		}
	}
	return []doctor.Result{skip("doctor has no cgroup-driver check")}
}

// podRef names a pod in the report.
func podRef(p *v1.Pod) string { return p.Namespace + "/" + p.Name }

// pods checks every pod of the node against heartlet's pod field table:
// the static pods of staticPodPath, and the pods the runtime runs (found
// through the API server by UID). A field heartlet refuses is an error
// (heartlet would fail the pod and stop its containers), one it does not
// honour yet a warning.
func (r reporter) pods(ctx context.Context) []doctor.Result {
	var rs []doctor.Result
	var feat podfields.Features
	var running []*runtime.PodStatus
	runtimeNote := ""
	if r.connectRuntime == nil {
		runtimeNote = "no container runtime to ask"
	} else if rt, err := r.connectRuntime(ctx); err != nil {
		runtimeNote = fmt.Sprintf("the runtime is not reachable: %v", err)
	} else {
		if st, err := rt.StatusInfo(ctx); err == nil {
			feat = podfields.FeaturesOf(st)
		}
		if v, err := rt.Version(ctx); err == nil {
			feat.ImageVolumes = podfields.ImageVolumesOf(v)
		}
		if running, err = rt.ListPods(ctx); err != nil {
			runtimeNote = fmt.Sprintf("listing the runtime's pods: %v", err)
			running = nil
		}
	}
	checked := map[types.UID]bool{}
	static, srs := r.staticPods()
	rs = append(rs, srs...)
	var apiPods []v1.Pod
	apiNote := ""
	if r.in.Pods == nil || r.opts.Kubeconfig == "" {
		apiNote = "no API server (--kubeconfig) to read their specs from"
	} else if list, err := r.in.Pods(ctx, r.opts); err != nil {
		apiNote = fmt.Sprintf("reading the node's pods from the API server: %v", err)
	} else {
		apiPods = list
	}
	all := static
	for i := range apiPods {
		all = append(all, &apiPods[i])
	}
	refused, warned := 0, 0
	for _, p := range all {
		if checked[p.UID] {
			continue
		}
		checked[p.UID] = true
		refusals, warnings := podfields.Check(p, feat)
		if len(refusals) > 0 {
			refused++
			rs = append(rs, fail("change the pod so it does not use the field, or keep the kubelet on this node",
				"pod %s uses fields heartlet refuses: heartlet would fail it and stop its containers: %s", podRef(p), podfields.Message(refusals)))
		}
		if len(warnings) > 0 {
			warned++
			rs = append(rs, warn("check that the pod does not rely on the field",
				"pod %s uses fields heartlet does not honour yet: %s", podRef(p), podfields.Message(warnings)))
		}
	}
	var unchecked []string
	for _, p := range running {
		if !checked[p.UID] && p.UID != "" {
			unchecked = append(unchecked, p.Namespace+"/"+p.Name)
		}
	}
	if len(unchecked) > 0 {
		reason := apiNote
		if reason == "" {
			reason = "they are neither static pods nor bound to this node in the API server"
		}
		rs = append(rs, warn("give the kubelet's --kubeconfig (readable) so their specs can be read, or check them by hand",
			"%d pods the runtime runs could not be checked (%s): %s", len(unchecked), reason, strings.Join(unchecked, ", ")))
	}
	if runtimeNote != "" {
		rs = append(rs, skip("pods the runtime runs: %s", runtimeNote))
	}
	if refused == 0 && warned == 0 {
		rs = append(rs, ok("%d pods checked (%d static, %d from the API server, %d running in the runtime): none uses a field heartlet refuses or does not honour",
			len(checked), len(static), len(apiPods), len(running)))
	}
	return rs
}

// staticPods decodes the manifests of staticPodPath as heartlet would.
func (r reporter) staticPods() ([]*v1.Pod, []doctor.Result) {
	dir := r.opts.Config.StaticPodPath
	if dir == "" {
		return nil, nil
	}
	path := r.in.Node.Path(dir)
	fi, err := os.Stat(path)
	if err != nil {
		return nil, []doctor.Result{fail("create the directory, or leave staticPodPath out", "staticPodPath %s: %v: heartlet does not start without it", dir, err)}
	}
	var names []string
	base := path
	if fi.IsDir() {
		entries, err := os.ReadDir(path)
		if err != nil {
			return nil, []doctor.Result{fail("make it readable", "staticPodPath %s: %v", dir, err)}
		}
		for _, e := range entries {
			if !strings.HasPrefix(e.Name(), ".") {
				names = append(names, e.Name())
			}
		}
	} else {
		base, names = filepath.Dir(path), []string{filepath.Base(path)}
		dir = filepath.Dir(dir)
	}
	var pods []*v1.Pod
	var rs []doctor.Result
	for _, name := range names {
		p := filepath.Join(base, name)
		if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
			continue
		}
		data, err := readLimited(p, maxManifest)
		if err != nil {
			rs = append(rs, fail("make the manifest readable", "static pod manifest %s: %v", name, err))
			continue
		}
		// The origin is the path on the node: it is part of the UID.
		pod, err := manifest.Parse(data, manifest.Options{NodeName: r.opts.NodeName, Origin: filepath.Join(dir, name), Source: file.SourceName})
		if err != nil {
			rs = append(rs, fail("correct the manifest (heartlet reads it as the kubelet does, unknown fields aside)",
				"static pod manifest %s: heartlet rejects it: %v", filepath.Join(dir, name), err))
			continue
		}
		pods = append(pods, pod)
	}
	return pods, rs
}

// maxManifest bounds a static pod manifest, as the file source does.
const maxManifest = 10 << 20

// state lists the kubelet's state files in the root directory that
// heartlet does not read.
func (r reporter) state(context.Context) []doctor.Result {
	root := r.opts.RootDir
	var rs []doctor.Result
	if data, err := readLimited(r.in.Node.Path(filepath.Join(root, "cpu_manager_state")), 1<<20); err == nil {
		policy := jsonString(data, "policyName")
		if policy != "" && policy != "none" {
			rs = append(rs, warn("nothing to do for running containers; pods started by heartlet get no exclusive CPUs",
				"%s/cpu_manager_state: CPU manager policy %q; heartlet has no CPU manager: it neither reads nor keeps the CPU assignments (running containers keep their cpusets until updated)", root, policy))
		}
	}
	if data, err := readLimited(r.in.Node.Path(filepath.Join(root, "memory_manager_state")), 1<<20); err == nil {
		policy := jsonString(data, "policyName")
		if policy != "" && !strings.EqualFold(policy, "none") {
			rs = append(rs, warn("nothing to do for running containers; pods started by heartlet get no NUMA memory pinning",
				"%s/memory_manager_state: memory manager policy %q; heartlet has no memory manager and ignores the assignments", root, policy))
		}
	}
	if _, err := os.Stat(r.in.Node.Path(filepath.Join(root, "dra_manager_state"))); err == nil {
		rs = append(rs, warn("pods with resourceClaims are refused by heartlet (see pods)",
			"%s/dra_manager_state: the kubelet has prepared dynamic resources; heartlet has no DRA support and ignores it", root))
	}
	if entries, err := os.ReadDir(r.in.Node.Path(filepath.Join(root, "device-plugins"))); err == nil {
		var plugins []string
		for _, e := range entries {
			if n := e.Name(); n != "kubelet.sock" && e.Type()&fs.ModeSocket != 0 {
				plugins = append(plugins, n)
			}
		}
		if len(plugins) > 0 {
			rs = append(rs, warn("keep the kubelet on nodes whose pods use device plugin resources",
				"%s/device-plugins: device plugins registered (%s); heartlet has no device plugin manager: the node would not advertise their resources and pods asking for them would not be admitted", root, strings.Join(plugins, ", ")))
		}
	}
	if len(rs) == 0 {
		return []doctor.Result{ok("%s has no CPU manager, memory manager, DRA or device plugin state heartlet would ignore", root)}
	}
	return rs
}

// credentialProviders lists the image credential providers heartlet
// would run, as the kubelet does: config.Load has checked the
// configuration and that each provider's program is in
// --image-credential-provider-bin-dir.
func (r reporter) credentialProviders(context.Context) []doctor.Result {
	cp := r.opts.CredentialProviders
	if cp == nil {
		return []doctor.Result{ok("no image credential providers (--image-credential-provider-config)")}
	}
	var rs []doctor.Result
	for _, p := range cp.Providers {
		rs = append(rs, ok("credential provider %s for %s: heartlet runs it as the kubelet does", p.Name, strings.Join(p.MatchImages, ", ")))
	}
	return rs
}

// jsonString is the string field key of a JSON object, "" when data is
// not such an object.
func jsonString(data []byte, key string) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(data, &m) != nil {
		return ""
	}
	var s string
	if json.Unmarshal(m[key], &s) != nil {
		return ""
	}
	return s
}
