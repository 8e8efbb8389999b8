package config

import (
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubeletapis "k8s.io/kubelet/pkg/apis"
)

// validateNodeLabels applies the upstream kubelet's rules to --node-labels
// (cmd/kubelet/app/options, ValidateKubeletFlags): keys and values must be
// valid label keys and values, and a key in the kubernetes.io or k8s.io
// namespaces (or a subdomain of them) must be one a kubelet may set on its
// own Node: under kubelet.kubernetes.io or node.kubernetes.io, or in the
// allowed set (the NodeRestriction admission plugin refuses the others).
func validateNodeLabels(labels map[string]string) Errors {
	var out Errors
	path := field.NewPath("nodeLabels")
	var restricted []string
	for _, k := range sortedKeys(labels) {
		v := labels[k]
		for _, msg := range validation.IsQualifiedName(k) {
			out = append(out, &Problem{Flag: "--node-labels", Field: field.Invalid(path.Key(k), k, msg)})
		}
		for _, msg := range validation.IsValidLabelValue(v) {
			out = append(out, &Problem{Flag: "--node-labels", Field: field.Invalid(path.Key(k), v, msg)})
		}
		if isKubernetesLabel(k) && !kubeletapis.IsKubeletLabel(k) {
			restricted = append(restricted, k)
		}
	}
	for _, k := range restricted {
		out = append(out, &Problem{Flag: "--node-labels", Field: field.Forbidden(path.Key(k), fmt.Sprintf(
			"a label in the 'kubernetes.io' or 'k8s.io' namespace must begin with an allowed prefix (%s) or be in the specifically allowed set (%s)",
			strings.Join(kubeletapis.KubeletLabelNamespaces(), ", "), strings.Join(kubeletapis.KubeletLabels(), ", ")))})
	}
	return out
}

// isKubernetesLabel reports whether key's prefix is kubernetes.io, k8s.io
// or a subdomain of either.
func isKubernetesLabel(key string) bool {
	ns, _, ok := strings.Cut(key, "/")
	if !ok {
		return false
	}
	return ns == "kubernetes.io" || strings.HasSuffix(ns, ".kubernetes.io") || ns == "k8s.io" || strings.HasSuffix(ns, ".k8s.io")
}

// taintsFlag is --register-with-taints: comma-separated
// key[=value]:effect, parsed as upstream's flag parses it (a key without
// ":effect" is read and then refused by validation, a duplicate of key and
// effect is an error), replacing registerWithTaints.
type taintsFlag struct{ taints *[]v1.Taint }

func (f taintsFlag) String() string {
	if f.taints == nil {
		return ""
	}
	parts := make([]string, 0, len(*f.taints))
	for _, t := range *f.taints {
		parts = append(parts, t.ToString())
	}
	return strings.Join(parts, ",")
}

func (f taintsFlag) Type() string { return "[]key=value:Effect" }

func (f taintsFlag) Set(s string) error {
	if s == "" {
		*f.taints = nil
		return nil
	}
	var taints []v1.Taint
	for _, spec := range strings.Split(s, ",") {
		t, err := parseTaint(spec)
		if err != nil {
			return err
		}
		if slices.ContainsFunc(taints, func(o v1.Taint) bool { return o.Key == t.Key && o.Effect == t.Effect }) {
			return fmt.Errorf("duplicated taints with the same key and effect: %v", t)
		}
		taints = append(taints, t)
	}
	*f.taints = taints
	return nil
}

// parseTaint reads key, key:effect or key=value:effect.
func parseTaint(spec string) (v1.Taint, error) {
	var t v1.Taint
	parts := strings.Split(spec, ":")
	switch len(parts) {
	case 1:
		t.Key = parts[0]
	case 2:
		t.Effect = v1.TaintEffect(parts[1])
		switch t.Effect {
		case v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute:
		default:
			return t, fmt.Errorf("invalid taint effect: %v, unsupported taint effect", t.Effect)
		}
		kv := strings.Split(parts[0], "=")
		if len(kv) > 2 {
			return t, fmt.Errorf("invalid taint spec: %v", spec)
		}
		t.Key = kv[0]
		if len(kv) == 2 {
			t.Value = kv[1]
			if errs := validation.IsValidLabelValue(t.Value); len(errs) > 0 {
				return t, fmt.Errorf("invalid taint spec: %v, %s", spec, strings.Join(errs, "; "))
			}
		}
	default:
		return t, fmt.Errorf("invalid taint spec: %v", spec)
	}
	if errs := validation.IsQualifiedName(t.Key); len(errs) > 0 {
		return t, fmt.Errorf("invalid taint spec: %v, %s", spec, strings.Join(errs, "; "))
	}
	return t, nil
}
