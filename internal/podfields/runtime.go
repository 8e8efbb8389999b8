package podfields

import runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

// FeaturesOf reads what a runtime supports from its CRI status; a nil
// status supports nothing optional.
func FeaturesOf(st *runtimeapi.StatusResponse) Features {
	f := Features{SupplementalGroupsPolicy: st.GetFeatures().GetSupplementalGroupsPolicy()}
	for _, h := range st.GetRuntimeHandlers() {
		if h.GetName() == "" { // the default handler, which runs every pod
			f.RecursiveReadOnlyMounts = h.GetFeatures().GetRecursiveReadOnlyMounts()
			f.UserNamespaces = h.GetFeatures().GetUserNamespaces()
		}
	}
	return f
}
