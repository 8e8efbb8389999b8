// Package config loads, defaults and validates heartlet's configuration: a
// KubeletConfiguration file (kubelet.config.k8s.io/v1beta1) plus the
// kubelet's command-line flags that override it.
package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	cliflag "k8s.io/component-base/cli/flag"
	logsapi "k8s.io/component-base/logs/api/v1"
	kubeletconfigv1 "k8s.io/kubelet/config/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// Options is the effective configuration of one heartlet process: the
// defaulted and validated KubeletConfiguration with flag overrides applied,
// plus the flag-only settings.
type Options struct {
	// Config is the effective KubeletConfiguration.
	Config *kubeletv1beta1.KubeletConfiguration
	// ConfigFile is the path given with --config ("" when none).
	ConfigFile string
	// Kubeconfig is --kubeconfig; "" means standalone mode.
	Kubeconfig string
	// BootstrapKubeconfig is --bootstrap-kubeconfig: when Kubeconfig does
	// not exist or its client certificate is not valid, a client
	// certificate is asked for with these credentials and Kubeconfig is
	// written (TLS bootstrap).
	BootstrapKubeconfig string
	// RootDir is --root-dir (default /var/lib/kubelet), made absolute.
	RootDir string
	// CertDir is --cert-dir (default <RootDir>/pki), made absolute: where
	// the self-signed serving certificate kubelet.crt/kubelet.key lives
	// when tlsCertFile and tlsPrivateKeyFile are not given, and the pairs
	// from signing requests (kubelet-client-*.pem, kubelet-server-*.pem).
	CertDir string
	// NodeLabels is --node-labels: labels set when the Node is registered.
	NodeLabels map[string]string
	// HostnameOverride is --hostname-override.
	HostnameOverride string
	// NodeIPs are the parsed --node-ip addresses (may be empty).
	NodeIPs []string
	// NodeName is the effective node name: the lower-cased hostname
	// override, or the machine's hostname.
	NodeName string
	// Verbosity is --v (or logging.verbosity from the file).
	Verbosity int
	// LogFile is where heartlet's own log goes: --log-file, or
	// <--log-dir>/heartlet.log; "" means standard error.
	LogFile string
	// LogFileMaxSizeMB is --log-file-max-size: the size in megabytes at
	// which LogFile is rotated; 0 means never.
	LogFileMaxSizeMB int
	// PLEGRelistPeriod is --pleg-relist-period (hidden): the time between
	// two relists of the runtime's pods; 0 means the PLEG's default.
	PLEGRelistPeriod time.Duration
	// ImageCredentialProviderConfig and ImageCredentialProviderBinDir are
	// --image-credential-provider-config and
	// --image-credential-provider-bin-dir, made absolute; CredentialProviders
	// is the validated configuration of the first (nil when not given).
	ImageCredentialProviderConfig string
	ImageCredentialProviderBinDir string
	CredentialProviders           *kubeletconfigv1.CredentialProviderConfig
	// EvictionMemorySignal is --eviction-memory-signal, heartlet's own:
	// how memory.available is computed, EvictionMemoryWorkingSet
	// (upstream's, the default) or EvictionMemoryReclaimable.
	EvictionMemorySignal string
	// LockFile is --lock-file, made absolute ("" when none): heartlet holds
	// an exclusive flock on it while it runs.
	LockFile string
	// ExitOnLockContention is --exit-on-lock-contention: heartlet exits
	// when another process opens LockFile.
	ExitOnLockContention bool
	// ConfigDir is --config-dir, made absolute ("" when none).
	ConfigDir string
	// Warnings are said once at start and by heartlet validate: flags
	// heartlet accepts but does not act on, deprecated flags and the field
	// that replaces them, drop-in files skipped.
	Warnings []string
	// Ignored are the fields heartlet does not act on (yet) that the file
	// or a flag set to a value other than the default; IgnoredMessage
	// words the warning.
	Ignored []Ignored
}

// The values of --eviction-memory-signal.
const (
	EvictionMemoryWorkingSet   = "workingset"
	EvictionMemoryReclaimable  = "reclaimable"
	evictionMemorySignalFlag   = "eviction-memory-signal"
	evictionMemorySignalValues = EvictionMemoryWorkingSet + " or " + EvictionMemoryReclaimable
)

// DefaultLogFileMaxSizeMB is --log-file-max-size's default, klog's.
const DefaultLogFileMaxSizeMB = 1800

