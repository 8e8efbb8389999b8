//go:build e2e

package e2e

import (
	"os"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

const podAPIConfig = "clusterDomain: cluster.local\n"

// findPodCondition returns the pod's condition of type ct, or nil.
func findPodCondition(p *v1.Pod, ct v1.PodConditionType) *v1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == ct {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// The hosts file and the hostname seen from inside a container follow the
// pod's hostname, subdomain, setHostnameAsFQDN, hostnameOverride and
// hostAliases; a pod name over 63 characters is cut; a host-network pod
// sees the node's hosts file with its aliases; an init container sees the
// pod's hosts file too.
func TestClusterPodHostsAndHostname(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{config: podAPIConfig})
	const fqdn = "web.sub.default.svc.cluster.local"
	longName := "api-hosts-long-" + strings.Repeat("x", 47) + "-tail" // '-' is character 63
	aliases := []v1.HostAlias{{IP: "192.0.2.7", Hostnames: []string{"db.example", "db2.example"}}}
	tests := []struct {
		name         string
		mutate       func(p *v1.Pod)
		wantHostname string
		wantLines    []string // lines of /etc/hosts, the pod IP written as IP
		wantPrefix   string
	}{
		{
			name: "api-hosts",
			mutate: func(p *v1.Pod) {
				p.Spec.Hostname, p.Spec.Subdomain, p.Spec.HostAliases = "web", "sub", aliases
				// The init container fails unless it sees the pod's file.
				p.Spec.InitContainers = []v1.Container{shContainer("init", "grep -q '"+fqdn+"' /etc/hosts")}
			},
			wantHostname: "web",
			wantPrefix:   "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n",
			wantLines:    []string{"IP\t" + fqdn + "\tweb", "# Entries added by HostAliases.", "192.0.2.7\tdb.example\tdb2.example"},
		},
		{
			name: "api-hosts-fqdn",
			mutate: func(p *v1.Pod) {
				p.Spec.Hostname, p.Spec.Subdomain, p.Spec.SetHostnameAsFQDN = "web", "sub", ptr.To(true)
			},
			wantHostname: fqdn,
			wantLines:    []string{"IP\t" + fqdn + "\tweb"},
		},
		{
			name: longName,
			// A label value has at most 63 characters.
			mutate:       func(p *v1.Pod) { delete(p.Labels, "test-pod") },
			wantHostname: "api-hosts-long-" + strings.Repeat("x", 47),
			wantLines:    []string{"IP\tapi-hosts-long-" + strings.Repeat("x", 47)},
		},
		{
			name: "api-hosts-override",
			mutate: func(p *v1.Pod) {
				p.Spec.Hostname, p.Spec.HostnameOverride = "web", ptr.To("override.example.test")
			},
			wantHostname: "override.example.test",
			wantLines:    []string{"IP\toverride.example.test"},
		},
		{
			name: "api-hosts-hostnet",
			mutate: func(p *v1.Pod) {
				p.Spec.HostNetwork, p.Spec.HostAliases = true, aliases
			},
			wantPrefix: "# Kubernetes-managed hosts file (host network).\n",
			wantLines:  []string{"# Entries added by HostAliases.", "192.0.2.7\tdb.example\tdb2.example"},
		},
	}
	for _, tt := range tests {
		createPod(t, apiPod(tt.name, tt.mutate))
	}
	c := newCRI(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := waitAPIPodRunning(t, h, tt.name)
			if tt.name == "api-hosts-override" && p.Spec.HostnameOverride == nil {
				t.Skip("the API server dropped hostnameOverride (feature gate HostnameOverride off)")
			}
			hosts := execOK(t, c, string(p.UID), "main", "cat", "/etc/hosts")
			t.Logf("/etc/hosts:\n%s", hosts)
			if tt.wantPrefix != "" && !strings.HasPrefix(hosts, tt.wantPrefix) {
				t.Errorf("/etc/hosts does not start with %q", tt.wantPrefix)
			}
			lines := strings.Split(hosts, "\n")
			for _, want := range tt.wantLines {
				want = strings.ReplaceAll(want, "IP", p.Status.PodIP)
				found := false
				for _, l := range lines {
					found = found || l == want
				}
				if !found {
					t.Errorf("/etc/hosts has no line %q", want)
				}
			}
			wantHost := tt.wantHostname
			if p.Spec.HostNetwork {
				// The node's own name.
				hn, err := os.Hostname()
				if err != nil {
					t.Fatal(err)
				}
				wantHost = hn
			}
			if got := strings.TrimSpace(execOK(t, c, string(p.UID), "main", "hostname")); got != wantHost {
				t.Errorf("hostname = %q, want %q", got, wantHost)
			}
			if !p.Spec.HostNetwork {
				if got := strings.TrimSpace(execOK(t, c, string(p.UID), "main", "cat", "/etc/hostname")); got != wantHost {
					t.Errorf("/etc/hostname = %q, want %q", got, wantHost)
				}
			}
		})
	}
}

