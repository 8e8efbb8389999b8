//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// kubeletAPIRBAC are the ServiceAccounts and RBAC objects of the
// authorization matrix: kapi-none has no rights, kapi-reader may get and
// create nodes/proxy, nodes/metrics, nodes/stats and nodes/log,
// kapi-metrics may only get nodes/metrics. Applied idempotently and
// deleted at the end.
const kubeletAPIRBAC = `apiVersion: v1
kind: ServiceAccount
metadata: {name: kapi-none, namespace: default}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: kapi-reader, namespace: default}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: kapi-metrics, namespace: default}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: heartlet-e2e-kapi-reader}
rules:
- apiGroups: [""]
  resources: [nodes/proxy, nodes/metrics, nodes/stats, nodes/log]
  verbs: [get, create]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: heartlet-e2e-kapi-metrics}
rules:
- apiGroups: [""]
  resources: [nodes/metrics]
  verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: heartlet-e2e-kapi-reader}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: heartlet-e2e-kapi-reader}
subjects:
- {kind: ServiceAccount, name: kapi-reader, namespace: default}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: heartlet-e2e-kapi-metrics}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: heartlet-e2e-kapi-metrics}
subjects:
- {kind: ServiceAccount, name: kapi-metrics, namespace: default}
`

// TestKubeletAPI runs a cluster-mode heartlet with the default
// configuration file (webhook authentication and authorization, the
// cluster CA as client CA) and checks the kubelet API through kubectl,
// which goes through the API server's kubelet-client identity, and
// directly with several identities.
func TestKubeletAPI(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{})

	node, err := getNode()
	if err != nil {
		t.Fatal(err)
	}
	if got := node.Status.DaemonEndpoints.KubeletEndpoint.Port; int(got) != h.apiPort {
		t.Errorf("daemonEndpoints.kubeletEndpoint.Port = %d, want the configured port %d", got, h.apiPort)
	}

	// main writes five lines at once, then one line a second; crash
	// counts its runs in an emptyDir, writes "run-N" and fails after 6 s.
	createPod(t, apiPod("kapi-logs", func(p *v1.Pod) {
		p.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
		crash := shContainer("crash", `n=$(cat /data/n 2>/dev/null || echo 0); n=$((n+1)); echo $n > /data/n; echo run-$n; sleep 6; exit 1`)
		crash.VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
		p.Spec.Containers = []v1.Container{
			shContainer("main", `for i in 1 2 3 4 5; do echo line-$i; done; i=6; while true; do echo line-$i; i=$((i+1)); sleep 1; done`),
			crash,
		}
	}))
	waitAPIPod(t, h, "kapi-logs", podStartTimeout, "to have main running", func(p *v1.Pod) bool {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == "main" && cs.State.Running != nil {
				return true
			}
		}
		return false
	})
	// line-11 is written 5 s after the burst of line-1..line-6.
	waitFor(t, 30*time.Second, "main to have written line-11", func() (bool, string) {
		out, err := kubectl("logs", "-n", "default", "kapi-logs", "-c", "main")
		return err == nil && strings.Contains(out, "line-11\n"), fmt.Sprintf("%q %v", out, err)
	})

	t.Run("logs", func(t *testing.T) { testKubectlLogs(t) })
	t.Run("previous", func(t *testing.T) { testKubectlLogsPrevious(t, h) })
	t.Run("auth", func(t *testing.T) { testKubeletAPIAuth(t, h, node) })
}

