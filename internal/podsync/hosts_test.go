package podsync

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/heartlet/heartlet/internal/podworker"
	"github.com/heartlet/heartlet/internal/runtime/fakecri"
)

const localhostEntries = "# Kubernetes-managed hosts file.\n" +
	"127.0.0.1\tlocalhost\n" +
	"::1\tlocalhost ip6-localhost ip6-loopback\n" +
	"fe00::0\tip6-localnet\n" +
	"fe00::0\tip6-mcastprefix\n" +
	"fe00::1\tip6-allnodes\n" +
	"fe00::2\tip6-allrouters\n"

func TestPodHostnameAndDomain(t *testing.T) {
	long := strings.Repeat("a", 62) + "-b" // 64 characters, '-' at 63
	tests := []struct {
		name       string
		pod        func(p *v1.Pod)
		wantHost   string
		wantDomain string
		wantKernel string
		wantErr    string
	}{
		{name: "pod name", wantHost: "p", wantKernel: "p"},
		{name: "spec.hostname", pod: func(p *v1.Pod) { p.Spec.Hostname = "web" }, wantHost: "web", wantKernel: "web"},
		{name: "subdomain makes a domain", pod: func(p *v1.Pod) { p.Spec.Hostname, p.Spec.Subdomain = "web", "svc" },
			wantHost: "web", wantDomain: "svc.default.svc.cluster.local", wantKernel: "web"},
		{name: "setHostnameAsFQDN", pod: func(p *v1.Pod) {
			p.Spec.Hostname, p.Spec.Subdomain, p.Spec.SetHostnameAsFQDN = "web", "svc", ptr.To(true)
		}, wantHost: "web", wantDomain: "svc.default.svc.cluster.local", wantKernel: "web.svc.default.svc.cluster.local"},
		{name: "setHostnameAsFQDN without subdomain", pod: func(p *v1.Pod) { p.Spec.SetHostnameAsFQDN = ptr.To(true) },
			wantHost: "p", wantKernel: "p"},
		{name: "FQDN over 64 characters", pod: func(p *v1.Pod) {
			p.Spec.Hostname, p.Spec.Subdomain, p.Spec.SetHostnameAsFQDN = strings.Repeat("h", 40), "svc", ptr.To(true)
		}, wantErr: "is too long (64 characters is the max, 70 characters requested)"},
		{name: "long pod name cut to 63 without trailing dash", pod: func(p *v1.Pod) { p.Name = long },
			wantHost: strings.Repeat("a", 62), wantKernel: strings.Repeat("a", 62)},
		{name: "hostnameOverride wins, no domain", pod: func(p *v1.Pod) {
			p.Spec.Hostname, p.Spec.Subdomain, p.Spec.HostnameOverride = "web", "svc", ptr.To("my.host.example")
		}, wantHost: "my.host.example", wantKernel: "my.host.example"},
		{name: "invalid hostnameOverride", pod: func(p *v1.Pod) { p.Spec.HostnameOverride = ptr.To("Bad_Name") },
			wantErr: "is not a valid DNS subdomain"},
		{name: "invalid hostname", pod: func(p *v1.Pod) { p.Spec.Hostname = "a.b" }, wantErr: "is not a valid DNS label"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testPod(v1.RestartPolicyAlways, nil, "app")
			if tt.pod != nil {
				tt.pod(p)
			}
			host, domain, err := podHostnameAndDomain(p, "cluster.local")
			var kernel string
			if err == nil {
				kernel, err = kernelHostname(host, domain, p.Spec.SetHostnameAsFQDN)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if host != tt.wantHost || domain != tt.wantDomain || kernel != tt.wantKernel {
				t.Errorf("got host %q domain %q kernel %q, want %q %q %q", host, domain, kernel, tt.wantHost, tt.wantDomain, tt.wantKernel)
			}
		})
	}
}

func TestHostsFileContent(t *testing.T) {
	aliases := []v1.HostAlias{
		{IP: "192.0.2.1", Hostnames: []string{"foo.local", "bar.local"}},
		{IP: "2001:db8::1", Hostnames: []string{"six.local"}},
	}
	const aliasLines = "\n# Entries added by HostAliases.\n192.0.2.1\tfoo.local\tbar.local\n2001:db8::1\tsix.local\n"
	tests := []struct {
		name string
		got  []byte
		want string
	}{
		{name: "hostname only", got: managedHostsFile([]string{"10.0.0.5"}, "p", "", nil),
			want: localhostEntries + "10.0.0.5\tp\n"},
		{name: "FQDN and dual stack", got: managedHostsFile([]string{"10.0.0.5", "fd00::5"}, "web", "svc.ns.svc.cluster.local", nil),
			want: localhostEntries + "10.0.0.5\tweb.svc.ns.svc.cluster.local\tweb\nfd00::5\tweb.svc.ns.svc.cluster.local\tweb\n"},
		{name: "host aliases", got: managedHostsFile([]string{"10.0.0.5"}, "p", "", aliases),
			want: localhostEntries + "10.0.0.5\tp\n" + aliasLines},
		{name: "host network", got: nodeHostsFile([]byte("127.0.0.1 node\n"), aliases),
			want: "# Kubernetes-managed hosts file (host network).\n127.0.0.1 node\n" + aliasLines},
		{name: "host network without aliases", got: nodeHostsFile([]byte("127.0.0.1 node\n"), nil),
			want: "# Kubernetes-managed hosts file (host network).\n127.0.0.1 node\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if string(tt.got) != tt.want {
				t.Errorf("content =\n%q\nwant\n%q", tt.got, tt.want)
			}
		})
	}
}

