package podfields

import (
	"reflect"

	v1 "k8s.io/api/core/v1"
)

// Notes of fields only the control plane acts on, or that need nothing
// of a node beyond what admission checks.
const (
	scheduler  = "read by the scheduler; the node agent has nothing to do"
	admitted   = "checked at admission, as upstream"
	apiServer  = "acted on by the API server's admission; the node agent has nothing to do"
	windows    = "Windows only; ignored on Linux, as upstream"
	validation = "used only as the API server validates it"
)

// table is every field, by path. Keep it in the order of the types.
var table = concat(
	podSpec(),
	podSecurityContext(),
	container("spec.initContainers[]", initContainer),
	container("spec.containers[]", appContainer),
	container("spec.ephemeralContainers[]", ephemeralContainer),
	[]Field{{Path: "spec.ephemeralContainers[].targetContainerName", Support: Honoured,
		Note: "the container shares the target container's process namespace"}},
)

func podSpec() []Field {
	return []Field{
		{Path: "spec.volumes", Support: Honoured, Note: "emptyDir, hostPath, configMap, secret, downwardAPI, projected, persistentVolumeClaim and ephemeral (claims bound to local, hostPath or CSI persistent volumes of volumeMode Filesystem, or to local or CSI ones of volumeMode Block for volumeDevices) and csi (inline ephemeral); Block claims of other kinds and any other source are a FailedMount event naming the kind, and the containers wait; image volumes are pulled with their pullPolicy and the pod's pull secrets (backoff and events as for container images) and mounted read-only by the runtime, subPath being a directory of the image, where the runtime can (spec.volumes[].image)"},
		{Path: "spec.volumes[].image", Support: Refused,
			Note: "image volumes need a runtime that mounts OCI images (containerd 2.1 or later, CRI-O 1.31 or later, read from its CRI version); an older runtime would ignore the image and give the container an empty directory",
			Used: func(_ reflect.Value, f Features) bool { return !f.ImageVolumes }},
		{Path: "spec.initContainers", Support: Honoured, Note: "in order, each to success; sidecars (restartPolicy: Always) keep running"},
		{Path: "spec.containers", Support: Honoured},
		{Path: "spec.ephemeralContainers", Support: Honoured, Note: "kubectl debug: started in the running pod, never restarted, reported in ephemeralContainerStatuses"},
		{Path: "spec.restartPolicy", Support: Honoured, Note: "with crash-loop backoff"},
		{Path: "spec.terminationGracePeriodSeconds", Support: Honoured},
		{Path: "spec.activeDeadlineSeconds", Support: Honoured, Note: "the pod fails with DeadlineExceeded"},
		{Path: "spec.dnsPolicy", Support: Honoured},
		{Path: "spec.nodeSelector", Support: Honoured, Note: admitted},
		{Path: "spec.serviceAccountName", Support: Honoured, Note: "its token comes through a projected volume"},
		{Path: "spec.serviceAccount", Support: Honoured, Note: "deprecated alias of serviceAccountName"},
		{Path: "spec.automountServiceAccountToken", Support: Honoured, Note: apiServer},
		{Path: "spec.nodeName", Support: Honoured, Note: admitted},
		{Path: "spec.hostNetwork", Support: Honoured},
		{Path: "spec.hostPID", Support: Honoured},
		{Path: "spec.hostIPC", Support: Honoured},
		{Path: "spec.shareProcessNamespace", Support: Honoured},
		{Path: "spec.securityContext", Support: Honoured},
		{Path: "spec.imagePullSecrets", Support: Honoured, Note: "dockerconfigjson and dockercfg Secrets, matched to the image's registry as upstream; each matching login tried in turn"},
		{Path: "spec.hostname", Support: Honoured},
		{Path: "spec.subdomain", Support: Honoured},
		{Path: "spec.affinity", Support: Honoured, Note: "required node affinity " + admitted + "; the rest is the scheduler's"},
		{Path: "spec.schedulerName", Support: Honoured, Note: scheduler},
		{Path: "spec.tolerations", Support: Honoured, Note: "NoExecute taints " + admitted},
		{Path: "spec.hostAliases", Support: Honoured, Note: "in the pod's /etc/hosts"},
		{Path: "spec.priorityClassName", Support: Honoured, Note: apiServer},
		{Path: "spec.priority", Support: Honoured, Note: scheduler},
		{Path: "spec.dnsConfig", Support: Honoured},
		{Path: "spec.readinessGates", Support: Honoured},
		{Path: "spec.runtimeClassName", Support: Honoured,
			Note: "the RuntimeClass's handler is given to the runtime; an unknown RuntimeClass leaves the pod waiting with FailedCreatePodSandBox, never in the default handler"},
		{Path: "spec.enableServiceLinks", Support: Honoured, Note: "Service environment variables in cluster mode"},
		{Path: "spec.preemptionPolicy", Support: Honoured, Note: scheduler},
		{Path: "spec.overhead", Support: Honoured, Note: "counted in admission and the pod cgroup"},
		{Path: "spec.topologySpreadConstraints", Support: Honoured, Note: scheduler},
		{Path: "spec.setHostnameAsFQDN", Support: Honoured},
		{Path: "spec.os", Support: Honoured, Note: admitted},
		{Path: "spec.hostUsers", Support: Refused,
			Note: "false needs a runtime whose default handler reports user namespace support (containerd 2.x does, 1.6 does not); without it the pod would run in the host user namespace",
			Used: func(v reflect.Value, f Features) bool { return !v.Elem().Bool() && !f.UserNamespaces }},
		{Path: "spec.schedulingGates", Support: Honoured, Note: scheduler},
		{Path: "spec.resourceClaims", Support: Refused, Note: "dynamic resource allocation is not supported: the claimed devices would not be prepared"},
		{Path: "spec.resources", Support: Honoured, Note: "pod-level resources in the pod cgroup"},
		{Path: "spec.hostnameOverride", Support: Honoured},
		{Path: "spec.schedulingGroup", Support: Honoured, Note: scheduler},
		{Path: "spec.evictionResponders", Support: Honoured, Note: "read by the eviction API; the node agent has nothing to do"},
	}
}