func testKubectlLogs(t *testing.T) {
	logs := func(args ...string) string {
		t.Helper()
		return mustKubectl(t, append([]string{"logs", "-n", "default", "kapi-logs", "-c", "main"}, args...)...)
	}
	all := logs()
	if !strings.HasPrefix(all, "line-1\nline-2\nline-3\nline-4\nline-5\nline-6\n") {
		t.Errorf("kubectl logs = %q, want it to start with line-1..line-6", all)
	}

	tail := logs("--tail", "2")
	if lines := strings.Split(strings.TrimSuffix(tail, "\n"), "\n"); len(lines) != 2 || !strings.HasPrefix(lines[0], "line-") {
		t.Errorf("kubectl logs --tail 2 = %q, want two lines", tail)
	}

	// --timestamps prefixes RFC 3339 (nano) timestamps, as the kubelet
	// writes them (pkg/kubelet/kuberuntime/logs: timeFormatOut).
	ts := logs("--timestamps", "--tail", "1")
	re := regexp.MustCompile(`^(\S+) line-\d+\n$`)
	if m := re.FindStringSubmatch(ts); m == nil {
		t.Errorf("kubectl logs --timestamps = %q, want \"<time> line-N\"", ts)
	} else if _, err := time.Parse(time.RFC3339Nano, m[1]); err != nil {
		t.Errorf("kubectl logs --timestamps: %q is not RFC 3339: %v", m[1], err)
	}

	if got := logs("--limit-bytes", "10"); got != "line-1\nlin" {
		t.Errorf("kubectl logs --limit-bytes 10 = %q, want %q", got, "line-1\nlin")
	}

	// --since 2s: only the last few one-a-second lines, not the burst
	// written 5 s or more ago.
	since := logs("--since", "2s")
	if strings.Contains(since, "line-1\n") || !strings.Contains(since, "line-") {
		t.Errorf("kubectl logs --since 2s = %q, want only recent lines", since)
	}

	// -f: new lines arrive while following.
	last := lastLineNumber(t, logs("--tail", "1"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kubectl", "--kubeconfig", adminKubeconfig, "logs", "-f", "-n", "default", "kapi-logs", "-c", "main", "--tail", "1")
	out, _ := cmd.Output() // killed by the timeout
	if n := lastLineNumber(t, string(out)); n < last+2 {
		t.Errorf("kubectl logs -f for 5 s ended at line-%d, started at line-%d: want new lines (output %q)", n, last, out)
	}
}

// lastLineNumber is N of the last "line-N" in s.
func lastLineNumber(t *testing.T, s string) int {
	t.Helper()
	m := regexp.MustCompile(`line-(\d+)\n`).FindAllStringSubmatch(s, -1)
	if len(m) == 0 {
		t.Fatalf("no line-N in %q", s)
	}
	n, _ := strconv.Atoi(m[len(m)-1][1])
	return n
}

func testKubectlLogsPrevious(t *testing.T, h *heartlet) {
	// The previous instance's log exists while the restarted one runs
	// (heartlet keeps the newest exited instance, as the kubelet does).
	waitAPIPod(t, h, "kapi-logs", 90*time.Second, "to run crash again after a restart", func(p *v1.Pod) bool {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == "crash" && cs.RestartCount >= 1 && cs.State.Running != nil {
				return true
			}
		}
		return false
	})
	prev := mustKubectl(t, "logs", "-n", "default", "kapi-logs", "-c", "crash", "--previous")
	cur := mustKubectl(t, "logs", "-n", "default", "kapi-logs", "-c", "crash")
	pm := regexp.MustCompile(`^run-(\d+)\n$`).FindStringSubmatch(prev)
	cm := regexp.MustCompile(`^run-(\d+)\n$`).FindStringSubmatch(cur)
	if pm == nil || cm == nil {
		t.Fatalf("kubectl logs --previous = %q, current = %q; want run-N each", prev, cur)
	}
	p, _ := strconv.Atoi(pm[1])
	c, _ := strconv.Atoi(cm[1])
	if p >= c {
		t.Errorf("previous log run-%d is not older than the current run-%d", p, c)
	}
}

func testKubeletAPIAuth(t *testing.T, h *heartlet, node *v1.Node) {
	var ip string
	for _, a := range node.Status.Addresses {
		if a.Type == v1.NodeInternalIP {
			ip = a.Address
			break
		}
	}
	if ip == "" {
		t.Fatalf("node has no InternalIP: %v", node.Status.Addresses)
	}
	base := "https://" + net.JoinHostPort(ip, strconv.Itoa(h.apiPort))

	if _, err := kubectlIn([]byte(kubeletAPIRBAC), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := kubectlIn([]byte(kubeletAPIRBAC), "delete", "--ignore-not-found", "-f", "-"); err != nil {
			t.Errorf("delete RBAC: %v", err)
		}
	})
	token := func(sa string) string {
		t.Helper()
		return strings.TrimSpace(mustKubectl(t, "create", "token", "-n", "default", sa))
	}

	// The self-signed serving certificate names the node IP.
	plain := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := plain.Get(base + "/pods")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if certs := resp.TLS.PeerCertificates; len(certs) == 0 || certs[0].VerifyHostname(ip) != nil {
		t.Errorf("serving certificate does not name %s", ip)
	}

	wrongCA := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		InsecureSkipVerify: true, Certificates: []tls.Certificate{foreignClientCert(t)}}}}
	none, reader, metricsOnly := token("kapi-none"), token("kapi-reader"), token("kapi-metrics")

	// Every endpoint, with each identity: no credentials, a client
	// certificate of a foreign CA and a bad token are 401; a ServiceAccount
	// without RBAC is 403 naming the subresources checked (messages as
	// upstream's auth filter); an authorized one gets the endpoint's answer.
	for _, ep := range kubeletAPIEndpoints {
		t.Run(ep.method+" "+ep.path, func(t *testing.T) {
			cases := []struct {
				who    string
				client *http.Client
				token  string
				want   int
				body   string
			}{
				{"no credentials", plain, "", http.StatusUnauthorized, "Unauthorized"},
				{"client cert of a foreign CA", wrongCA, "", http.StatusUnauthorized, "Unauthorized"},
				{"bad token", plain, "not-a-token", http.StatusUnauthorized, "Unauthorized"},
				{"SA without RBAC", plain, none, http.StatusForbidden, fmt.Sprintf(
					"Forbidden (user=system:serviceaccount:default:kapi-none, verb=%s, resource=nodes, subresource(s)=%v)", ep.verb, ep.subresources)},
				{"authorized SA", plain, reader, ep.want, ep.body},
			}
			for _, c := range cases {
				code, body := kubeletAPIRequest(t, c.client, c.token, ep.method, base+ep.path)
				if code != c.want || !strings.Contains(body, c.body) {
					t.Errorf("%s: %s %s = %d %.300q, want %d containing %q", c.who, ep.method, ep.path, code, body, c.want, c.body)
				}
			}
		})
	}

	// Finer RBAC: nodes/metrics alone opens /metrics but not /pods.
	if code, body := kubeletAPIRequest(t, plain, metricsOnly, http.MethodGet, base+"/metrics"); code != http.StatusOK || !strings.Contains(body, "kubelet_") {
		t.Errorf("metrics-only /metrics = %d %.200q, want 200 with kubelet_ metrics", code, body)
	}
	if code, body := kubeletAPIRequest(t, plain, metricsOnly, http.MethodGet, base+"/pods"); code != http.StatusForbidden || !strings.Contains(body, "subresource(s)=[pods proxy]") {
		t.Errorf("metrics-only /pods = %d %.200q, want 403 for [pods proxy]", code, body)
	}

	// The API server's own identity (kubectl get --raw through nodes/proxy).
	out := mustKubectl(t, "get", "--raw", "/api/v1/nodes/"+clusterNode+"/proxy/configz")
	var cz struct {
		KubeletConfig struct {
			Port int `json:"port"`
		} `json:"kubeletconfig"`
	}
	if err := json.Unmarshal([]byte(out), &cz); err != nil || cz.KubeletConfig.Port != h.apiPort {
		t.Errorf("configz through the API server = %.300q (%v), want kubeletconfig.port %d", out, err, h.apiPort)
	}
}

