package config

import (
	"fmt"

	"k8s.io/component-base/featuregate"
)

// checkFeatureGates applies the upstream kubelet's rules to featureGates
// (the file's, with --feature-gates over them key by key): every name must
// be a gate the kubelet v1.37 knows (featuregates_upstream.go, generated
// from its registry), and a gate locked to its default may not be set to
// the other value. heartlet acts on none of them; a gate set to other than
// its default is named in the warning about fields heartlet ignores.
func checkFeatureGates(gates map[string]bool) error {
	if len(gates) == 0 {
		return nil
	}
	fg := featuregate.NewFeatureGate()
	if err := fg.Add(upstreamFeatureGates); err != nil {
		return fmt.Errorf("registering the upstream feature gates: %w", err)
	}
	return fg.SetFromMap(gates)
}

// FeatureGateDefault is the upstream kubelet v1.37's default of the named
// gate; known is false for a name it does not have.
func FeatureGateDefault(name string) (def, known bool) {
	spec, known := upstreamFeatureGates[featuregate.Feature(name)]
	return spec.Default, known
}
