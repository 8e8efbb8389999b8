package podfields

import (
	"bytes"
	"flag"
	"os"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

var update = flag.Bool("update", false, "rewrite docs/pod-fields.md")

// expanded are the types whose fields the table lists one by one.
var expanded = map[reflect.Type]bool{
	reflect.TypeFor[v1.PodSecurityContext](): true,
	reflect.TypeFor[v1.Container]():          true,
	reflect.TypeFor[v1.EphemeralContainer](): true,
	reflect.TypeFor[v1.SecurityContext]():    true,
	reflect.TypeFor[v1.Lifecycle]():          true,
	reflect.TypeFor[v1.LifecycleHandler]():   true,
	reflect.TypeFor[v1.Probe]():              true,
}

// apiPaths walks t's fields (inline structs flattened) and returns the
// path of each, descending into the expanded types.
func apiPaths(t reflect.Type, prefix string) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		name := strings.Split(sf.Tag.Get("json"), ",")[0]
		if name == "" && sf.Anonymous {
			out = append(out, apiPaths(sf.Type, prefix)...)
			continue
		}
		if name == "" || name == "-" {
			continue
		}
		p := prefix + name
		out = append(out, p)
		ft, list := sf.Type, ""
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Slice {
			ft, list = ft.Elem(), "[]"
		}
		if expanded[ft] {
			out = append(out, apiPaths(ft, p+list+".")...)
		}
	}
	return out
}

// TestEveryFieldListed fails when a field of the 1.37 pod API is missing
// from the table: a new field must be decided on, never silently ignored.
func TestEveryFieldListed(t *testing.T) {
	paths := apiPaths(reflect.TypeFor[v1.PodSpec](), "spec.")
	if len(paths) < 250 {
		t.Fatalf("walked only %d fields", len(paths))
	}
	have := map[string]bool{}
	for _, f := range table {
		if have[f.Path] {
			t.Errorf("%s is listed twice", f.Path)
		}
		have[f.Path] = true
	}
	for _, p := range paths {
		if !have[p] {
			t.Errorf("field %s of the pod API is not in the table: decide whether heartlet honours it", p)
		}
	}
}

// resolve follows path through the types from t; false when a segment
// names no field or a list segment is not a list.
func resolve(t reflect.Type, path string) bool {
	_, ok := resolveSteps(t, path)
	return ok
}

// TestEveryEntryExists fails when the table names a field that does not
// exist (a typo, or a field the API removed).
func TestEveryEntryExists(t *testing.T) {
	for _, f := range table {
		if !resolve(reflect.TypeFor[v1.Pod](), f.Path) {
			t.Errorf("table entry %s names no field of the pod API", f.Path)
		}
		if f.Support != Honoured && f.Note == "" {
			t.Errorf("%s is %s without a note saying why", f.Path, f.Support)
		}
	}
}

func TestResolveRejectsUnknown(t *testing.T) {
	for _, p := range []string{"spec.nosuch", "spec.containers.name", "spec.containers[].nosuch", "spec.hostNetwork.x"} {
		if resolve(reflect.TypeFor[v1.Pod](), p) {
			t.Errorf("%s resolved", p)
		}
	}
}

// minimal is a pod as the API server stores it after defaulting: the
// defaulted fields must not count as used.
func minimal() *v1.Pod {
	return &v1.Pod{Spec: v1.PodSpec{
		RestartPolicy:                 v1.RestartPolicyAlways,
		TerminationGracePeriodSeconds: ptr.To[int64](30),
		DNSPolicy:                     v1.DNSClusterFirst,
		SecurityContext:               &v1.PodSecurityContext{},
		SchedulerName:                 v1.DefaultSchedulerName,
		EnableServiceLinks:            ptr.To(true),
		PreemptionPolicy:              ptr.To(v1.PreemptLowerPriority),
		Priority:                      ptr.To[int32](0),
		ServiceAccountName:            "default",
		Tolerations: []v1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: v1.TolerationOpExists,
			Effect: v1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)}},
		Containers: []v1.Container{{
			Name: "app", Image: "busybox",
			TerminationMessagePath:   v1.TerminationMessagePathDefault,
			TerminationMessagePolicy: v1.TerminationMessageReadFile,
			ImagePullPolicy:          v1.PullIfNotPresent,
			ResizePolicy: []v1.ContainerResizePolicy{
				{ResourceName: v1.ResourceCPU, RestartPolicy: v1.NotRequired},
				{ResourceName: v1.ResourceMemory, RestartPolicy: v1.NotRequired},
			},
		}},
	}}
}

