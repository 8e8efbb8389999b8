//go:build e2e

package e2e

import (
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// A pod that uses a field heartlet refuses (hostUsers: false: the runtime,
// containerd 1.6, has no user namespaces, and heartlet never runs such a
// pod in the host's) is Failed with reason UnsupportedPodField and a
// message naming the field, and never gets a sandbox or container. A pod
// that uses a field heartlet does not honour yet (seLinuxChangePolicy)
// runs, with a Warning event UnsupportedPodField naming the field.
func TestClusterUnsupportedPodFields(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{})
	bound := func(p *v1.Pod) { p.Spec.NodeName = clusterNode }

	createPod(t, apiPod("api-hostusers", func(p *v1.Pod) {
		bound(p)
		p.Spec.HostUsers = ptr.To(false)
	}))
	createPod(t, apiPod("api-notyet", func(p *v1.Pod) {
		bound(p)
		p.Spec.SecurityContext = &v1.PodSecurityContext{SELinuxChangePolicy: ptr.To(v1.SELinuxChangePolicyRecursive)}
	}))

	p := waitAPIPod(t, h, "api-hostusers", time.Minute, "to be rejected", func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodFailed
	})
	if p.Status.Reason != "UnsupportedPodField" || !strings.Contains(p.Status.Message, "spec.hostUsers") {
		t.Errorf("status reason/message = %q/%q, want UnsupportedPodField naming spec.hostUsers", p.Status.Reason, p.Status.Message)
	}
	t.Logf("rejected: %s: %s", p.Status.Reason, p.Status.Message)
	if evs, err := podEvents("api-hostusers", "UnsupportedPodField"); err != nil || len(evs) == 0 {
		t.Errorf("no UnsupportedPodField event for the rejected pod (err %v)", err)
	}

	q := waitAPIPodRunning(t, h, "api-notyet")
	var evs []v1.Event
	waitFor(t, 30*time.Second, "a Warning event UnsupportedPodField for api-notyet", func() (bool, string) {
		var err error
		evs, err = podEvents("api-notyet", "UnsupportedPodField")
		if err != nil {
			return false, err.Error()
		}
		return len(evs) > 0, "no event yet"
	})
	if ev := evs[0]; ev.Type != v1.EventTypeWarning || !strings.Contains(ev.Message, "spec.securityContext.seLinuxChangePolicy") {
		t.Errorf("event %s %q, want a Warning naming spec.securityContext.seLinuxChangePolicy", ev.Type, ev.Message)
	} else {
		t.Logf("warned: %s", ev.Message)
	}

	// The rejected pod never ran anything, also while the other ran.
	c := newCRI(t)
	if sbs := c.podSandboxes(t, string(p.UID)); len(sbs) != 0 {
		t.Errorf("the rejected pod has %d sandboxes", len(sbs))
	}
	if ctrs := c.podContainers(t, string(p.UID), ""); len(ctrs) != 0 {
		t.Errorf("the rejected pod has %d containers", len(ctrs))
	}
	if len(c.podContainers(t, string(q.UID), "")) == 0 {
		t.Error("the warned pod has no container")
	}
}

// Containers see the Service environment variables of their namespace's
// Services and of the master Service, as upstream (semantics from
// test/e2e/common/node/pods.go "should contain environment variables for
// services" and expansion.go); their own env wins, and with
// enableServiceLinks: false only the master Service's remain.
func TestClusterServiceEnv(t *testing.T) {
	requireCluster(t)
	svc := &v1.Service{}
	svc.APIVersion, svc.Kind = "v1", "Service"
	svc.Name, svc.Namespace = "fooservice", "default"
	svc.Spec.Selector = map[string]string{"name": "none"}
	svc.Spec.Ports = []v1.ServicePort{{Name: "http-port", Port: 8765, Protocol: v1.ProtocolTCP}}
	createObject(t, svc, "service", "fooservice")
	// The Services exist before heartlet starts, so its informer has them
	// when the pods' containers are made.
	h := startClusterHeartlet(t, clusterOptions{})
	var got v1.Service
	if err := getJSON(&got, "service", "-n", "default", "fooservice"); err != nil {
		t.Fatal(err)
	}
	var master v1.Service
	if err := getJSON(&master, "service", "-n", "default", "kubernetes"); err != nil {
		t.Fatal(err)
	}
	ip, masterIP := got.Spec.ClusterIP, master.Spec.ClusterIP
	masterPort := master.Spec.Ports[0].Port

	printEnv := "env | sort; " + sleeper
	createPod(t, apiPod("api-svcenv", func(p *v1.Pod) {
		p.Spec.Containers[0] = shContainer("main", printEnv)
		p.Spec.Containers[0].Env = []v1.EnvVar{
			{Name: "FOOSERVICE_SERVICE_PORT", Value: "mine"},
			{Name: "FOO_URL", Value: "http://$(FOOSERVICE_SERVICE_HOST):$(FOOSERVICE_SERVICE_PORT_HTTP_PORT)"},
		}
	}))
	createPod(t, apiPod("api-svcenv-off", func(p *v1.Pod) {
		p.Spec.EnableServiceLinks = ptr.To(false)
		p.Spec.Containers[0] = shContainer("main", printEnv)
	}))
	waitAPIPodRunning(t, h, "api-svcenv")
	waitAPIPodRunning(t, h, "api-svcenv-off")

	envOf := func(name string) map[string]string {
		out := mustKubectl(t, "logs", "-n", "default", name)
		m := map[string]string{}
		for _, line := range strings.Split(out, "\n") {
			if k, v, ok := strings.Cut(line, "="); ok {
				m[k] = v
			}
		}
		return m
	}
	on := envOf("api-svcenv")
	want := map[string]string{
		"FOOSERVICE_SERVICE_HOST":           ip,
		"FOOSERVICE_SERVICE_PORT":           "mine", // the container's own wins
		"FOOSERVICE_SERVICE_PORT_HTTP_PORT": "8765",
		"FOOSERVICE_PORT":                   "tcp://" + ip + ":8765",
		"FOOSERVICE_PORT_8765_TCP":          "tcp://" + ip + ":8765",
		"FOOSERVICE_PORT_8765_TCP_PROTO":    "tcp",
		"FOOSERVICE_PORT_8765_TCP_PORT":     "8765",
		"FOOSERVICE_PORT_8765_TCP_ADDR":     ip,
		"FOO_URL":                           "http://" + ip + ":8765",
		"KUBERNETES_SERVICE_HOST":           masterIP,
		"KUBERNETES_PORT_" + strconv.Itoa(int(masterPort)) + "_TCP_ADDR": masterIP,
	}
	for k, v := range want {
		if on[k] != v {
			t.Errorf("api-svcenv: %s=%q, want %q", k, on[k], v)
		}
	}
	off := envOf("api-svcenv-off")
	for k := range off {
		if strings.HasPrefix(k, "FOOSERVICE_") {
			t.Errorf("api-svcenv-off (enableServiceLinks: false) has %s", k)
		}
	}
	if off["KUBERNETES_SERVICE_HOST"] != masterIP {
		t.Errorf("api-svcenv-off: KUBERNETES_SERVICE_HOST=%q, want %q", off["KUBERNETES_SERVICE_HOST"], masterIP)
	}
}
