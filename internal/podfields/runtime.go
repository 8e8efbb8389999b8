package podfields

import (
	"strconv"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

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

// imageVolumeRuntimes are the runtimes that mount OCI images as volumes
// (CRI Mount.image) and the first version of each that does. The CRI
// reports no feature for it, so the runtime's name and version decide;
// an older runtime drops the field it does not know and would give the
// container an empty directory instead of the image.
var imageVolumeRuntimes = map[string][2]int{
	"containerd": {2, 1},
	"cri-o":      {1, 31},
}

// ImageVolumesOf tells whether the runtime that answered CRI Version
// mounts image volumes; a nil answer, an unknown runtime or a version
// that cannot be read does not.
func ImageVolumesOf(v *runtimeapi.VersionResponse) bool {
	least, ok := imageVolumeRuntimes[strings.ToLower(v.GetRuntimeName())]
	if !ok {
		return false
	}
	major, minor, ok := majorMinor(v.GetRuntimeVersion())
	if !ok {
		return false
	}
	return major > least[0] || major == least[0] && minor >= least[1]
}

// majorMinor reads the leading "[v]MAJOR.MINOR" of a version string such
// as "v2.4.2" or "1.6.20~ds1".
func majorMinor(s string) (major, minor int, ok bool) {
	s = strings.TrimPrefix(s, "v")
	parts := strings.SplitN(s, ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	major, err := strconv.Atoi(parts[0])
	if err != nil || major < 0 {
		return 0, 0, false
	}
	m := parts[1]
	if i := strings.IndexFunc(m, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		m = m[:i]
	}
	minor, err = strconv.Atoi(m)
	if err != nil {
		return 0, 0, false
	}
	return major, minor, true
}