// Load parses heartlet's command line (args without the program name),
// strictly decodes the --config file when one is given, applies the
// upstream kubelet defaults and then the flags (flags win over the file),
// and validates the result. A configuration with problems returns Errors,
// each naming the field path and the file line or flag that set it.
// --help returns ErrHelp and --version returns ErrVersion; the caller prints
// FlagUsages or the version. Load has no side effects besides reading the
// configuration file and the machine's hostname.
func Load(args []string) (*Options, error) {
	return load(args, osEnv())
}

// FlagUsages describes every flag Load accepts, one per line, with its
// default.
func FlagUsages() string {
	fs, _ := newFlagSet(NewDefault(), &cmdline{rootDir: DefaultRootDir, logFileMaxSize: DefaultLogFileMaxSizeMB})
	return fs.FlagUsagesWrapped(100)
}

// env is what Load reads from the machine.
type env struct {
	hostname func() (string, error)
	readFile func(name string) ([]byte, error)
	abs      func(path string) (string, error)
	walkDir  func(root string, fn fs.WalkDirFunc) error
}

func osEnv() env {
	return env{hostname: os.Hostname, readFile: os.ReadFile, abs: filepath.Abs, walkDir: filepath.WalkDir}
}

// cmdline holds the flags that are not KubeletConfiguration fields.
type cmdline struct {
	configFile string
	// plegRelistPeriod is --pleg-relist-period.
	plegRelistPeriod time.Duration
	configDir        string
	lockFile         string
	exitOnLock       bool
	// Upstream flag-only settings heartlet warns about or refuses.
	bootstrapKubeconfig string
	cloudProvider       string
	runOnce             bool
	runtimeCgroups      string
	kubeconfig          string
	rootDir             string
	certDir             string
	hostnameOverride    string
	nodeIP              string
	nodeLabels          map[string]string
	logFile             string
	logDir              string
	logFileMaxSize      int
	// The image credential provider plugins.
	credentialProviderConfig string
	credentialProviderBinDir string
	evictionMemorySignal     string
	help                     bool
	version                  bool
}

