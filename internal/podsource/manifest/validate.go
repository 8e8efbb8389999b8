package manifest

import (
	"fmt"
	"net/netip"
	"reflect"
	"strings"

	v1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validate checks a defaulted static pod for everything that would make it
// impossible to run. declaredName is metadata.name as written in the
// manifest, before the node suffix.
//
// Host ports must be unique among the containers that run at the same
// time: the app containers together with the restartable (sidecar) init
// containers. Two ports conflict when protocol and port match and the host
// IPs are equal or either is unspecified (it binds every address).
func validate(pod *v1.Pod, declaredName string) field.ErrorList {
	var errs field.ErrorList
	meta := field.NewPath("metadata")
	switch {
	case declaredName == "":
		errs = append(errs, field.Required(meta.Child("name"), "a static pod needs a name"))
	default:
		for _, msg := range validation.IsDNS1123Subdomain(pod.Name) {
			errs = append(errs, field.Invalid(meta.Child("name"), pod.Name, msg+" (after appending the node name)"))
		}
	}
	for _, msg := range validation.IsDNS1123Label(pod.Namespace) {
		errs = append(errs, field.Invalid(meta.Child("namespace"), pod.Namespace, msg))
	}
	errs = append(errs, metav1validation.ValidateLabels(pod.Labels, meta.Child("labels"))...)
	errs = append(errs, apivalidation.ValidateAnnotations(pod.Annotations, meta.Child("annotations"))...)
	errs = append(errs, validateSpec(&pod.Spec, field.NewPath("spec"))...)
	return errs
}

var (
	restartPolicies   = sets.New(v1.RestartPolicyAlways, v1.RestartPolicyOnFailure, v1.RestartPolicyNever)
	dnsPolicies       = sets.New(v1.DNSClusterFirst, v1.DNSClusterFirstWithHostNet, v1.DNSDefault, v1.DNSNone)
	pullPolicies      = sets.New(v1.PullAlways, v1.PullIfNotPresent, v1.PullNever)
	protocols         = sets.New(v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP)
	terminationMsgPol = sets.New(v1.TerminationMessageReadFile, v1.TerminationMessageFallbackToLogsOnError)
)

func validateSpec(spec *v1.PodSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if !restartPolicies.Has(spec.RestartPolicy) {
		errs = append(errs, field.NotSupported(path.Child("restartPolicy"), spec.RestartPolicy, sets.List(restartPolicies)))
	}
	if !dnsPolicies.Has(spec.DNSPolicy) {
		errs = append(errs, field.NotSupported(path.Child("dnsPolicy"), spec.DNSPolicy, sets.List(dnsPolicies)))
	}
	if spec.DNSPolicy == v1.DNSNone && (spec.DNSConfig == nil || len(spec.DNSConfig.Nameservers) == 0) {
		errs = append(errs, field.Required(path.Child("dnsConfig", "nameservers"), "dnsPolicy None needs at least one nameserver"))
	}
	if spec.ActiveDeadlineSeconds != nil && *spec.ActiveDeadlineSeconds <= 0 {
		errs = append(errs, field.Invalid(path.Child("activeDeadlineSeconds"), *spec.ActiveDeadlineSeconds, "must be greater than 0"))
	}
	if spec.TerminationGracePeriodSeconds != nil && *spec.TerminationGracePeriodSeconds < 0 {
		errs = append(errs, field.Invalid(path.Child("terminationGracePeriodSeconds"), *spec.TerminationGracePeriodSeconds, "must not be negative"))
	}
	if spec.Hostname != "" {
		for _, msg := range validation.IsDNS1123Label(spec.Hostname) {
			errs = append(errs, field.Invalid(path.Child("hostname"), spec.Hostname, msg))
		}
	}
	if spec.Subdomain != "" {
		for _, msg := range validation.IsDNS1123Label(spec.Subdomain) {
			errs = append(errs, field.Invalid(path.Child("subdomain"), spec.Subdomain, msg))
		}
	}
	if o := spec.HostnameOverride; o != nil {
		// As the API server validates it: the pod's hostname as a DNS
		// subdomain of at most 64 characters, exclusive with the FQDN as
		// hostname and with the host network.
		p := path.Child("hostnameOverride")
		for _, msg := range validation.IsDNS1123Subdomain(*o) {
			errs = append(errs, field.Invalid(p, *o, msg))
		}
		if len(*o) > 64 {
			errs = append(errs, field.TooLong(p, *o, 64))
		}
		if spec.SetHostnameAsFQDN != nil && *spec.SetHostnameAsFQDN {
			errs = append(errs, field.Forbidden(p, "may not be set when setHostnameAsFQDN is true"))
		}
		if spec.HostNetwork {
			errs = append(errs, field.Forbidden(p, "may not be set when hostNetwork is true"))
		}
	}
	if len(spec.EphemeralContainers) > 0 {
		errs = append(errs, field.Forbidden(path.Child("ephemeralContainers"), "cannot be set in a static pod"))
	}

	volumes, verrs := validateVolumes(spec.Volumes, path.Child("volumes"))
	errs = append(errs, verrs...)

	if len(spec.Containers) == 0 {
		errs = append(errs, field.Required(path.Child("containers"), "a pod needs at least one container"))
	}
	names := map[string]bool{}
	concurrent := &hostPorts{}
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		p := path.Child("initContainers").Index(i)
		errs = append(errs, validateContainer(c, p, names, volumes, spec.HostNetwork)...)
		errs = append(errs, validateRestartRules(c, p)...)
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			errs = append(errs, concurrent.add(c, p)...)
		} else {
			// A regular init container runs alone.
			errs = append(errs, (&hostPorts{}).add(c, p)...)
		}
	}
	for i := range spec.Containers {
		c := &spec.Containers[i]
		p := path.Child("containers").Index(i)
		errs = append(errs, validateContainer(c, p, names, volumes, spec.HostNetwork)...)
		errs = append(errs, validateRestartRules(c, p)...)
		errs = append(errs, concurrent.add(c, p)...)
	}
	if spec.Resources != nil {
		errs = append(errs, validateResources(spec.Resources, path.Child("resources"))...)
	}
	return errs
}

