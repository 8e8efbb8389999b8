package admission

import (
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/heartlet/heartlet/internal/sysctl"
)

// ReasonSysctlForbidden: the pod sets a sysctl the node does not allow.
const ReasonSysctlForbidden = sysctl.ForbiddenReason

// Sysctls admits a pod only when every sysctl of its security context is
// on the node's allowlist (the safe set plus allowedUnsafeSysctls), as
// upstream's sysctl admit handler. A nil allowlist admits every pod.
func Sysctls(pod *v1.Pod, allow *sysctl.Allowlist) Result {
	sc := pod.Spec.SecurityContext
	if allow == nil || sc == nil || len(sc.Sysctls) == 0 {
		return Result{Admit: true}
	}
	for _, s := range sc.Sysctls {
		if err := allow.Validate(s.Name, pod.Spec.HostNetwork, pod.Spec.HostIPC); err != nil {
			return Result{Reason: ReasonSysctlForbidden, Message: fmt.Sprintf("forbidden sysctl: %v", err)}
		}
	}
	return Result{Admit: true}
}
