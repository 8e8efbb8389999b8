package podspec

import v1 "k8s.io/api/core/v1"

// RestartsOnExit reports whether a container that exited with exitCode is
// run again, as upstream decides it with the ContainerRestartRules feature
// (on by default since 1.35): the container's restartPolicyRules first, in
// order, the first whose exit codes match deciding; then the container's
// own restartPolicy; then the pod's. Rules count only when the container
// has its own restartPolicy (the API requires one with rules). A sidecar
// (an init container with restartPolicy Always) always restarts.
//
// Only the Restart action is honoured; a rule with another action
// (RestartAllContainers) falls through to the container's policy, and the
// pod field table refuses pods that use it.
func RestartsOnExit(c *v1.Container, spec *v1.PodSpec, exitCode int32) bool {
	if c.RestartPolicy != nil {
		if r, ok := MatchingRestartRule(c, exitCode); ok && r.Action == v1.ContainerRestartRuleActionRestart {
			return true
		}
		switch *c.RestartPolicy {
		case v1.ContainerRestartPolicyAlways:
			return true
		case v1.ContainerRestartPolicyOnFailure:
			return exitCode != 0
		case v1.ContainerRestartPolicyNever:
			return false
		}
	}
	switch spec.RestartPolicy {
	case v1.RestartPolicyNever:
		return false
	case v1.RestartPolicyOnFailure:
		return exitCode != 0
	default:
		return true
	}
}

// RestartsWithoutExitCode reports whether a container that stops without
// an exit code to judge (a failed liveness or startup probe kills it, or
// its state is unknown) is run again: by its own restartPolicy when it has
// one (anything but Never), else by the pod's. Its rules are not looked
// at, as upstream, because they match exit codes.
func RestartsWithoutExitCode(c *v1.Container, spec *v1.PodSpec) bool {
	if c.RestartPolicy != nil {
		return *c.RestartPolicy != v1.ContainerRestartPolicyNever
	}
	return spec.RestartPolicy != v1.RestartPolicyNever
}

// MatchingRestartRule is the first of the container's restartPolicyRules
// whose exit-code requirement holds for exitCode. A rule without exit
// codes or with an unknown operator never matches.
func MatchingRestartRule(c *v1.Container, exitCode int32) (v1.ContainerRestartRule, bool) {
	for _, r := range c.RestartPolicyRules {
		if r.ExitCodes == nil {
			continue
		}
		in := false
		for _, v := range r.ExitCodes.Values {
			if v == exitCode {
				in = true
				break
			}
		}
		switch r.ExitCodes.Operator {
		case v1.ContainerRestartRuleOnExitCodesOpIn:
			if in {
				return r, true
			}
		case v1.ContainerRestartRuleOnExitCodesOpNotIn:
			if !in {
				return r, true
			}
		}
	}
	return v1.ContainerRestartRule{}, false
}
