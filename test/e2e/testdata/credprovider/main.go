// Command credprovider is a kubelet credential provider plugin for the
// e2e tests: it answers every CredentialProviderRequest with the login
// in its environment (CREDPROVIDER_REGISTRY, _USER, _PASSWORD), cached
// by registry, and appends each request's image and its arguments to the
// file CREDPROVIDER_LOG.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

func main() {
	var req struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Image      string `json:"image"`
	}
	if err := json.NewDecoder(os.Stdin).Decode(&req); err != nil {
		fmt.Fprintf(os.Stderr, "decode request: %v\n", err)
		os.Exit(1)
	}
	if req.Kind != "CredentialProviderRequest" || req.APIVersion != "credentialprovider.kubelet.k8s.io/v1" {
		fmt.Fprintf(os.Stderr, "unexpected request %s %s\n", req.APIVersion, req.Kind)
		os.Exit(1)
	}
	if log := os.Getenv("CREDPROVIDER_LOG"); log != "" {
		f, err := os.OpenFile(log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err == nil {
			fmt.Fprintf(f, "%s %s\n", req.Image, strings.Join(os.Args[1:], " "))
			f.Close()
		}
	}
	resp := map[string]any{
		"apiVersion":   req.APIVersion,
		"kind":         "CredentialProviderResponse",
		"cacheKeyType": "Registry",
		"auth": map[string]any{
			os.Getenv("CREDPROVIDER_REGISTRY"): map[string]string{
				"username": os.Getenv("CREDPROVIDER_USER"),
				"password": os.Getenv("CREDPROVIDER_PASSWORD"),
			},
		},
	}
	if err := json.NewEncoder(os.Stdout).Encode(resp); err != nil {
		os.Exit(1)
	}
}