func podSecurityContext() []Field {
	const p = "spec.securityContext."
	return []Field{
		{Path: p + "seLinuxOptions", Support: Honoured, Note: "passed to the runtime"},
		{Path: p + "windowsOptions", Support: Honoured, Note: windows},
		{Path: p + "runAsUser", Support: Honoured},
		{Path: p + "runAsGroup", Support: Honoured},
		{Path: p + "runAsNonRoot", Support: Honoured, Note: "checked against the image's user"},
		{Path: p + "supplementalGroups", Support: Honoured},
		{Path: p + "supplementalGroupsPolicy", Support: Refused,
			Note: "Strict needs a runtime that reports the SupplementalGroupsPolicy feature; without it the image's groups would be added",
			Used: func(v reflect.Value, f Features) bool {
				return v.Elem().String() == string(v1.SupplementalGroupsPolicyStrict) && !f.SupplementalGroupsPolicy
			}},
		{Path: p + "fsGroup", Support: Honoured, Note: "volume ownership"},
		{Path: p + "sysctls", Support: Honoured, Note: "safe sysctls and allowedUnsafeSysctls; others refused with SysctlForbidden"},
		{Path: p + "fsGroupChangePolicy", Support: Honoured},
		{Path: p + "seccompProfile", Support: Honoured},
		{Path: p + "appArmorProfile", Support: Refused, Note: appArmorNote, Used: appArmorUsed},
		{Path: p + "seLinuxChangePolicy", Support: NotYet, Note: "volumes are not relabelled with mount options"},
	}
}

const appArmorNote = "AppArmor profiles are not applied: the container would run without the profile it asks for"

// appArmorUsed: a profile other than Unconfined asks for confinement
// heartlet does not apply.
func appArmorUsed(v reflect.Value, _ Features) bool {
	return v.Elem().FieldByName("Type").String() != string(v1.AppArmorProfileTypeUnconfined)
}

// containerKind is which list of the pod a container is in.
type containerKind int

const (
	initContainer containerKind = iota
	appContainer
	ephemeralContainer
)