// Container restart policies, rule actions and operators the API accepts
// (with ContainerRestartRules and RestartAllContainersOnContainerExits, on
// by default in 1.37), and its limits on rules and exit codes.
var (
	containerRestartPolicies = sets.New(v1.ContainerRestartPolicyAlways, v1.ContainerRestartPolicyOnFailure, v1.ContainerRestartPolicyNever)
	restartRuleActions       = sets.New(v1.ContainerRestartRuleActionRestart, v1.ContainerRestartRuleActionRestartAllContainers)
	restartRuleOperators     = sets.New(v1.ContainerRestartRuleOnExitCodesOpIn, v1.ContainerRestartRuleOnExitCodesOpNotIn)
)

const (
	maxRestartRules     = 20
	maxRestartExitCodes = 255
)

// validateRestartRules checks a container's own restartPolicy and
// restartPolicyRules as the API server does: rules need a policy, and each
// rule an action and exit codes with a known operator.
func validateRestartRules(c *v1.Container, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case c.RestartPolicy == nil && len(c.RestartPolicyRules) > 0:
		errs = append(errs, field.Required(p.Child("restartPolicy"), "must specify restartPolicy when restart rules are used"))
	case c.RestartPolicy != nil && !containerRestartPolicies.Has(*c.RestartPolicy):
		errs = append(errs, field.NotSupported(p.Child("restartPolicy"), *c.RestartPolicy, sets.List(containerRestartPolicies)))
	}
	if len(c.RestartPolicyRules) > maxRestartRules {
		errs = append(errs, field.TooMany(p.Child("restartPolicyRules"), len(c.RestartPolicyRules), maxRestartRules))
	}
	for i, r := range c.RestartPolicyRules {
		rp := p.Child("restartPolicyRules").Index(i)
		if !restartRuleActions.Has(r.Action) {
			errs = append(errs, field.NotSupported(rp.Child("action"), r.Action, sets.List(restartRuleActions)))
		}
		if r.ExitCodes == nil {
			errs = append(errs, field.Required(rp.Child("exitCodes"), "must be specified"))
			continue
		}
		if !restartRuleOperators.Has(r.ExitCodes.Operator) {
			errs = append(errs, field.NotSupported(rp.Child("exitCodes", "operator"), r.ExitCodes.Operator, sets.List(restartRuleOperators)))
		}
		if len(r.ExitCodes.Values) > maxRestartExitCodes {
			errs = append(errs, field.TooMany(rp.Child("exitCodes", "values"), len(r.ExitCodes.Values), maxRestartExitCodes))
		}
	}
	return errs
}