func load(args []string, e env) (*Options, error) {
	// The first pass finds --config and the flag-only settings; flags bound
	// to the configuration land in a throwaway copy.
	cl := &cmdline{rootDir: DefaultRootDir, logFileMaxSize: DefaultLogFileMaxSizeMB, evictionMemorySignal: EvictionMemoryWorkingSet}
	fs, _ := newFlagSet(NewDefault(), cl)
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("command line: %w", err)
	}
	if cl.help {
		return nil, ErrHelp
	}
	if cl.version {
		return nil, ErrVersion
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("command line: unexpected argument %q", fs.Arg(0))
	}

	kc := NewDefault()
	loc := &locator{file: cl.configFile, flags: map[string]string{}, dropIns: map[string]fileLine{}}
	var (
		problems Errors
		dec      = &decoded{}
	)
	if cl.configFile != "" {
		data, err := e.readFile(cl.configFile)
		if err != nil {
			return nil, fmt.Errorf("reading config file %q: %w", cl.configFile, err)
		}
		d, decodeProblems := decode(data)
		for _, p := range decodeProblems {
			p.File = cl.configFile
		}
		if d == nil {
			return nil, decodeProblems
		}
		problems, dec = decodeProblems, d
		kc, loc.lines = d.config, d.lines
		SetDefaults(kc)
		absFile, err := e.abs(cl.configFile)
		if err != nil {
			return nil, fmt.Errorf("resolving config file %q: %w", cl.configFile, err)
		}
		resolveRelativePaths(kc, filepath.Dir(absFile))
	}
	var (
		warnings  []string
		configDir string
	)
	if cl.configDir != "" {
		dir, err := e.abs(cl.configDir)
		if err != nil {
			return nil, fmt.Errorf("resolving --config-dir %q: %w", cl.configDir, err)
		}
		merged, d, skipped, dropProblems, err := mergeDropIns(kc, dir, e, loc)
		if err != nil {
			return nil, err
		}
		if merged == nil {
			return nil, dropProblems
		}
		kc, problems = merged, append(problems, dropProblems...)
		configDir = dir
		dec.bad = append(dec.bad, d.bad...)
		if len(skipped) > 0 {
			warnings = append(warnings, fmt.Sprintf("--config-dir: skipped files without the %s suffix: %s", dropInExt, strings.Join(skipped, ", ")))
		}
	}

	// The second pass applies the flags over the file, as the kubelet does.
	fileGates := maps.Clone(kc.FeatureGates)
	fs, flagPaths := newFlagSet(kc, &cmdline{})
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("command line: %w", err)
	}
	// --feature-gates sets the gates it names and keeps the file's others.
	for k, v := range fileGates {
		if _, ok := kc.FeatureGates[k]; !ok {
			kc.FeatureGates[k] = v
		}
	}
	fs.Visit(func(f *pflag.Flag) {
		if path, ok := flagPaths[f.Name]; ok {
			loc.flags[path] = "--" + f.Name
		}
	})
	MergeEvictionDefaults(kc)

	opts := &Options{
		Config:               kc,
		ConfigFile:           cl.configFile,
		Kubeconfig:           cl.kubeconfig,
		BootstrapKubeconfig:  cl.bootstrapKubeconfig,
		HostnameOverride:     cl.hostnameOverride,
		NodeLabels:           cl.nodeLabels,
		Verbosity:            int(kc.Logging.Verbosity),
		LogFileMaxSizeMB:     cl.logFileMaxSize,
		PLEGRelistPeriod:     cl.plegRelistPeriod,
		EvictionMemorySignal: cl.evictionMemorySignal,
		Warnings:             warnings,
		ConfigDir:            configDir,
	}
	if s := cl.evictionMemorySignal; s != EvictionMemoryWorkingSet && s != EvictionMemoryReclaimable {
		problems = append(problems, &Problem{Flag: "--" + evictionMemorySignalFlag, Field: field.NotSupported(field.NewPath("evictionMemorySignal"), s, []string{EvictionMemoryWorkingSet, EvictionMemoryReclaimable})})
	}
	switch logFile := cl.logFile; {
	case logFile == "" && cl.logDir != "":
		logFile = filepath.Join(cl.logDir, "heartlet.log")
		fallthrough
	case logFile != "":
		p, err := e.abs(logFile)
		if err != nil {
			return nil, fmt.Errorf("resolving --log-file %q: %w", logFile, err)
		}
		opts.LogFile = p
	}
	if cl.plegRelistPeriod < 0 {
		problems = append(problems, &Problem{Flag: "--pleg-relist-period", Field: field.Invalid(field.NewPath("plegRelistPeriod"), cl.plegRelistPeriod.String(), "must be 0 (the default, 1s) or more")})
	}
	if cl.logFileMaxSize < 0 {
		problems = append(problems, &Problem{Flag: "--log-file-max-size", Field: field.Invalid(field.NewPath("logFileMaxSize"), cl.logFileMaxSize, "must be 0 (never rotate) or more")})
	}
	if cl.bootstrapKubeconfig != "" && cl.kubeconfig == "" {
		problems = append(problems, &Problem{Flag: "--bootstrap-kubeconfig", Field: field.Required(field.NewPath("kubeconfig"), "--bootstrap-kubeconfig needs --kubeconfig, the file TLS bootstrap writes")})
	}
	if fs.Changed("pod-manifest-path") && kc.StaticPodPath != "" {
		p, err := e.abs(kc.StaticPodPath)
		if err != nil {
			return nil, fmt.Errorf("resolving --pod-manifest-path %q: %w", kc.StaticPodPath, err)
		}
		kc.StaticPodPath = p
	}
	if cl.rootDir == "" {
		problems = append(problems, &Problem{Flag: "--root-dir", Field: field.Required(field.NewPath("rootDir"), "must be a directory")})
	} else {
		p, err := e.abs(cl.rootDir)
		if err != nil {
			return nil, fmt.Errorf("resolving --root-dir %q: %w", cl.rootDir, err)
		}
		opts.RootDir = p
		opts.CertDir = filepath.Join(p, "pki")
	}
	if cl.certDir != "" {
		p, err := e.abs(cl.certDir)
		if err != nil {
			return nil, fmt.Errorf("resolving --cert-dir %q: %w", cl.certDir, err)
		}
		opts.CertDir = p
	}
	problems = append(problems, loadCredentialProviders(opts, cl, e)...)
	problems = append(problems, validateNodeLabels(cl.nodeLabels)...)
	flagWarnings, flagProblems := flagOnlyWarnings(fs, cl)
	problems = append(problems, flagProblems...)
	opts.Warnings = append(opts.Warnings, configFlagWarnings(fs, flagPaths)...)
	opts.Warnings = append(opts.Warnings, flagWarnings...)
	if cl.lockFile != "" {
		p, err := e.abs(cl.lockFile)
		if err != nil {
			return nil, fmt.Errorf("resolving --lock-file %q: %w", cl.lockFile, err)
		}
		opts.LockFile = p
	}
	opts.ExitOnLockContention = cl.exitOnLock
	if cl.exitOnLock && cl.lockFile == "" {
		problems = append(problems, &Problem{Flag: "--exit-on-lock-contention", Field: field.Required(field.NewPath("lockFile"), "cannot exit on lock file contention: no lock file specified (--lock-file)")})
	}
	if err := checkFeatureGates(kc.FeatureGates); err != nil {
		problems = append(problems, loc.locate(field.Invalid(field.NewPath("featureGates"), kc.FeatureGates, err.Error())))
	}
	ips, errs := validateNodeIPs(field.NewPath("nodeIP"), cl.nodeIP)
	for _, fe := range errs {
		problems = append(problems, &Problem{Flag: "--node-ip", Field: fe})
	}
	opts.NodeIPs = ips
	name, p, err := nodeName(fs.Changed("hostname-override"), cl.hostnameOverride, e.hostname)
	if err != nil {
		return nil, err
	}
	if p != nil {
		problems = append(problems, p)
	}
	opts.NodeName = name

	for _, fe := range Validate(kc) {
		p := loc.locate(fe)
		if p.Flag == "" && dec.covers(fe.Field) {
			continue // already reported by the decoder
		}
		problems = append(problems, p)
	}
	if len(problems) > 0 {
		sortProblems(problems)
		return nil, problems
	}
	opts.Ignored = IgnoredFields(kc, cl.configFile == "" && cl.configDir == "", loc.flags)
	return opts, nil
}