// A pod's readiness gate decides Ready: False with ReadinessGatesNotReady
// while its condition is missing, True once another component sets the
// condition True through the status subresource (no container changes),
// False again when it turns False; heartlet keeps the condition as set.
func TestClusterPodReadinessGate(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{})
	const name = "api-gate"
	const gate = "example.com/gate"
	createPod(t, apiPod(name, func(p *v1.Pod) {
		p.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: gate}}
	}))
	notReady := func(p *v1.Pod) bool {
		r := findPodCondition(p, v1.PodReady)
		return p.Status.Phase == v1.PodRunning && podCondition(p, v1.ContainersReady) == v1.ConditionTrue &&
			r != nil && r.Status == v1.ConditionFalse && r.Reason == "ReadinessGatesNotReady"
	}
	p := waitAPIPod(t, h, name, podStartTimeout, "Running, containers ready, not Ready for its gate", notReady)
	want := `corresponding condition of pod readiness gate "example.com/gate" does not exist.`
	if msg := findPodCondition(p, v1.PodReady).Message; msg != want {
		t.Errorf("Ready message %q, want %q", msg, want)
	}
	containerID := p.Status.ContainerStatuses[0].ContainerID

	setGate := func(status v1.ConditionStatus) {
		t.Helper()
		patch := `{"status":{"conditions":[{"type":"` + gate + `","status":"` + string(status) + `"}]}}`
		mustKubectl(t, "patch", "pod", "-n", "default", name, "--subresource=status", "--type=strategic", "-p", patch)
	}
	start := time.Now()
	setGate(v1.ConditionTrue)
	p = waitAPIPod(t, h, name, 30*time.Second, "Ready after the gate turned True", func(p *v1.Pod) bool {
		return podCondition(p, v1.PodReady) == v1.ConditionTrue
	})
	t.Logf("Ready %v after the patch", time.Since(start).Round(time.Millisecond))
	if got := p.Status.ContainerStatuses[0].ContainerID; got != containerID {
		t.Errorf("container replaced: %s, was %s", got, containerID)
	}

	// heartlet's later writes keep the gate's condition.
	time.Sleep(5 * time.Second)
	p, err := getAPIPod(name)
	if err != nil {
		t.Fatal(err)
	}
	if c := findPodCondition(p, gate); c == nil || c.Status != v1.ConditionTrue {
		t.Errorf("gate condition %+v, want True as patched", c)
	}
	if podCondition(p, v1.PodReady) != v1.ConditionTrue {
		t.Errorf("Ready = %s, want True", podCondition(p, v1.PodReady))
	}

	setGate(v1.ConditionFalse)
	p = waitAPIPod(t, h, name, 30*time.Second, "not Ready after the gate turned False", func(p *v1.Pod) bool {
		r := findPodCondition(p, v1.PodReady)
		return r != nil && r.Status == v1.ConditionFalse && r.Reason == "ReadinessGatesNotReady"
	})
	want = `the status of pod readiness gate "example.com/gate" is not "True", but False`
	if msg := findPodCondition(p, v1.PodReady).Message; msg != want {
		t.Errorf("Ready message %q, want %q", msg, want)
	}
}