// foreignClientCert is a client certificate signed by a CA of its own,
// which the node does not trust.
func foreignClientCert(t *testing.T) tls.Certificate {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "foreign-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestKubeletAPIStandalone checks the HTTPS port of a standalone heartlet
// (anonymous, AlwaysAllow): it serves with the self-signed certificate it
// made in <root-dir>/pki, and /configz shows the effective configuration.
func TestKubeletAPIStandalone(t *testing.T) {
	h := startHeartlet(t)
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	var served *x509.Certificate
	waitFor(t, 20*time.Second, "the kubelet API to serve /configz", func() (bool, string) {
		resp, err := c.Get(fmt.Sprintf("https://127.0.0.1:%d/configz", h.apiPort))
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var cz struct {
			KubeletConfig struct {
				Port          int `json:"port"`
				Authorization struct {
					Mode string `json:"mode"`
				} `json:"authorization"`
			} `json:"kubeletconfig"`
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &cz) != nil ||
			cz.KubeletConfig.Port != h.apiPort || cz.KubeletConfig.Authorization.Mode != "AlwaysAllow" {
			return false, fmt.Sprintf("%d %.200q", resp.StatusCode, body)
		}
		served = resp.TLS.PeerCertificates[0]
		return true, ""
	})
	data, err := os.ReadFile(filepath.Join(h.rootDir, "pki", "kubelet.crt"))
	if err != nil {
		t.Fatalf("self-signed certificate: %v", err)
	}
	block, _ := pem.Decode(data)
	if block == nil || !bytes.Equal(block.Bytes, served.Raw) {
		t.Errorf("the served certificate is not <root-dir>/pki/kubelet.crt")
	}
	if _, err := os.Stat(filepath.Join(h.rootDir, "pki", "kubelet.key")); err != nil {
		t.Errorf("self-signed key: %v", err)
	}
}

// kubeletAPIEndpoint is one endpoint of the authorization matrix: the
// verb and subresources upstream's filter checks, and what an authorized
// caller gets.
type kubeletAPIEndpoint struct {
	method, path string
	verb         string
	subresources []string
	want         int
	body         string // substring of an authorized caller's answer
}

// kubeletAPIEndpoints are the kubelet API's endpoints; the pod kapi-logs
// (container main) runs while they are checked.
var kubeletAPIEndpoints = []kubeletAPIEndpoint{
	{"GET", "/healthz", "get", []string{"healthz", "proxy"}, http.StatusOK, "ok"},
	{"GET", "/pods", "get", []string{"pods", "proxy"}, http.StatusOK, `"kapi-logs"`},
	{"GET", "/runningpods/", "get", []string{"pods", "proxy"}, http.StatusOK, `"kapi-logs"`},
	{"GET", "/configz", "get", []string{"configz", "proxy"}, http.StatusOK, `{"kubeletconfig":`},
	{"GET", "/metrics", "get", []string{"metrics"}, http.StatusOK, "kubelet_"},
	{"GET", "/metrics/probes", "get", []string{"metrics"}, http.StatusOK, "process_start_time_seconds"},
	{"GET", "/metrics/resource", "get", []string{"metrics"}, http.StatusOK, "node_cpu_usage_seconds_total"},
	{"GET", "/metrics/cadvisor", "get", []string{"metrics"}, http.StatusOK, "container_cpu_usage_seconds_total"},
	{"GET", "/stats/summary", "get", []string{"stats"}, http.StatusOK, `"nodeName":"` + clusterNode + `"`},
	{"GET", "/logs/", "get", []string{"log"}, http.StatusOK, "dpkg.log"},
	{"GET", "/debug/pprof/", "get", []string{"proxy"}, http.StatusOK, "goroutine"},
	{"GET", "/containerLogs/default/kapi-logs/main?tailLines=1", "get", []string{"proxy"}, http.StatusOK, "line-"},
	{"GET", "/containerLogs/default/nope/main", "get", []string{"proxy"}, http.StatusNotFound, `pod "nope" does not exist`},
	// The streaming endpoints want an upgraded connection (the streaming
	// tests use them for real); POST is verb create.
	{"POST", "/exec/default/kapi-logs/main?command=true&output=1", "create", []string{"proxy"}, http.StatusBadRequest, "Upgrade request required"},
	{"GET", "/attach/default/kapi-logs/main?output=1", "get", []string{"proxy"}, http.StatusBadRequest, "Upgrade request required"},
	{"GET", "/portForward/default/kapi-logs", "get", []string{"proxy"}, http.StatusBadRequest, "Upgrade request required"},
	{"POST", "/run/default/kapi-logs/main?cmd=echo+ran-by-run", "create", []string{"proxy"}, http.StatusOK, "ran-by-run"},
}

// kubeletAPIRequest sends one request, with a bearer token unless token
// is empty, and returns the status code and (the start of) the body.
func kubeletAPIRequest(t *testing.T, c *http.Client, token, method, url string) (int, string) {
	t.Helper()
	hr, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		hr.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(hr)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(body)
}

// enableServer: false leaves the authenticated kubelet API off, as
// upstream's; the read-only and healthz ports still serve, and the start-up
// warning about fields heartlet ignores does not name enableServer.
func TestKubeletAPIDisabled(t *testing.T) {
	h := newHeartlet(t, "enableServer: false\n")
	t.Cleanup(h.cleanup)
	h.start() // waits for the read-only port's /pods
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", h.healthzPort))
	if err != nil {
		t.Fatalf("healthz: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("healthz = %d, want 200", resp.StatusCode)
	}
	conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", h.apiPort), 2*time.Second)
	if err == nil {
		conn.Close()
		t.Errorf("the kubelet API port %d accepts connections with enableServer: false", h.apiPort)
	}
	if h.logContains("enableServer (=false)") {
		t.Errorf("the start-up warning names enableServer, which heartlet acts on")
	}
}