func paths(fs []Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.At)
	}
	return out
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name     string
		feat     Features
		change   func(p *v1.Pod)
		refusals []string
		warnings []string
	}{
		{name: "defaulted pod", change: func(*v1.Pod) {}},
		{name: "hostUsers true", change: func(p *v1.Pod) { p.Spec.HostUsers = ptr.To(true) }},
		{name: "hostUsers false", change: func(p *v1.Pod) { p.Spec.HostUsers = ptr.To(false) },
			refusals: []string{"spec.hostUsers"}},
		{name: "hostUsers false with user namespaces", feat: Features{UserNamespaces: true},
			change: func(p *v1.Pod) { p.Spec.HostUsers = ptr.To(false) }},
		{name: "image volume on a runtime that cannot mount images", change: func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{
				{Name: "cache", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
				{Name: "tools", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "registry.local/tools:1", PullPolicy: v1.PullIfNotPresent}}},
			}
		}, refusals: []string{"spec.volumes[tools].image"}},
		{name: "image volume on a runtime that mounts images", feat: Features{ImageVolumes: true}, change: func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "tools", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "registry.local/tools:1"}}}}
		}},
		{name: "no image volume, runtime without image volumes", change: func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "cache", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
		}},
		{name: "runtimeClassName", change: func(p *v1.Pod) { p.Spec.RuntimeClassName = ptr.To("gvisor") }},
		{name: "resourceClaims", change: func(p *v1.Pod) {
			p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu"}}
			p.Spec.Containers[0].Resources.Claims = []v1.ResourceClaim{{Name: "gpu"}}
		}, refusals: []string{"spec.resourceClaims", "spec.containers[app].resources.claims"}},
		{name: "volumeDevices", change: func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "init", VolumeDevices: []v1.VolumeDevice{{Name: "d", DevicePath: "/dev/x"}}}}
		}},
		{name: "appArmor Unconfined", change: func(p *v1.Pod) {
			p.Spec.SecurityContext.AppArmorProfile = &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeUnconfined}
		}},
		{name: "appArmor RuntimeDefault", change: func(p *v1.Pod) {
			p.Spec.SecurityContext.AppArmorProfile = &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}
			p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeLocalhost, LocalhostProfile: ptr.To("x")}}
		}, refusals: []string{"spec.securityContext.appArmorProfile", "spec.containers[app].securityContext.appArmorProfile"}},
		{name: "supplementalGroupsPolicy Strict without the feature", change: func(p *v1.Pod) {
			p.Spec.SecurityContext.SupplementalGroupsPolicy = ptr.To(v1.SupplementalGroupsPolicyStrict)
		}, refusals: []string{"spec.securityContext.supplementalGroupsPolicy"}},
		{name: "supplementalGroupsPolicy Strict with the feature", feat: Features{SupplementalGroupsPolicy: true}, change: func(p *v1.Pod) {
			p.Spec.SecurityContext.SupplementalGroupsPolicy = ptr.To(v1.SupplementalGroupsPolicyStrict)
		}},
		{name: "supplementalGroupsPolicy Merge", change: func(p *v1.Pod) {
			p.Spec.SecurityContext.SupplementalGroupsPolicy = ptr.To(v1.SupplementalGroupsPolicyMerge)
		}},
		{name: "sidecar restartPolicy", change: func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "side", RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways)}}
		}},
		{name: "recursiveReadOnly Enabled without the feature", change: func(p *v1.Pod) {
			p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{
				{Name: "a", RecursiveReadOnly: ptr.To(v1.RecursiveReadOnlyIfPossible)},
				{Name: "b", RecursiveReadOnly: ptr.To(v1.RecursiveReadOnlyEnabled)},
			}
		}, refusals: []string{"spec.containers[app].volumeMounts[b].recursiveReadOnly"}},
		{name: "recursiveReadOnly Enabled with the feature", feat: Features{RecursiveReadOnlyMounts: true}, change: func(p *v1.Pod) {
			p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "b", RecursiveReadOnly: ptr.To(v1.RecursiveReadOnlyEnabled)}}
		}},
		{name: "env fileKeyRef", change: func(p *v1.Pod) {
			p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "X", Value: "x"}, {Name: "Y", ValueFrom: &v1.EnvVarSource{FileKeyRef: &v1.FileKeySelector{Key: "k"}}}}
		}, refusals: []string{"spec.containers[app].env[Y].valueFrom.fileKeyRef"}},
		{name: "init container restartPolicy Never", change: func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "init", RestartPolicy: ptr.To(v1.ContainerRestartPolicyNever)}}
		}},
		{name: "app container restart rules", change: func(p *v1.Pod) {
			p.Spec.Containers[0].RestartPolicy = ptr.To(v1.ContainerRestartPolicyNever)
			p.Spec.Containers[0].RestartPolicyRules = []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestart}}
		}},
		{name: "restart rule RestartAllContainers", change: func(p *v1.Pod) {
			p.Spec.Containers[0].RestartPolicy = ptr.To(v1.ContainerRestartPolicyNever)
			p.Spec.Containers[0].RestartPolicyRules = []v1.ContainerRestartRule{
				{Action: v1.ContainerRestartRuleActionRestart},
				{Action: v1.ContainerRestartRuleActionRestartAllContainers},
			}
		}, refusals: []string{"spec.containers[app].restartPolicyRules[1].action"}},
		{name: "resizePolicy RestartContainer is honoured", change: func(p *v1.Pod) {
			p.Spec.Containers[0].ResizePolicy[1].RestartPolicy = v1.RestartContainer
		}},
		{name: "stopSignal and seLinuxChangePolicy", change: func(p *v1.Pod) {
			p.Spec.Containers[0].Lifecycle = &v1.Lifecycle{StopSignal: ptr.To(v1.SIGUSR1)}
			p.Spec.SecurityContext.SELinuxChangePolicy = ptr.To(v1.SELinuxChangePolicyRecursive)
		}, warnings: []string{"spec.securityContext.seLinuxChangePolicy", "spec.containers[app].lifecycle.stopSignal"}},
		{name: "ephemeral container", change: func(p *v1.Pod) {
			p.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "dbg"}, TargetContainerName: "app"}}
		}},
		{name: "ephemeral container with a stop signal", change: func(p *v1.Pod) {
			p.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "dbg",
				Lifecycle: &v1.Lifecycle{StopSignal: ptr.To(v1.SIGINT)}}}}
		}, warnings: []string{"spec.ephemeralContainers[dbg].lifecycle.stopSignal"}},
		{name: "refusal and warning together", change: func(p *v1.Pod) {
			p.Spec.HostUsers = ptr.To(false)
			p.Spec.SecurityContext.SELinuxChangePolicy = ptr.To(v1.SELinuxChangePolicyRecursive)
		}, refusals: []string{"spec.hostUsers"}, warnings: []string{"spec.securityContext.seLinuxChangePolicy"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := minimal()
			tc.change(p)
			r, w := Check(p, tc.feat)
			if got := paths(r); !reflect.DeepEqual(got, tc.refusals) {
				t.Errorf("refusals = %q, want %q", got, tc.refusals)
			}
			if got := paths(w); !reflect.DeepEqual(got, tc.warnings) {
				t.Errorf("warnings = %q, want %q", got, tc.warnings)
			}
		})
	}
}

