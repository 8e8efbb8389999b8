package manifest

import (
	"errors"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/heartlet/heartlet/internal/podconfig"
)

var testOpts = Options{
	NodeName: "Node-1",
	Origin:   "/etc/kubernetes/manifests/web.yaml",
	Source:   podconfig.SourceFile,
	Seen:     time.Date(2025, 5, 6, 7, 8, 9, 10, time.UTC),
}

const webYAML = `apiVersion: v1
kind: Pod
metadata:
  name: web
  labels:
    app: web
spec:
  containers:
  - name: nginx
    image: nginx
    ports:
    - containerPort: 80
      hostPort: 8080
`

const webJSON = `{
  "apiVersion": "v1",
  "kind": "Pod",
  "metadata": {"name": "web", "labels": {"app": "web"}},
  "spec": {
    "containers": [
      {"name": "nginx", "image": "nginx", "ports": [{"containerPort": 80, "hostPort": 8080}]}
    ]
  }
}`

func TestParseAppliesStaticIdentityAndDefaults(t *testing.T) {
	tests := []struct {
		name string
		data string
	}{
		{name: "yaml", data: webYAML},
		{name: "json", data: webJSON},
		{name: "json with leading space", data: "\n  " + webJSON},
		{name: "json indented with tabs", data: strings.ReplaceAll(webJSON, "  ", "\t")},
		{name: "yaml with CRLF", data: strings.ReplaceAll(webYAML, "\n", "\r\n")},
		{name: "yaml with byte order mark", data: "\xef\xbb\xbf" + webYAML},
	}
	var uids []string
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod, err := Parse([]byte(tt.data), testOpts)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			checks := []struct {
				what      string
				got, want any
			}{
				{"name", pod.Name, "web-node-1"},
				{"namespace", pod.Namespace, "default"},
				{"nodeName", pod.Spec.NodeName, "Node-1"},
				{"uid length", len(pod.UID), 32},
				{"config.hash", pod.Annotations[podconfig.AnnotationConfigHash], string(pod.UID)},
				{"config.source", pod.Annotations[podconfig.AnnotationConfigSource], "file"},
				{"config.seen", pod.Annotations[podconfig.AnnotationConfigSeen], "2025-05-06T07:08:09.00000001Z"},
				{"label", pod.Labels["app"], "web"},
				{"restartPolicy", pod.Spec.RestartPolicy, v1.RestartPolicyAlways},
				{"dnsPolicy", pod.Spec.DNSPolicy, v1.DNSClusterFirst},
				{"grace", *pod.Spec.TerminationGracePeriodSeconds, int64(30)},
				{"schedulerName", pod.Spec.SchedulerName, "default-scheduler"},
				{"enableServiceLinks", *pod.Spec.EnableServiceLinks, true},
				{"securityContext set", pod.Spec.SecurityContext != nil, true},
				{"tolerations", len(pod.Spec.Tolerations), 1},
				{"toleration operator", pod.Spec.Tolerations[0].Operator, v1.TolerationOpExists},
				{"toleration effect", pod.Spec.Tolerations[0].Effect, v1.TaintEffectNoExecute},
				{"toleration key", pod.Spec.Tolerations[0].Key, ""},
				{"pullPolicy", pod.Spec.Containers[0].ImagePullPolicy, v1.PullAlways},
				{"terminationMessagePath", pod.Spec.Containers[0].TerminationMessagePath, "/dev/termination-log"},
				{"terminationMessagePolicy", pod.Spec.Containers[0].TerminationMessagePolicy, v1.TerminationMessageReadFile},
				{"port protocol", pod.Spec.Containers[0].Ports[0].Protocol, v1.ProtocolTCP},
				{"phase", pod.Status.Phase, v1.PodPending},
			}
			for _, c := range checks {
				if c.got != c.want {
					t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
				}
			}
			uids = append(uids, string(pod.UID))
		})
	}
	// The same pod written as YAML or JSON is the same content.
	for _, u := range uids {
		if u != uids[0] {
			t.Errorf("encodings of the same pod have different UIDs: %v", uids)
			break
		}
	}
}

