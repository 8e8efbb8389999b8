// Package config loads, defaults and validates heartlet's configuration: a
// KubeletConfiguration file (kubelet.config.k8s.io/v1beta1) plus the
// kubelet's command-line flags that override it.
package config

import (
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// Options is the effective configuration of one heartlet process: the
// defaulted and validated KubeletConfiguration with flag overrides applied,
// plus the flag-only settings.
type Options struct {
	// Config is the effective KubeletConfiguration.
	Config *kubeletv1beta1.KubeletConfiguration
	// ConfigFile is the path given with --config ("" when none).
	ConfigFile string
	// Kubeconfig is --kubeconfig; "" means standalone mode.
	Kubeconfig string
	// RootDir is --root-dir (default /var/lib/kubelet).
	RootDir string
	// HostnameOverride is --hostname-override.
	HostnameOverride string
	// NodeIPs are the parsed --node-ip addresses (may be empty).
	NodeIPs []string
	// NodeName is the effective node name: the lower-cased hostname
	// override, or the machine's hostname.
	NodeName string
	// Verbosity is --v.
	Verbosity int
}