// validateVolumes checks volume names and sources and returns the set of
// valid names.
func validateVolumes(vols []v1.Volume, path *field.Path) (sets.Set[string], field.ErrorList) {
	var errs field.ErrorList
	names := sets.New[string]()
	for i := range vols {
		v := &vols[i]
		p := path.Index(i)
		switch msgs := validation.IsDNS1123Label(v.Name); {
		case v.Name == "":
			errs = append(errs, field.Required(p.Child("name"), "volume needs a name"))
		case len(msgs) > 0:
			for _, msg := range msgs {
				errs = append(errs, field.Invalid(p.Child("name"), v.Name, msg))
			}
		case names.Has(v.Name):
			errs = append(errs, field.Duplicate(p.Child("name"), v.Name))
		default:
			names.Insert(v.Name)
		}
		if n := countSources(&v.VolumeSource); n > 1 {
			errs = append(errs, field.Forbidden(p, fmt.Sprintf("may have only one volume source, has %d", n)))
		}
		if v.HostPath != nil && v.HostPath.Path == "" {
			errs = append(errs, field.Required(p.Child("hostPath", "path"), "hostPath volume needs a path"))
		}
	}
	return names, errs
}

// countSources returns how many volume sources are set.
func countSources(vs *v1.VolumeSource) int {
	n := 0
	rv := reflect.ValueOf(vs).Elem()
	for i := 0; i < rv.NumField(); i++ {
		if f := rv.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			n++
		}
	}
	return n
}

func validateContainer(c *v1.Container, path *field.Path, names map[string]bool, volumes sets.Set[string], hostNetwork bool) field.ErrorList {
	var errs field.ErrorList
	switch msgs := validation.IsDNS1123Label(c.Name); {
	case c.Name == "":
		errs = append(errs, field.Required(path.Child("name"), "container needs a name"))
	case len(msgs) > 0:
		for _, msg := range msgs {
			errs = append(errs, field.Invalid(path.Child("name"), c.Name, msg))
		}
	case names[c.Name]:
		errs = append(errs, field.Duplicate(path.Child("name"), c.Name))
	default:
		names[c.Name] = true
	}
	switch {
	case c.Image == "":
		errs = append(errs, field.Required(path.Child("image"), "container needs an image"))
	case strings.TrimSpace(c.Image) != c.Image:
		errs = append(errs, field.Invalid(path.Child("image"), c.Image, "must not have leading or trailing whitespace"))
	}
	if !pullPolicies.Has(c.ImagePullPolicy) {
		errs = append(errs, field.NotSupported(path.Child("imagePullPolicy"), c.ImagePullPolicy, sets.List(pullPolicies)))
	}
	if !terminationMsgPol.Has(c.TerminationMessagePolicy) {
		errs = append(errs, field.NotSupported(path.Child("terminationMessagePolicy"), c.TerminationMessagePolicy, sets.List(terminationMsgPol)))
	}
	portNames := map[string]bool{}
	for i := range c.Ports {
		port := &c.Ports[i]
		p := path.Child("ports").Index(i)
		if port.Name != "" {
			for _, msg := range validation.IsValidPortName(port.Name) {
				errs = append(errs, field.Invalid(p.Child("name"), port.Name, msg))
			}
			if portNames[port.Name] {
				errs = append(errs, field.Duplicate(p.Child("name"), port.Name))
			}
			portNames[port.Name] = true
		}
		for _, msg := range validation.IsValidPortNum(int(port.ContainerPort)) {
			errs = append(errs, field.Invalid(p.Child("containerPort"), port.ContainerPort, msg))
		}
		if port.HostPort != 0 {
			for _, msg := range validation.IsValidPortNum(int(port.HostPort)) {
				errs = append(errs, field.Invalid(p.Child("hostPort"), port.HostPort, msg))
			}
		}
		if hostNetwork && port.HostPort != port.ContainerPort {
			errs = append(errs, field.Invalid(p.Child("hostPort"), port.HostPort, "must equal containerPort with hostNetwork"))
		}
		if !protocols.Has(port.Protocol) {
			errs = append(errs, field.NotSupported(p.Child("protocol"), port.Protocol, sets.List(protocols)))
		}
		if port.HostIP != "" {
			if _, err := netip.ParseAddr(port.HostIP); err != nil {
				errs = append(errs, field.Invalid(p.Child("hostIP"), port.HostIP, "must be an IP address"))
			}
		}
	}
	mounts := map[string]bool{}
	for i := range c.VolumeMounts {
		m := &c.VolumeMounts[i]
		p := path.Child("volumeMounts").Index(i)
		if !volumes.Has(m.Name) {
			errs = append(errs, field.NotFound(p.Child("name"), m.Name))
		}
		switch {
		case m.MountPath == "":
			errs = append(errs, field.Required(p.Child("mountPath"), "volume mount needs a path"))
		case mounts[m.MountPath]:
			errs = append(errs, field.Invalid(p.Child("mountPath"), m.MountPath, "must be unique within the container"))
		}
		mounts[m.MountPath] = true
	}
	for i := range c.Env {
		if c.Env[i].Name == "" {
			errs = append(errs, field.Required(path.Child("env").Index(i).Child("name"), "environment variable needs a name"))
		}
	}
	errs = append(errs, validateResources(&c.Resources, path.Child("resources"))...)
	return errs
}