func TestMessage(t *testing.T) {
	p := minimal()
	p.Spec.HostUsers = ptr.To(false)
	r, _ := Check(p, Features{})
	if got := Message(r); !strings.HasPrefix(got, "spec.hostUsers (false needs a runtime whose default handler reports user namespace support") {
		t.Errorf("message %q", got)
	}
}

func TestDoc(t *testing.T) {
	const path = "../../docs/pod-fields.md"
	doc := Doc()
	if *update {
		if err := os.WriteFile(path, doc, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (write it with go test ./internal/podfields -run TestDoc -update)", err)
	}
	if !bytes.Equal(got, doc) {
		t.Errorf("%s is stale: go test ./internal/podfields -run TestDoc -update", path)
	}
	for _, f := range table {
		if !bytes.Contains(doc, []byte("`"+f.Path+"`")) {
			t.Errorf("%s missing from the page", f.Path)
		}
	}
}

func TestAdmitAndWarning(t *testing.T) {
	p := minimal()
	if res := Admit(p, Features{}); !res.Admit {
		t.Errorf("defaulted pod refused: %+v", res)
	}
	if msg, ok := Warning(p, Features{}); ok {
		t.Errorf("defaulted pod warned: %s", msg)
	}
	p.Spec.HostUsers = ptr.To(false)
	p.Spec.Containers[0].Lifecycle = &v1.Lifecycle{StopSignal: ptr.To(v1.SIGUSR1)}
	res := Admit(p, Features{})
	if res.Admit || res.Reason != Reason || !strings.Contains(res.Message, "spec.hostUsers (") {
		t.Errorf("hostUsers: false: %+v", res)
	}
	msg, ok := Warning(p, Features{})
	if !ok || !strings.Contains(msg, "spec.containers[app].lifecycle.stopSignal (") || strings.Contains(msg, "hostUsers") {
		t.Errorf("warning %q %v", msg, ok)
	}
}

// TestCheckAllocations: admission runs Check twice per pod (refusals, then
// warnings); the table's paths are resolved once, not by reading struct
// tags per pod (565 allocations for this pod when every tag was split,
// 130 when each was cut), and a value's place is written only when it is
// a finding.
func TestCheckAllocations(t *testing.T) {
	pod := &v1.Pod{Spec: v1.PodSpec{
		Containers: []v1.Container{{Name: "c", Image: "busybox", VolumeMounts: []v1.VolumeMount{{Name: "v", MountPath: "/v"}}}},
		Volumes:    []v1.Volume{{Name: "v", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{}}}},
	}}
	if a := testing.AllocsPerRun(20, func() { Check(pod, Features{}) }); a > 20 {
		t.Errorf("Check of a one-container pod allocates %.0f objects, want at most 20", a)
	}
}

// BenchmarkCheck is admission's check of a defaulted one-container pod.
func BenchmarkCheck(b *testing.B) {
	pod := minimal()
	b.ReportAllocs()
	for b.Loop() {
		Check(pod, Features{})
	}
}