// hostsMountOf returns the container's mount at /etc/hosts, if any.
func hostsMountOf(c fakecri.Container) (hostPath string, n int) {
	for _, m := range c.Config.GetMounts() {
		if m.GetContainerPath() == etcHostsPath {
			hostPath = m.GetHostPath()
			n++
		}
	}
	return hostPath, n
}

// Every container of a pod (init and app) gets the pod's hosts file at
// /etc/hosts, written after the sandbox has its IP, and the sandbox the
// pod's hostname; a container mounting its own /etc/hosts keeps it; a
// host-network pod gets the node's file with its aliases and no hostname.
func TestSyncPodHostsFileAndHostname(t *testing.T) {
	tests := []struct {
		name         string
		pod          func(p *v1.Pod)
		wantHostname string
		wantContent  func(ip string) string
		ownHosts     string // container that mounts its own /etc/hosts
	}{
		{
			name: "hostname and subdomain with aliases",
			pod: func(p *v1.Pod) {
				p.Spec.Hostname, p.Spec.Subdomain = "web", "svc"
				p.Spec.HostAliases = []v1.HostAlias{{IP: "192.0.2.7", Hostnames: []string{"db"}}}
			},
			wantHostname: "web",
			wantContent: func(ip string) string {
				return localhostEntries + ip + "\tweb.svc.default.svc.cluster.local\tweb\n\n# Entries added by HostAliases.\n192.0.2.7\tdb\n"
			},
		},
		{
			name: "FQDN as hostname",
			pod: func(p *v1.Pod) {
				p.Spec.Hostname, p.Spec.Subdomain, p.Spec.SetHostnameAsFQDN = "web", "svc", ptr.To(true)
			},
			wantHostname: "web.svc.default.svc.cluster.local",
			wantContent: func(ip string) string {
				return localhostEntries + ip + "\tweb.svc.default.svc.cluster.local\tweb\n"
			},
		},
		{
			name:         "hostnameOverride",
			pod:          func(p *v1.Pod) { p.Spec.HostnameOverride = ptr.To("override.example") },
			wantHostname: "override.example",
			wantContent:  func(ip string) string { return localhostEntries + ip + "\toverride.example\n" },
		},
		{
			name: "own /etc/hosts kept",
			pod: func(p *v1.Pod) {
				p.Spec.Volumes = []v1.Volume{{Name: "h", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
				p.Spec.Containers[1].VolumeMounts = []v1.VolumeMount{{Name: "h", MountPath: "/etc/hosts/"}}
			},
			wantHostname: "p",
			wantContent:  func(ip string) string { return localhostEntries + ip + "\tp\n" },
			ownHosts:     "side",
		},
		{
			name: "host network",
			pod: func(p *v1.Pod) {
				p.Spec.HostNetwork = true
				p.Spec.HostAliases = []v1.HostAlias{{IP: "192.0.2.7", Hostnames: []string{"db", "db2"}}}
			},
			wantContent: func(string) string {
				return "# Kubernetes-managed hosts file (host network).\n127.0.0.1\tnode\n\n# Entries added by HostAliases.\n192.0.2.7\tdb\tdb2\n"
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, _ := lifecycleHarness(t)
			h.syncer.opts.ClusterDomain = "cluster.local"
			nodeHosts := filepath.Join(t.TempDir(), "hosts")
			if err := os.WriteFile(nodeHosts, []byte("127.0.0.1\tnode\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			h.syncer.opts.NodeHostsFile = nodeHosts
			pod := testPod(v1.RestartPolicyAlways, []string{"init"}, "app", "side")
			for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
				for i := range list {
					list[i].Image, list[i].ImagePullPolicy = "busybox:1.35", v1.PullIfNotPresent
				}
			}
			tt.pod(pod)
			if tt.ownHosts != "" {
				h.useVolumes(&fakeVolumes{})
			}

			h.sync(pod) // sandbox and init container
			sbs := h.fake.Sandboxes()
			if len(sbs) != 1 {
				t.Fatalf("%d sandboxes, want 1", len(sbs))
			}
			if got := sbs[0].Config.GetHostname(); got != tt.wantHostname {
				t.Errorf("sandbox hostname = %q, want %q", got, tt.wantHostname)
			}
			ip := ""
			if len(sbs[0].IPs) > 0 {
				ip = sbs[0].IPs[0]
			}
			h.fake.SetExit(h.running("init").ID, 0, "Completed")
			h.sync(pod) // app containers

			file := filepath.Join(h.syncer.opts.RootDir, "pods", string(pod.UID), hostsFileName)
			for _, name := range []string{"init", "app", "side"} {
				cs := h.containers(name)
				if len(cs) != 1 {
					t.Fatalf("%d containers %q, want 1", len(cs), name)
				}
				got, n := hostsMountOf(cs[0])
				switch {
				case name == tt.ownHosts:
					if got == file {
						t.Errorf("container %q: the pod's hosts file replaced its own /etc/hosts mount", name)
					}
				case n != 1 || got != file:
					t.Errorf("container %q: /etc/hosts from %q (%d mounts), want %q", name, got, n, file)
				}
			}
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if string(data) != tt.wantContent(ip) {
				t.Errorf("hosts file =\n%q\nwant\n%q", data, tt.wantContent(ip))
			}
			fi, err := os.Stat(file)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != 0o644 {
				t.Errorf("hosts file mode %v, want 0644", fi.Mode().Perm())
			}
			di, err := os.Stat(filepath.Dir(file))
			if err != nil {
				t.Fatal(err)
			}
			if di.Mode().Perm() != 0o750 {
				t.Errorf("pod directory mode %v, want 0750", di.Mode().Perm())
			}
		})
	}
}

// A FQDN too long for the kernel's hostname keeps the pod without a
// sandbox, with an event, as upstream.
func TestSyncPodFQDNTooLong(t *testing.T) {
	h, ev := lifecycleHarness(t)
	h.syncer.opts.ClusterDomain = "cluster.local"
	pod := hookPod(v1.RestartPolicyAlways, 30, nil)
	pod.Spec.Hostname, pod.Spec.Subdomain, pod.Spec.SetHostnameAsFQDN = strings.Repeat("h", 40), "svc", ptr.To(true)
	if _, err := h.syncer.SyncPod(h.ctx, podworker.UpdateSync, pod); err == nil {
		t.Fatal("SyncPod succeeded with an FQDN of 70 characters")
	}
	if n := len(h.fake.Sandboxes()); n != 0 {
		t.Errorf("%d sandboxes, want none", n)
	}
	if got := ev.withReason("FailedCreatePodSandBox"); len(got) != 1 || !strings.Contains(got[0], "is too long") {
		t.Errorf("FailedCreatePodSandBox events %q, want one saying the FQDN is too long", got)
	}
}

// The pod's Ready condition follows the conditions its readiness gates
// name in the pod's status, set by others; the syncer keeps them.
func TestSyncPodReadinessGates(t *testing.T) {
	const gate = "example.com/gate"
	tests := []struct {
		name       string
		conds      []v1.PodCondition
		wantReady  v1.ConditionStatus
		wantReason string
		wantMsg    string
	}{
		{name: "condition missing", wantReady: v1.ConditionFalse, wantReason: "ReadinessGatesNotReady",
			wantMsg: `corresponding condition of pod readiness gate "example.com/gate" does not exist.`},
		{name: "condition False", conds: []v1.PodCondition{{Type: gate, Status: v1.ConditionFalse}},
			wantReady: v1.ConditionFalse, wantReason: "ReadinessGatesNotReady",
			wantMsg: `the status of pod readiness gate "example.com/gate" is not "True", but False`},
		{name: "condition True", conds: []v1.PodCondition{{Type: gate, Status: v1.ConditionTrue}}, wantReady: v1.ConditionTrue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			pod := hookPod(v1.RestartPolicyAlways, 30, nil)
			pod.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: gate}}
			h.sync(pod)
			pod.Status.Conditions = tt.conds
			h.sync(pod)
			st, ok := h.status.GetPodStatus(pod.UID)
			if !ok {
				t.Fatal("no status")
			}
			var ready, kept *v1.PodCondition
			for i := range st.Conditions {
				switch st.Conditions[i].Type {
				case v1.PodReady:
					ready = &st.Conditions[i]
				case gate:
					kept = &st.Conditions[i]
				}
			}
			if ready == nil || ready.Status != tt.wantReady || ready.Reason != tt.wantReason || ready.Message != tt.wantMsg {
				t.Errorf("Ready = %+v, want %s %q %q", ready, tt.wantReady, tt.wantReason, tt.wantMsg)
			}
			if len(tt.conds) > 0 && (kept == nil || kept.Status != tt.conds[0].Status) {
				t.Errorf("gate condition %+v, want %s kept", kept, tt.conds[0].Status)
			}
		})
	}
}
