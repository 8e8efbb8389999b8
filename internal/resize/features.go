package resize

import (
	"k8s.io/component-helpers/nodedeclaredfeatures/features/inplacepodresize"
)

// DeclaredFeatures are the node-declared features (the Node's
// status.declaredFeatures) that in-place resize implements: pod-level
// resources resize and the resize of init containers other than sidecars.
// The API server refuses such a resize on a node that does not declare
// them.
func DeclaredFeatures() []string {
	return []string{
		inplacepodresize.IPPRPodLevelResourcesFeatureGate,
		inplacepodresize.IPPRInitContainersFeatureGate,
	}
}