// nodeName is the lower-cased hostname override, or the machine's hostname.
func nodeName(overridden bool, override string, hostname func() (string, error)) (string, *Problem, error) {
	if overridden {
		name := strings.ToLower(strings.TrimSpace(override))
		path := field.NewPath("hostnameOverride")
		if name == "" {
			return "", &Problem{Flag: "--hostname-override", Field: field.Required(path, "must not be empty")}, nil
		}
		if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
			return "", &Problem{Flag: "--hostname-override", Field: field.Invalid(path, name, strings.Join(msgs, "; "))}, nil
		}
		return name, nil, nil
	}
	h, err := hostname()
	if err != nil {
		return "", nil, fmt.Errorf("reading the machine's hostname: %w", err)
	}
	name := strings.ToLower(strings.TrimSpace(h))
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return "", &Problem{Field: field.Invalid(field.NewPath("nodeName"), name,
			"the machine's hostname is not a valid node name ("+strings.Join(msgs, "; ")+"); set --hostname-override")}, nil
	}
	return name, nil, nil
}

// resolveRelativePaths makes the file's relative paths relative to the
// directory holding the file, as the kubelet does.
func resolveRelativePaths(kc *kubeletv1beta1.KubeletConfiguration, dir string) {
	paths := []*string{
		&kc.StaticPodPath,
		&kc.Authentication.X509.ClientCAFile,
		&kc.TLSCertFile,
		&kc.TLSPrivateKeyFile,
		&kc.VolumePluginDir,
		&kc.PodLogsDir,
	}
	if kc.ResolverConfig != nil {
		paths = append(paths, kc.ResolverConfig)
	}
	for _, p := range paths {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
}

// newFlagSet declares heartlet's flags. Flags that set KubeletConfiguration
// fields write into kc (which must be defaulted: pointer fields non-nil);
// the returned map gives the field path each of them sets.
func newFlagSet(kc *kubeletv1beta1.KubeletConfiguration, cl *cmdline) (*pflag.FlagSet, map[string]string) {
	fs := pflag.NewFlagSet("heartlet", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.SetNormalizeFunc(cliflag.WordSepNormalizeFunc)
	fs.SortFlags = true
	paths := map[string]string{}
	cfg := func(name, path string) { paths[name] = path }

	fs.BoolVarP(&cl.help, "help", "h", false, "Print this help and exit.")
	fs.BoolVar(&cl.version, "version", false, "Print the version and exit.")
	fs.StringVar(&cl.configFile, "config", cl.configFile, "KubeletConfiguration (kubelet.config.k8s.io/v1beta1) file, YAML or JSON. Command-line flags override its values. Relative paths in it are relative to its directory.")
	fs.StringVar(&cl.configDir, "config-dir", cl.configDir, "Directory of drop-in KubeletConfiguration files (*.conf, in it and below, in lexical order) merged over --config as JSON merge patches; flags still win.")
	fs.StringVar(&cl.lockFile, "lock-file", cl.lockFile, "File heartlet holds an exclusive lock (flock) on while it runs; it waits for the lock at start.")
	fs.BoolVar(&cl.exitOnLock, "exit-on-lock-contention", cl.exitOnLock, "Exit when another process opens --lock-file (a node agent about to take over).")
	fs.StringVar(&cl.kubeconfig, "kubeconfig", cl.kubeconfig, "Path to a kubeconfig file for the API server. Omit for standalone mode.")
	fs.StringVar(&cl.bootstrapKubeconfig, "bootstrap-kubeconfig", cl.bootstrapKubeconfig, "Kubeconfig with bootstrap credentials: when the --kubeconfig file does not exist or its client certificate is not valid, a client certificate is asked for with them through a CertificateSigningRequest, stored in --cert-dir, and --kubeconfig is written to use it.")
	fs.StringVar(&cl.rootDir, "root-dir", cl.rootDir, "Directory for heartlet's own files (volumes, plugins, state).")
	fs.StringVar(&cl.certDir, "cert-dir", cl.certDir, "Directory of the self-signed serving certificate (kubelet.crt, kubelet.key) made when tlsCertFile and tlsPrivateKeyFile are not given, and of the certificates from signing requests (kubelet-client-current.pem, kubelet-server-current.pem); default <root-dir>/pki.")
	fs.StringVar(&cl.hostnameOverride, "hostname-override", cl.hostnameOverride, "Node name to use instead of the machine's hostname (lower-cased).")
	fs.Var(cliflag.NewMapStringString(&cl.nodeLabels), "node-labels", "Labels to add when registering the node, key=value pairs separated by commas.")
	fs.StringVar(&cl.nodeIP, "node-ip", cl.nodeIP, "IP address of the node, or one IPv4 and one IPv6 address separated by a comma.")

	fs.VarP(logsapi.VerbosityLevelPflag(&kc.Logging.Verbosity), "v", "v", "Log verbosity (logging.verbosity).")
	cfg("v", "logging.verbosity")
	fs.Var(logsapi.VModuleConfigurationPflag(&kc.Logging.VModule), "vmodule", "Per-file log verbosity, pattern=N,... (logging.vmodule).")
	cfg("vmodule", "logging.vmodule")
	fs.StringVar(&kc.Logging.Format, "logging-format", kc.Logging.Format, "Log format: text or json (logging.format).")
	cfg("logging-format", "logging.format")
	fs.StringVar(&cl.logFile, "log-file", cl.logFile, "Write heartlet's log to this file instead of standard error, rotated at --log-file-max-size.")
	fs.StringVar(&cl.logDir, "log-dir", cl.logDir, "Write heartlet's log to heartlet.log in this directory (when --log-file is not given).")
	fs.IntVar(&cl.logFileMaxSize, "log-file-max-size", cl.logFileMaxSize, "Size in megabytes at which the log file is rotated (heartlet.log.1 ... .5 are kept); 0 never rotates.")
	fs.StringVar(&cl.credentialProviderConfig, "image-credential-provider-config", cl.credentialProviderConfig, "CredentialProviderConfig file (kubelet.config.k8s.io/v1) of the image credential provider plugins.")
	fs.StringVar(&cl.credentialProviderBinDir, "image-credential-provider-bin-dir", cl.credentialProviderBinDir, "Directory of the image credential provider plugin binaries.")

	fs.StringVar(&kc.StaticPodPath, "pod-manifest-path", kc.StaticPodPath, "Directory of static pod manifests, or one manifest file (staticPodPath).")
	cfg("pod-manifest-path", "staticPodPath")
	fs.DurationVar(&kc.FileCheckFrequency.Duration, "file-check-frequency", kc.FileCheckFrequency.Duration, "How often to re-read the static pod manifests (fileCheckFrequency).")
	cfg("file-check-frequency", "fileCheckFrequency")
	fs.StringVar(&kc.StaticPodURL, "manifest-url", kc.StaticPodURL, "URL serving static pods: one Pod or a PodList (staticPodURL).")
	cfg("manifest-url", "staticPodURL")
	fs.Var(cliflag.NewColonSeparatedMultimapStringString(&kc.StaticPodURLHeader), "manifest-url-header", "Headers sent to --manifest-url, e.g. 'a:hello,b:again,c:world'; a header may repeat (staticPodURLHeader).")
	cfg("manifest-url-header", "staticPodURLHeader")
	fs.DurationVar(&kc.HTTPCheckFrequency.Duration, "http-check-frequency", kc.HTTPCheckFrequency.Duration, "How often to re-read --manifest-url (httpCheckFrequency).")
	cfg("http-check-frequency", "httpCheckFrequency")
	fs.DurationVar(&kc.SyncFrequency.Duration, "sync-frequency", kc.SyncFrequency.Duration, "Longest time between two syncs of a pod (syncFrequency).")
	cfg("sync-frequency", "syncFrequency")
	fs.StringVar(&kc.ContainerRuntimeEndpoint, "container-runtime-endpoint", kc.ContainerRuntimeEndpoint, "CRI runtime endpoint, unix:///path/to/socket (containerRuntimeEndpoint).")
	cfg("container-runtime-endpoint", "containerRuntimeEndpoint")
	fs.DurationVar(&cl.plegRelistPeriod, "pleg-relist-period", cl.plegRelistPeriod, "Time between two relists of the runtime's pods; 0 means 1s. For tests and diagnostics: container events keep the PLEG current between relists when the runtime sends them.")
	_ = fs.MarkHidden("pleg-relist-period")
	fs.StringVar(&kc.ImageServiceEndpoint, "image-service-endpoint", kc.ImageServiceEndpoint, "CRI image service endpoint; empty means the runtime endpoint (imageServiceEndpoint).")
	cfg("image-service-endpoint", "imageServiceEndpoint")
	fs.DurationVar(&kc.RuntimeRequestTimeout.Duration, "runtime-request-timeout", kc.RuntimeRequestTimeout.Duration, "Timeout of CRI requests other than pulls, logs, exec and attach (runtimeRequestTimeout).")
	cfg("runtime-request-timeout", "runtimeRequestTimeout")

	fs.StringVar(&kc.Address, "address", kc.Address, "IP address the authenticated HTTPS server listens on (address).")
	cfg("address", "address")
	fs.Int32Var(&kc.Port, "port", kc.Port, "Port of the authenticated HTTPS server (port).")
	cfg("port", "port")
	fs.StringVar(&kc.TLSCertFile, "tls-cert-file", kc.TLSCertFile, "Serving certificate of the HTTPS server, PEM (tlsCertFile).")
	cfg("tls-cert-file", "tlsCertFile")
	fs.StringVar(&kc.TLSPrivateKeyFile, "tls-private-key-file", kc.TLSPrivateKeyFile, "Private key of tlsCertFile, PEM (tlsPrivateKeyFile).")
	cfg("tls-private-key-file", "tlsPrivateKeyFile")
	fs.StringSliceVar(&kc.TLSCipherSuites, "tls-cipher-suites", kc.TLSCipherSuites, "Cipher suites of the HTTPS server, Go names; empty means Go's defaults (tlsCipherSuites).")
	cfg("tls-cipher-suites", "tlsCipherSuites")
	fs.StringVar(&kc.TLSMinVersion, "tls-min-version", kc.TLSMinVersion, "Minimum TLS version: VersionTLS10..VersionTLS13 (tlsMinVersion).")
	cfg("tls-min-version", "tlsMinVersion")
	fs.StringVar(&kc.Authentication.X509.ClientCAFile, "client-ca-file", kc.Authentication.X509.ClientCAFile, "CA bundle that signs the client certificates the HTTPS server accepts (authentication.x509.clientCAFile).")
	cfg("client-ca-file", "authentication.x509.clientCAFile")
	fs.BoolVar(kc.Authentication.Anonymous.Enabled, "anonymous-auth", *kc.Authentication.Anonymous.Enabled, "Let requests without credentials in as system:anonymous (authentication.anonymous.enabled).")
	cfg("anonymous-auth", "authentication.anonymous.enabled")
	fs.BoolVar(kc.Authentication.Webhook.Enabled, "authentication-token-webhook", *kc.Authentication.Webhook.Enabled, "Authenticate bearer tokens with TokenReviews (authentication.webhook.enabled).")
	cfg("authentication-token-webhook", "authentication.webhook.enabled")
	fs.StringVar((*string)(&kc.Authorization.Mode), "authorization-mode", string(kc.Authorization.Mode), "AlwaysAllow or Webhook (SubjectAccessReviews) (authorization.mode).")
	cfg("authorization-mode", "authorization.mode")
	fs.Int32Var(&kc.ReadOnlyPort, "read-only-port", kc.ReadOnlyPort, "Port of the unauthenticated read-only HTTP server; 0 turns it off (readOnlyPort).")
	cfg("read-only-port", "readOnlyPort")
	fs.Int32Var(kc.HealthzPort, "healthz-port", *kc.HealthzPort, "Port of the healthz server; 0 turns it off (healthzPort).")
	cfg("healthz-port", "healthzPort")
	fs.StringVar(&kc.HealthzBindAddress, "healthz-bind-address", kc.HealthzBindAddress, "IP address the healthz server listens on (healthzBindAddress).")
	cfg("healthz-bind-address", "healthzBindAddress")

	fs.StringVar(&kc.CgroupDriver, "cgroup-driver", kc.CgroupDriver, "Cgroup driver: cgroupfs or systemd (cgroupDriver).")
	cfg("cgroup-driver", "cgroupDriver")
	fs.StringVar(&kc.CgroupRoot, "cgroup-root", kc.CgroupRoot, "Root cgroup for pods (cgroupRoot).")
	cfg("cgroup-root", "cgroupRoot")
	fs.BoolVar(kc.CgroupsPerQOS, "cgroups-per-qos", *kc.CgroupsPerQOS, "Create the QoS class and pod cgroup hierarchy (cgroupsPerQOS).")
	cfg("cgroups-per-qos", "cgroupsPerQOS")
	fs.Int32Var(&kc.MaxPods, "max-pods", kc.MaxPods, "Most pods this node runs (maxPods).")
	cfg("max-pods", "maxPods")
	fs.Int64Var(kc.PodPidsLimit, "pod-max-pids", *kc.PodPidsLimit, "Most processes per pod; -1 means no pod-level limit (podPidsLimit).")
	cfg("pod-max-pids", "podPidsLimit")
	fs.BoolVar(kc.FailSwapOn, "fail-swap-on", *kc.FailSwapOn, "Refuse to start when swap is on (failSwapOn).")
	cfg("fail-swap-on", "failSwapOn")

	fs.Var(cliflag.NewLangleSeparatedMapStringString(&kc.EvictionHard), "eviction-hard", "Hard eviction thresholds, e.g. memory.available<100Mi,nodefs.available<10%; replaces the defaults (evictionHard).")
	cfg("eviction-hard", "evictionHard")
	fs.Var(cliflag.NewLangleSeparatedMapStringString(&kc.EvictionSoft), "eviction-soft", "Soft eviction thresholds, e.g. memory.available<300Mi (evictionSoft).")
	cfg("eviction-soft", "evictionSoft")
	fs.Var(cliflag.NewMapStringString(&kc.EvictionSoftGracePeriod), "eviction-soft-grace-period", "Grace period of each soft threshold, e.g. memory.available=1m30s (evictionSoftGracePeriod).")
	cfg("eviction-soft-grace-period", "evictionSoftGracePeriod")
	fs.Var(cliflag.NewMapStringString(&kc.EvictionMinimumReclaim), "eviction-minimum-reclaim", "Least amount to reclaim per signal, e.g. imagefs.available=2Gi (evictionMinimumReclaim).")
	cfg("eviction-minimum-reclaim", "evictionMinimumReclaim")
	fs.StringVar(&cl.evictionMemorySignal, evictionMemorySignalFlag, cl.evictionMemorySignal, "How memory.available is computed: "+evictionMemorySignalValues+
		". workingset is upstream's (memory less the working set); reclaimable also counts the active page cache as available while the memory pressure (PSI some avg10) stays below 10%. heartlet's own flag, not a KubeletConfiguration field.")
	fs.DurationVar(&kc.EvictionPressureTransitionPeriod.Duration, "eviction-pressure-transition-period", kc.EvictionPressureTransitionPeriod.Duration, "How long a pressure condition stays after the signal recovers (evictionPressureTransitionPeriod).")
	cfg("eviction-pressure-transition-period", "evictionPressureTransitionPeriod")
	fs.Int32Var(&kc.EvictionMaxPodGracePeriod, "eviction-max-pod-grace-period", kc.EvictionMaxPodGracePeriod, "Longest grace period (seconds) for soft evictions; negative means the pod's own (evictionMaxPodGracePeriod).")
	cfg("eviction-max-pod-grace-period", "evictionMaxPodGracePeriod")

	fs.StringVar(&kc.ClusterDomain, "cluster-domain", kc.ClusterDomain, "Cluster DNS domain added to pods' search list (clusterDomain).")
	cfg("cluster-domain", "clusterDomain")
	fs.StringSliceVar(&kc.ClusterDNS, "cluster-dns", kc.ClusterDNS, "Comma-separated cluster DNS server IPs (clusterDNS).")
	cfg("cluster-dns", "clusterDNS")
	fs.StringVar(kc.ResolverConfig, "resolv-conf", *kc.ResolverConfig, "Resolver file pods' DNS configuration starts from; empty for none (resolvConf).")
	cfg("resolv-conf", "resolvConf")
	fs.StringVar(&kc.ContainerLogMaxSize, "container-log-max-size", kc.ContainerLogMaxSize, "Size at which a container log is rotated (containerLogMaxSize).")
	cfg("container-log-max-size", "containerLogMaxSize")
	fs.Int32Var(kc.ContainerLogMaxFiles, "container-log-max-files", *kc.ContainerLogMaxFiles, "Log files kept per container, at least 2 (containerLogMaxFiles).")
	cfg("container-log-max-files", "containerLogMaxFiles")
	fs.BoolVar(kc.SerializeImagePulls, "serialize-image-pulls", *kc.SerializeImagePulls, "Pull one image at a time (serializeImagePulls).")
	cfg("serialize-image-pulls", "serializeImagePulls")
	fs.BoolVar(kc.RegisterNode, "register-node", *kc.RegisterNode, "Register the node with the API server (registerNode).")
	cfg("register-node", "registerNode")
	fs.DurationVar(&kc.NodeStatusUpdateFrequency.Duration, "node-status-update-frequency", kc.NodeStatusUpdateFrequency.Duration, "How often node status is computed and posted on change (nodeStatusUpdateFrequency).")
	cfg("node-status-update-frequency", "nodeStatusUpdateFrequency")
	fs.Int32Var(kc.ImageGCHighThresholdPercent, "image-gc-high-threshold", *kc.ImageGCHighThresholdPercent, "Image filesystem usage in percent at which image garbage collection runs (imageGCHighThresholdPercent).")
	cfg("image-gc-high-threshold", "imageGCHighThresholdPercent")
	fs.Int32Var(kc.ImageGCLowThresholdPercent, "image-gc-low-threshold", *kc.ImageGCLowThresholdPercent, "Image filesystem usage in percent image garbage collection brings the disk down to (imageGCLowThresholdPercent).")
	cfg("image-gc-low-threshold", "imageGCLowThresholdPercent")
	fs.DurationVar(&kc.ImageMinimumGCAge.Duration, "minimum-image-ttl-duration", kc.ImageMinimumGCAge.Duration, "Least age of an unused image before image garbage collection may remove it (imageMinimumGCAge).")
	cfg("minimum-image-ttl-duration", "imageMinimumGCAge")
	fs.Var(cliflag.NewMapStringBool(&kc.FeatureGates), "feature-gates", "Feature gates of the upstream kubelet v1.37, key=true|false separated by commas; unknown names and locked gates are refused, and heartlet acts on none (featureGates).")
	cfg("feature-gates", "featureGates")
	fs.Var(taintsFlag{&kc.RegisterWithTaints}, "register-with-taints", "Taints the Node is registered with, key=value:Effect separated by commas (registerWithTaints).")
	cfg("register-with-taints", "registerWithTaints")
	fs.StringVar(&kc.ProviderID, "provider-id", kc.ProviderID, "Unique identifier of the node in the machine database, e.g. of a cloud provider: Node.spec.providerID (providerID).")
	cfg("provider-id", "providerID")
	fs.StringSliceVar(&kc.AllowedUnsafeSysctls, "allowed-unsafe-sysctls", kc.AllowedUnsafeSysctls, "Comma-separated unsafe sysctls or patterns (ending in *) pods may set (allowedUnsafeSysctls).")
	cfg("allowed-unsafe-sysctls", "allowedUnsafeSysctls")
	addUpstreamFlags(fs, kc, cl, cfg)
	return fs, paths
}

// IsExit reports whether err from Load asks the caller to exit successfully
// (after --help or --version).
func IsExit(err error) bool {
	return errors.Is(err, ErrHelp) || errors.Is(err, ErrVersion)
}