// container is every field of a Container (or EphemeralContainerCommon)
// at prefix.
func container(prefix string, kind containerKind) []Field {
	p := prefix + "."
	restart := Field{Path: p + "restartPolicy", Support: Honoured,
		Note: "overrides the pod's restartPolicy for this container; Always on an init container makes it a sidecar"}
	rules := Field{Path: p + "restartPolicyRules", Support: Honoured,
		Note: "Restart on exit codes (In, NotIn), before the container's own restartPolicy"}
	if kind == appContainer {
		restart.Note = "overrides the pod's restartPolicy for this container"
	}
	if kind == ephemeralContainer {
		restart = Field{Path: p + "restartPolicy", Support: Honoured, Note: validation + ": an ephemeral container is never restarted"}
		rules = Field{Path: p + "restartPolicyRules", Support: Honoured, Note: validation + ": an ephemeral container is never restarted"}
	}
	fs := []Field{
		{Path: p + "name", Support: Honoured},
		{Path: p + "image", Support: Honoured},
		{Path: p + "command", Support: Honoured},
		{Path: p + "args", Support: Honoured},
		{Path: p + "workingDir", Support: Honoured},
		{Path: p + "ports", Support: Honoured, Note: "hostPort mappings; the rest is informational, as upstream"},
		{Path: p + "envFrom", Support: Honoured},
		{Path: p + "env", Support: Honoured},
		{Path: p + "resources", Support: Honoured},
		{Path: p + "resources.claims", Support: Refused, Note: "dynamic resource allocation is not supported: the claimed devices would not be prepared"},
		{Path: p + "resizePolicy", Support: Honoured, Note: "in-place resize: NotRequired updates the running container, RestartContainer restarts it"},
		restart,
		rules,
		{Path: p + "restartPolicyRules[].action", Support: Refused,
			Note: "RestartAllContainers is not supported: the pod's other containers would not be restarted",
			Used: func(v reflect.Value, _ Features) bool {
				return v.String() == string(v1.ContainerRestartRuleActionRestartAllContainers)
			}},
		{Path: p + "volumeMounts", Support: Honoured, Note: "with subPath and subPathExpr opened safely"},
		{Path: p + "volumeMounts[].recursiveReadOnly", Support: Refused,
			Note: "Enabled needs a runtime that reports recursive read-only mounts; without it the mounts below the volume would stay writable",
			Used: func(v reflect.Value, f Features) bool {
				return v.Elem().String() == string(v1.RecursiveReadOnlyEnabled) && !f.RecursiveReadOnlyMounts
			}},
		{Path: p + "env[].valueFrom.fileKeyRef", Support: Refused, Note: "variables from env files are not supported: the variable would be missing"},
		{Path: p + "volumeDevices", Support: Honoured, Note: "claims bound to a local or CSI persistent volume of volumeMode Block, given to the container as a device (read-only claims as \"r\"); a Block claim in volumeMounts or a Filesystem one in volumeDevices is a FailedMount, any other volume in volumeDevices fails the container's creation"},
		{Path: p + "livenessProbe", Support: Honoured},
		{Path: p + "readinessProbe", Support: Honoured},
		{Path: p + "startupProbe", Support: Honoured},
		{Path: p + "lifecycle", Support: Honoured},
		{Path: p + "terminationMessagePath", Support: Honoured},
		{Path: p + "terminationMessagePolicy", Support: Honoured},
		{Path: p + "imagePullPolicy", Support: Honoured},
		{Path: p + "securityContext", Support: Honoured},
		{Path: p + "stdin", Support: Honoured},
		{Path: p + "stdinOnce", Support: Honoured},
		{Path: p + "tty", Support: Honoured},
	}
	fs = append(fs, securityContext(p+"securityContext.")...)
	fs = append(fs,
		Field{Path: p + "lifecycle.postStart", Support: Honoured},
		Field{Path: p + "lifecycle.preStop", Support: Honoured, Note: "within the grace period"},
		Field{Path: p + "lifecycle.stopSignal", Support: NotYet, Note: "containers are stopped with the runtime's (the image's) stop signal"},
	)
	fs = append(fs, handler(p+"lifecycle.postStart.")...)
	fs = append(fs, handler(p+"lifecycle.preStop.")...)
	for _, pr := range []string{"livenessProbe", "readinessProbe", "startupProbe"} {
		fs = append(fs, probe(p+pr+".")...)
	}
	if kind == ephemeralContainer {
		for i := range fs {
			if fs[i].Support == Honoured {
				fs[i].Note = "as for app containers, where the API server allows it on an ephemeral container"
			}
		}
	}
	return fs
}

func securityContext(p string) []Field {
	return []Field{
		{Path: p + "capabilities", Support: Honoured},
		{Path: p + "privileged", Support: Honoured},
		{Path: p + "seLinuxOptions", Support: Honoured, Note: "passed to the runtime"},
		{Path: p + "windowsOptions", Support: Honoured, Note: windows},
		{Path: p + "runAsUser", Support: Honoured},
		{Path: p + "runAsGroup", Support: Honoured},
		{Path: p + "runAsNonRoot", Support: Honoured, Note: "checked against the image's user"},
		{Path: p + "readOnlyRootFilesystem", Support: Honoured},
		{Path: p + "allowPrivilegeEscalation", Support: Honoured},
		{Path: p + "procMount", Support: Honoured, Note: "Unmasked leaves /proc unmasked (the API allows it only with hostUsers: false)"},
		{Path: p + "seccompProfile", Support: Honoured, Note: "Localhost profiles under <root-dir>/seccomp"},
		{Path: p + "appArmorProfile", Support: Refused, Note: appArmorNote, Used: appArmorUsed},
	}
}

func handler(p string) []Field {
	return []Field{
		{Path: p + "exec", Support: Honoured},
		{Path: p + "httpGet", Support: Honoured},
		{Path: p + "tcpSocket", Support: Honoured, Note: "not a lifecycle handler; " + validation},
		{Path: p + "sleep", Support: Honoured},
	}
}

func probe(p string) []Field {
	return []Field{
		{Path: p + "exec", Support: Honoured},
		{Path: p + "httpGet", Support: Honoured},
		{Path: p + "tcpSocket", Support: Honoured},
		{Path: p + "grpc", Support: Honoured},
		{Path: p + "initialDelaySeconds", Support: Honoured},
		{Path: p + "timeoutSeconds", Support: Honoured},
		{Path: p + "periodSeconds", Support: Honoured},
		{Path: p + "successThreshold", Support: Honoured},
		{Path: p + "failureThreshold", Support: Honoured},
		{Path: p + "terminationGracePeriodSeconds", Support: Honoured},
	}
}

func concat(lists ...[]Field) []Field {
	var out []Field
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}