// validateResources checks that quantities are not negative and that no
// request exceeds its limit.
func validateResources(r *v1.ResourceRequirements, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, name := range sortedNames(r.Limits) {
		if q := r.Limits[name]; q.Sign() < 0 {
			errs = append(errs, field.Invalid(path.Child("limits").Key(string(name)), q.String(), "must not be negative"))
		}
	}
	for _, name := range sortedNames(r.Requests) {
		q := r.Requests[name]
		if q.Sign() < 0 {
			errs = append(errs, field.Invalid(path.Child("requests").Key(string(name)), q.String(), "must not be negative"))
			continue
		}
		if lim, ok := r.Limits[name]; ok && q.Cmp(lim) > 0 {
			errs = append(errs, field.Invalid(path.Child("requests").Key(string(name)), q.String(), fmt.Sprintf("must be less than or equal to %s limit of %s", name, lim.String())))
		}
	}
	return errs
}

func sortedNames(rl v1.ResourceList) []v1.ResourceName {
	names := make([]v1.ResourceName, 0, len(rl))
	for n := range rl {
		names = append(names, n)
	}
	return sets.List(sets.New(names...))
}

// hostPorts collects the host ports of containers that run together.
type hostPorts struct {
	used []usedPort
}

type usedPort struct {
	proto v1.Protocol
	ip    string
	port  int32
	path  string
}

func (h *hostPorts) add(c *v1.Container, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, p := range c.Ports {
		if p.HostPort == 0 {
			continue
		}
		ip := normalizeIP(p.HostIP)
		fp := path.Child("ports").Index(i).Child("hostPort")
		for _, u := range h.used {
			if u.proto == p.Protocol && u.port == p.HostPort && (u.ip == ip || u.ip == "" || ip == "") {
				errs = append(errs, field.Duplicate(fp, fmt.Sprintf("%d/%s (already used by %s)", p.HostPort, p.Protocol, u.path)))
				break
			}
		}
		h.used = append(h.used, usedPort{proto: p.Protocol, ip: ip, port: p.HostPort, path: fp.String()})
	}
	return errs
}

// normalizeIP returns "" for an unspecified address and a canonical form
// otherwise.
func normalizeIP(s string) string {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return s
	}
	if a.IsUnspecified() {
		return ""
	}
	return a.Unmap().String()
}