func TestParseKeepsGivenNamespaceAndToleration(t *testing.T) {
	data := `apiVersion: v1
kind: Pod
metadata: {name: web, namespace: kube-system}
spec:
  tolerations:
  - operator: Exists
    effect: NoExecute
  - key: k
    operator: Exists
  containers: [{name: c, image: "busybox:1.36"}]
`
	pod, err := Parse([]byte(data), testOpts)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if pod.Namespace != "kube-system" {
		t.Errorf("namespace = %q", pod.Namespace)
	}
	if n := len(pod.Spec.Tolerations); n != 2 {
		t.Errorf("tolerations = %v, want the existing two without a duplicate", pod.Spec.Tolerations)
	}
	if p := pod.Spec.Containers[0].ImagePullPolicy; p != v1.PullIfNotPresent {
		t.Errorf("pull policy for a tagged image = %q", p)
	}
}

func TestParseErrors(t *testing.T) {
	const head = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n"
	tests := []struct {
		name string
		data string
		opts *Options
		want []string // substrings of the error
		line int      // line of the first problem, 0 to skip
	}{
		{name: "empty", data: "  \n", want: []string{"manifest is empty"}},
		{name: "bad yaml", data: "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n   x: y\n", want: []string{"invalid YAML"}, line: 5},
		{name: "bad json", data: "{\"apiVersion\": \"v1\",\n \"kind\": }", want: []string{"invalid JSON"}, line: 2},
		{name: "not an object", data: "- a\n- b\n", want: []string{"must be a YAML or JSON object"}},
		{name: "two documents", data: webYAML + "---\n" + webYAML, want: []string{"2 YAML documents"}},
		{name: "bad apiVersion", data: strings.Replace(webYAML, "apiVersion: v1", "apiVersion: apps/v1", 1), want: []string{`apiVersion: must be "v1", got "apps/v1"`}, line: 1},
		{name: "missing apiVersion", data: strings.Replace(webYAML, "apiVersion: v1\n", "", 1), want: []string{`apiVersion: must be "v1", got ""`}},
		{name: "bad kind", data: strings.Replace(webYAML, "kind: Pod", "kind: Deployment", 1), want: []string{`kind: must be "Pod", got "Deployment"`}, line: 2},
		{name: "wrong type", data: strings.Replace(webYAML, "containerPort: 80", "containerPort: eighty", 1), want: []string{"spec.containers[0].ports[0].containerPort: must be of type int32, got string"}, line: 12},
		{name: "bad quantity", data: head + "  containers:\n  - name: c\n    image: i\n    resources:\n      limits:\n        memory: 1Gx\n", want: []string{`spec.containers[0].resources.limits[memory]: invalid quantity "1Gx"`}, line: 11},
		{name: "missing name", data: "apiVersion: v1\nkind: Pod\nspec:\n  containers: [{name: c, image: i}]\n", want: []string{"metadata.name: Required value"}},
		{name: "invalid name", data: strings.Replace(webYAML, "name: web", "name: Web_1", 1), want: []string{"metadata.name: Invalid value: \"Web_1-node-1\""}, line: 4},
		{name: "name too long after suffix", data: strings.Replace(webYAML, "name: web", "name: "+strings.Repeat("a", 250), 1), want: []string{"metadata.name", "no more than 253"}},
		{name: "invalid namespace", data: strings.Replace(webYAML, "name: web", "name: web\n  namespace: Kube_System", 1), want: []string{"metadata.namespace: Invalid value"}, line: 5},
		{name: "invalid label", data: strings.Replace(webYAML, "app: web", "app: -web-", 1), want: []string{"metadata.labels: Invalid value"}},
		{name: "no containers", data: head + "  restartPolicy: Never\n", want: []string{"spec.containers: Required value"}},
		{name: "invalid container name", data: strings.Replace(webYAML, "name: nginx", "name: NGINX", 1), want: []string{`spec.containers[0].name: Invalid value: "NGINX"`}, line: 9},
		{name: "container name missing", data: head + "  containers:\n  - image: i\n", want: []string{"spec.containers[0].name: Required value"}},
		{name: "duplicate container name across init and app", data: head + "  initContainers:\n  - {name: c, image: i}\n  containers:\n  - {name: c, image: i}\n", want: []string{`spec.containers[0].name: Duplicate value: "c"`}, line: 9},
		{name: "empty image", data: head + "  containers:\n  - name: c\n", want: []string{"spec.containers[0].image: Required value"}},
		{name: "image with spaces", data: head + "  containers:\n  - {name: c, image: ' busybox'}\n", want: []string{"spec.containers[0].image: Invalid value"}},
		{name: "container port out of range", data: strings.Replace(webYAML, "containerPort: 80", "containerPort: 70000", 1), want: []string{"spec.containers[0].ports[0].containerPort: Invalid value: 70000"}, line: 12},
		{name: "container port zero", data: strings.Replace(webYAML, "containerPort: 80", "containerPort: 0", 1), want: []string{"spec.containers[0].ports[0].containerPort: Invalid value: 0"}},
		{name: "host port out of range", data: strings.Replace(webYAML, "hostPort: 8080", "hostPort: 65536", 1), want: []string{"spec.containers[0].ports[0].hostPort: Invalid value: 65536"}, line: 13},
		{name: "bad protocol", data: strings.Replace(webYAML, "hostPort: 8080", "hostPort: 8080\n      protocol: tcp", 1), want: []string{"spec.containers[0].ports[0].protocol: Unsupported value: \"tcp\""}, line: 14},
		{
			name: "duplicate host port",
			data: head + "  containers:\n  - name: a\n    image: i\n    ports: [{containerPort: 80, hostPort: 8080}]\n  - name: b\n    image: i\n    ports:\n    - {containerPort: 81, hostPort: 8080}\n",
			want: []string{"spec.containers[1].ports[0].hostPort: Duplicate value", "8080/TCP", "spec.containers[0].ports[0].hostPort"}, line: 13,
		},
		{
			name: "duplicate host port with sidecar",
			data: head + "  initContainers:\n  - {name: s, image: i, restartPolicy: Always, ports: [{containerPort: 80, hostPort: 9000, hostIP: 10.0.0.1}]}\n  containers:\n  - {name: a, image: i, ports: [{containerPort: 80, hostPort: 9000}]}\n",
			want: []string{"spec.containers[0].ports[0].hostPort: Duplicate value"},
		},
		{name: "bad restartPolicy", data: head + "  restartPolicy: Sometimes\n  containers: [{name: c, image: i}]\n", want: []string{`spec.restartPolicy: Unsupported value: "Sometimes"`}, line: 6},
		{name: "restartPolicy on app container unknown", data: head + "  containers: [{name: c, image: i, restartPolicy: Sometimes}]\n", want: []string{`spec.containers[0].restartPolicy: Unsupported value: "Sometimes"`}},
		{name: "restart rules without a policy", data: head + "  containers: [{name: c, image: i, restartPolicyRules: [{action: Restart, exitCodes: {operator: In, values: [42]}}]}]\n",
			want: []string{"spec.containers[0].restartPolicy: Required value"}},
		{name: "restart rule with a bad action, operator and no exit codes",
			data: head + "  initContainers: [{name: i, image: i, restartPolicy: Never, restartPolicyRules: [{action: Kill, exitCodes: {operator: Between, values: [1]}}, {action: Restart}]}]\n  containers: [{name: c, image: i}]\n",
			want: []string{"spec.initContainers[0].restartPolicyRules[0].action: Unsupported value", "spec.initContainers[0].restartPolicyRules[0].exitCodes.operator: Unsupported value", "spec.initContainers[0].restartPolicyRules[1].exitCodes: Required value"}},
		{name: "bad dnsPolicy", data: head + "  dnsPolicy: Fancy\n  containers: [{name: c, image: i}]\n", want: []string{"spec.dnsPolicy: Unsupported value"}},
		{name: "requests above limits", data: head + "  containers:\n  - name: c\n    image: i\n    resources:\n      limits: {memory: 64Mi}\n      requests: {memory: 128Mi}\n", want: []string{"spec.containers[0].resources.requests[memory]: Invalid value: \"128Mi\": must be less than or equal to memory limit of 64Mi"}, line: 11},
		{name: "negative quantity", data: head + "  containers:\n  - name: c\n    image: i\n    resources:\n      requests: {cpu: -1}\n", want: []string{"spec.containers[0].resources.requests[cpu]: Invalid value: \"-1\": must not be negative"}},
		{name: "mount of unknown volume", data: head + "  containers:\n  - name: c\n    image: i\n    volumeMounts: [{name: data, mountPath: /data}]\n", want: []string{`spec.containers[0].volumeMounts[0].name: Not found: "data"`}},
		{name: "duplicate volume", data: head + "  volumes: [{name: v, emptyDir: {}}, {name: v, emptyDir: {}}]\n  containers: [{name: c, image: i}]\n", want: []string{`spec.volumes[1].name: Duplicate value: "v"`}},
		{name: "two volume sources", data: head + "  volumes: [{name: v, emptyDir: {}, hostPath: {path: /x}}]\n  containers: [{name: c, image: i}]\n", want: []string{"spec.volumes[0]: Forbidden: may have only one volume source"}},
		{name: "hostNetwork port mismatch", data: head + "  hostNetwork: true\n  containers: [{name: c, image: i, ports: [{containerPort: 80, hostPort: 81}]}]\n", want: []string{"spec.containers[0].ports[0].hostPort: Invalid value: 81: must equal containerPort"}},
		{name: "invalid hostnameOverride", data: head + "  hostnameOverride: Bad_Host\n  containers: [{name: c, image: i}]\n", want: []string{`spec.hostnameOverride: Invalid value: "Bad_Host"`}, line: 6},
		{name: "hostnameOverride too long", data: head + "  hostnameOverride: " + strings.Repeat("a.", 32) + "b\n  containers: [{name: c, image: i}]\n", want: []string{"spec.hostnameOverride: Too long"}},
		{name: "hostnameOverride with setHostnameAsFQDN", data: head + "  hostnameOverride: h.example\n  setHostnameAsFQDN: true\n  containers: [{name: c, image: i}]\n", want: []string{"spec.hostnameOverride: Forbidden: may not be set when setHostnameAsFQDN is true"}},
		{name: "hostnameOverride with hostNetwork", data: head + "  hostnameOverride: h.example\n  hostNetwork: true\n  containers: [{name: c, image: i}]\n", want: []string{"spec.hostnameOverride: Forbidden: may not be set when hostNetwork is true"}},
		{name: "ephemeral containers", data: head + "  containers: [{name: c, image: i}]\n  ephemeralContainers: [{name: e, image: i}]\n", want: []string{"spec.ephemeralContainers: Forbidden"}},
		{name: "several problems listed", data: head + "  restartPolicy: Sometimes\n  containers: [{name: C, image: ''}]\n", want: []string{"spec.restartPolicy", "spec.containers[0].name", "spec.containers[0].image"}},
		{name: "empty node name", data: webYAML, opts: &Options{Origin: "/x"}, want: []string{"node name is empty"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := testOpts
			if tt.opts != nil {
				o = *tt.opts
			}
			pod, err := Parse([]byte(tt.data), o)
			if err == nil {
				t.Fatalf("Parse accepted the manifest: %s", pod.Name)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			var me *Error
			if !errors.As(err, &me) || len(me.Problems) == 0 {
				t.Fatalf("error %T is not a *manifest.Error with problems", err)
			}
			if tt.line != 0 && me.Problems[0].Line != tt.line {
				t.Errorf("first problem on line %d, want %d (%v)", me.Problems[0].Line, tt.line, err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans several lines: %q", err)
			}
		})
	}
}

// TestParseWarnsAndAccepts checks the leniency of upstream's decoder:
// unknown and duplicated fields do not reject the manifest, and each is
// named in a warning with its line.
func TestParseWarnsAndAccepts(t *testing.T) {
	tests := []struct {
		name  string
		data  string
		want  string // the warning
		line  int
		check func(*v1.Pod) string
	}{
		{name: "unknown field named", data: strings.Replace(webYAML, "image: nginx", "image: nginx\n    imagePullPolcy: Always", 1), want: "spec.containers[0].imagePullPolcy: unknown field, ignored", line: 11},
		{name: "unknown top-level field", data: webYAML + "extra: 1\n", want: "extra: unknown field, ignored", line: 14},
		{name: "unknown field in json", data: strings.Replace(webJSON, `"image": "nginx"`, `"image": "nginx", "imagee": "x"`, 1), want: "spec.containers[0].imagee: unknown field, ignored", line: 7},
		{name: "wrong case is unknown", data: strings.Replace(webYAML, "image: nginx", "image: nginx\n    ImagePullPolicy: Never", 1), want: "spec.containers[0].ImagePullPolicy: unknown field, ignored", check: func(p *v1.Pod) string {
			if got := p.Spec.Containers[0].ImagePullPolicy; got != v1.PullAlways {
				return "imagePullPolicy " + string(got) + ", want the default Always"
			}
			return ""
		}},
		{name: "duplicate key in yaml, the last wins", data: strings.Replace(webYAML, "  name: web\n", "  name: web\n  name: web2\n", 1), want: "already set", line: 5, check: func(p *v1.Pod) string {
			if p.Name != "web2-node-1" {
				return "name " + p.Name + ", want web2-node-1"
			}
			return ""
		}},
		{name: "duplicate key in json, the last wins", data: strings.Replace(webJSON, `"name": "web",`, `"name": "web", "name": "web3",`, 1), want: "metadata.name: duplicate field, the last value is used", check: func(p *v1.Pod) string {
			if p.Name != "web3-node-1" {
				return "name " + p.Name + ", want web3-node-1"
			}
			return ""
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var warnings []Problem
			o := testOpts
			o.Warn = func(p Problem) { warnings = append(warnings, p) }
			pod, err := Parse([]byte(tt.data), o)
			if err != nil {
				t.Fatalf("Parse rejected the manifest: %v", err)
			}
			if len(warnings) != 1 {
				t.Fatalf("warnings %v, want one", warnings)
			}
			if !strings.Contains(warnings[0].String(), tt.want) {
				t.Errorf("warning %q does not contain %q", warnings[0], tt.want)
			}
			if tt.line != 0 && warnings[0].Line != tt.line {
				t.Errorf("warning on line %d, want %d", warnings[0].Line, tt.line)
			}
			if tt.check != nil {
				if msg := tt.check(pod); msg != "" {
					t.Error(msg)
				}
			}
		})
	}
	t.Run("a clean manifest warns nothing", func(t *testing.T) {
		o := testOpts
		o.Warn = func(p Problem) { t.Errorf("unexpected warning %s", p) }
		if _, err := Parse([]byte(webYAML), o); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("unknown field and a real error: rejected", func(t *testing.T) {
		data := strings.Replace(webYAML, "image: nginx", "image: nginx\n    imagee: x\n    restartPolicy: Sometimes", 1)
		if _, err := Parse([]byte(data), testOpts); err == nil {
			t.Fatal("Parse accepted an invalid restartPolicy")
		}
	})
}

// TestUIDFromManifestKept checks that metadata.uid, when given, is the
// pod's UID and config hash, as upstream keeps it.
func TestUIDFromManifestKept(t *testing.T) {
	data := strings.Replace(webYAML, "  name: web\n", "  name: web\n  uid: 0b5e6f1c-3c7a-4d0e-9d0b-8e7b4c1e2f3a\n", 1)
	pod, err := Parse([]byte(data), testOpts)
	if err != nil {
		t.Fatal(err)
	}
	if pod.UID != "0b5e6f1c-3c7a-4d0e-9d0b-8e7b4c1e2f3a" || pod.Annotations[podconfig.AnnotationConfigHash] != string(pod.UID) {
		t.Errorf("UID %q, config.hash %q; want the manifest's", pod.UID, pod.Annotations[podconfig.AnnotationConfigHash])
	}
}

func TestUID(t *testing.T) {
	base, err := Parse([]byte(webYAML), testOpts)
	if err != nil {
		t.Fatal(err)
	}
	reformatted := "# a comment\napiVersion: v1\nkind: Pod\nmetadata: {name: web, labels: {app: web}}\nspec:\n  containers:\n    - image: nginx\n      name: nginx\n      ports: [{hostPort: 8080, containerPort: 80}]\n"
	tests := []struct {
		name   string
		data   string
		mutate func(o *Options)
		same   bool
	}{
		{name: "same content node and path", data: webYAML, same: true},
		{name: "formatting and comments only", data: reformatted, same: true},
		{name: "different seen time", data: webYAML, mutate: func(o *Options) { o.Seen = o.Seen.Add(time.Hour) }, same: true},
		{name: "seen annotation in the file, hashed as upstream", data: strings.Replace(webYAML, "  labels:", "  annotations: {kubernetes.io/config.seen: yesterday}\n  labels:", 1)},
		{name: "image changed", data: strings.Replace(webYAML, "image: nginx", "image: nginx:1.27", 1)},
		{name: "label changed", data: strings.Replace(webYAML, "app: web", "app: web2", 1)},
		{name: "annotation added", data: strings.Replace(webYAML, "  labels:", "  annotations: {a: b}\n  labels:", 1)},
		{name: "default made explicit: the defaulted pod is hashed", data: strings.Replace(webYAML, "spec:\n", "spec:\n  restartPolicy: Always\n", 1), same: true},
		{name: "different node", data: webYAML, mutate: func(o *Options) { o.NodeName = "node-2" }},
		{name: "different path", data: webYAML, mutate: func(o *Options) { o.Origin = "/etc/kubernetes/manifests/web2.yaml" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := testOpts
			if tt.mutate != nil {
				tt.mutate(&o)
			}
			pod, err := Parse([]byte(tt.data), o)
			if err != nil {
				t.Fatal(err)
			}
			if same := pod.UID == base.UID; same != tt.same {
				t.Errorf("UID %s vs %s: same = %v, want %v", pod.UID, base.UID, same, tt.same)
			}
			if pod.Annotations[podconfig.AnnotationConfigHash] != string(pod.UID) {
				t.Errorf("config.hash %q != UID %q", pod.Annotations[podconfig.AnnotationConfigHash], pod.UID)
			}
		})
	}
}

func TestDefaultPullPolicy(t *testing.T) {
	tests := []struct {
		image string
		want  v1.PullPolicy
	}{
		{"busybox", v1.PullAlways},
		{"busybox:latest", v1.PullAlways},
		{"busybox:1.36", v1.PullIfNotPresent},
		{"docker.io/library/busybox", v1.PullAlways},
		{"localhost:5000/busybox", v1.PullAlways},
		{"localhost:5000/busybox:v1", v1.PullIfNotPresent},
		{"localhost:5000/busybox:latest", v1.PullAlways},
		{"busybox@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", v1.PullIfNotPresent},
		{"busybox:1.36@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", v1.PullIfNotPresent},
		{"busybox:latest@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", v1.PullAlways},
	}
	for _, tt := range tests {
		if got := DefaultPullPolicy(tt.image); got != tt.want {
			t.Errorf("DefaultPullPolicy(%q) = %q, want %q", tt.image, got, tt.want)
		}
	}
}

func TestSetDefaultsDetails(t *testing.T) {
	data := `apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  hostNetwork: true
  volumes:
  - name: scratch
  - name: cfg
    configMap: {name: c}
  - name: host
    hostPath: {path: /var/log}
  initContainers:
  - name: init
    image: busybox:1
    resources:
      limits: {cpu: "0.0001", memory: 64Mi}
  containers:
  - name: app
    image: busybox:1
    imagePullPolicy: Never
    ports: [{containerPort: 9100}]
    env:
    - name: NODE
      valueFrom: {fieldRef: {fieldPath: spec.nodeName}}
    livenessProbe:
      httpGet: {port: 9100}
    readinessProbe:
      periodSeconds: 3
      tcpSocket: {port: 9100}
    resources:
      limits: {memory: 128Mi}
      requests: {memory: 64Mi}
`
	// Defaults alone: a static pod may not use the configMap volume.
	pod, _, _, err := Decode([]byte(data))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	SetDefaults(pod)
	app := pod.Spec.Containers[0]
	init := pod.Spec.InitContainers[0]
	checks := []struct {
		what      string
		got, want any
	}{
		{"explicit pull policy kept", app.ImagePullPolicy, v1.PullNever},
		{"hostNetwork hostPort", app.Ports[0].HostPort, int32(9100)},
		{"fieldRef apiVersion", app.Env[0].ValueFrom.FieldRef.APIVersion, "v1"},
		{"liveness timeout", app.LivenessProbe.TimeoutSeconds, int32(1)},
		{"liveness period", app.LivenessProbe.PeriodSeconds, int32(10)},
		{"liveness success", app.LivenessProbe.SuccessThreshold, int32(1)},
		{"liveness failure", app.LivenessProbe.FailureThreshold, int32(3)},
		{"httpGet path", app.LivenessProbe.HTTPGet.Path, "/"},
		{"httpGet scheme", app.LivenessProbe.HTTPGet.Scheme, v1.URISchemeHTTP},
		{"explicit period kept", app.ReadinessProbe.PeriodSeconds, int32(3)},
		{"explicit request kept", app.Resources.Requests.Memory().String(), "64Mi"},
		{"init request from limit", init.Resources.Requests.Memory().String(), "64Mi"},
		{"cpu rounded up to milli", init.Resources.Limits.Cpu().String(), "1m"},
		{"cpu request rounded up", init.Resources.Requests.Cpu().String(), "1m"},
		{"init pull policy", init.ImagePullPolicy, v1.PullIfNotPresent},
		{"init termination path", init.TerminationMessagePath, "/dev/termination-log"},
		{"volume without source is emptyDir", pod.Spec.Volumes[0].EmptyDir != nil, true},
		{"configMap mode", *pod.Spec.Volumes[1].ConfigMap.DefaultMode, int32(0o644)},
		{"hostPath type", *pod.Spec.Volumes[2].HostPath.Type, v1.HostPathUnset},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}
	if q := resource.MustParse("128Mi"); !app.Resources.Limits.Memory().Equal(q) {
		t.Errorf("limit changed to %v", app.Resources.Limits.Memory())
	}
}

// TestAPIReferencesRefused checks upstream's rule (pkg/api/pod,
// HasAPIObjectReference, applied by pkg/kubelet/config): a static pod that
// needs an API object is refused, naming the kind.
func TestAPIReferencesRefused(t *testing.T) {
	const head = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n"
	const c = "  containers:\n  - name: c\n    image: i\n"
	tests := []struct {
		name, spec, want string
	}{
		{"service account", "  serviceAccountName: sa\n" + c, "static pods may not reference serviceaccounts"},
		{"old service account field", "  serviceAccount: sa\n" + c, "static pods may not reference serviceaccounts"},
		{"image pull secret", "  imagePullSecrets: [{name: s}]\n" + c, "static pods may not reference secrets"},
		{"secret env", "  containers:\n  - name: c\n    image: i\n    env: [{name: A, valueFrom: {secretKeyRef: {name: s, key: k}}}]\n", "may not reference secrets"},
		{"secret envFrom in an init container", "  initContainers:\n  - name: i\n    image: i\n    envFrom: [{secretRef: {name: s}}]\n" + c, "may not reference secrets"},
		{"configmap env", "  containers:\n  - name: c\n    image: i\n    env: [{name: A, valueFrom: {configMapKeyRef: {name: m, key: k}}}]\n", "may not reference configmaps"},
		{"secret volume", "  volumes: [{name: v, secret: {secretName: s}}]\n" + c, "may not reference secrets"},
		{"configmap volume", "  volumes: [{name: v, configMap: {name: m}}]\n" + c, "may not reference configmaps"},
		{"pvc", "  volumes: [{name: v, persistentVolumeClaim: {claimName: x}}]\n" + c, "may not reference persistentvolumeclaims"},
		{"csi", "  volumes: [{name: v, csi: {driver: d}}]\n" + c, "may not reference csidrivers (via CSI volumes)"},
		{"projected token", "  volumes: [{name: v, projected: {sources: [{serviceAccountToken: {path: t}}]}}]\n" + c, "may not reference serviceaccounts (via projected volumes)"},
		{"projected downward API is fine", "  volumes: [{name: v, projected: {sources: [{downwardAPI: {items: [{path: l, fieldRef: {fieldPath: metadata.labels}}]}}]}}]\n" + c, ""},
		{"hostPath and emptyDir are fine", "  volumes: [{name: a, hostPath: {path: /x}}, {name: b, emptyDir: {}}]\n" + c, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(head+tt.spec), testOpts)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
		})
	}
}

func TestSplitPathAndLine(t *testing.T) {
	data := []byte("metadata:\n  labels:\n    a.b/c: d\nspec:\n  containers:\n  - name: x\n  - name: y\n    ports:\n    - containerPort: 1\n")
	loc, docs := newLocator(data)
	if docs != 1 {
		t.Fatalf("docs = %d", docs)
	}
	tests := []struct {
		path string
		line int
	}{
		{"metadata.labels[a.b/c]", 3},
		{"spec.containers[1].name", 7},
		{"spec.containers[1].ports[0].containerPort", 9},
		{"spec.containers[1].ports[0].hostPort", 9}, // closest present ancestor
		{"spec.containers[5].name", 5},
		{"nothing", 0},
		{"", 0},
	}
	for _, tt := range tests {
		if got := loc.Line(tt.path); got != tt.line {
			t.Errorf("Line(%q) = %d, want %d", tt.path, got, tt.line)
		}
	}
	var nilLoc *Locator
	if nilLoc.Line("spec") != 0 {
		t.Error("nil locator found a line")
	}
}

// TestParseAcceptsContainerRestartRules: a container's own restartPolicy
// and restartPolicyRules pass, as the 1.37 API server accepts them
// (ContainerRestartRules is on by default), on init and app containers.
func TestParseAcceptsContainerRestartRules(t *testing.T) {
	data := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  restartPolicy: Never\n" +
		"  initContainers:\n  - {name: i, image: i, restartPolicy: OnFailure}\n" +
		"  containers:\n  - {name: a, image: i, restartPolicy: Never, restartPolicyRules: [{action: Restart, exitCodes: {operator: In, values: [42]}}]}\n" +
		"  - {name: b, image: i, restartPolicy: Always}\n"
	pod, err := Parse([]byte(data), testOpts)
	if err != nil {
		t.Fatal(err)
	}
	r := pod.Spec.Containers[0].RestartPolicyRules
	if len(r) != 1 || r[0].ExitCodes == nil || r[0].ExitCodes.Operator != v1.ContainerRestartRuleOnExitCodesOpIn || r[0].ExitCodes.Values[0] != 42 {
		t.Errorf("restartPolicyRules = %+v", r)
	}
}

// TestPriorityWarning checks upstream's warnings about a static pod's
// priority (pkg/kubelet/config, getStaticPodPriorityWarning).
func TestPriorityWarning(t *testing.T) {
	const head = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c, image: i}]\n"
	for _, tc := range []struct {
		spec, want string
	}{
		{"", ""},
		{"  priorityClassName: system-node-critical\n  priority: 2000001000\n", ""},
		{"  priorityClassName: system-node-critical\n", "priorityClassName and nil priority"},
		{"  priority: 5\n", "priority without priorityClassName"},
		{"  priorityClassName: system-cluster-critical\n  priority: 2000000000\n", "a priority other than 2000001000"},
	} {
		var got []string
		o := testOpts
		o.Warn = func(p Problem) { got = append(got, p.String()) }
		if _, err := Parse([]byte(head+tc.spec), o); err != nil {
			t.Fatal(err)
		}
		switch {
		case tc.want == "" && len(got) != 0:
			t.Errorf("%q: warnings %q, want none", tc.spec, got)
		case tc.want != "" && (len(got) != 1 || !strings.Contains(got[0], tc.want)):
			t.Errorf("%q: warnings %q, want one containing %q", tc.spec, got, tc.want)
		}
	}
}
