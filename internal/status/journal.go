package status

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/heartlet/heartlet/internal/journal"
)

// Journal records decisions in a pod's journal (journal.Journal).
//
// Contract: safe for concurrent use and never blocks.
type Journal interface {
	Record(uid types.UID, e journal.Entry)
}

// note records e in the pod's journal when there is one.
func (s *Syncer) note(pod *v1.Pod, e journal.Entry) {
	if s.opts.Journal != nil {
		s.opts.Journal.Record(pod.UID, e)
	}
}

// Summary is a one-line account of a status: the phase, its reason, and
// how many containers are ready, e.g. "Running, 1/2 containers ready".
func Summary(st *v1.PodStatus) string {
	var b strings.Builder
	b.WriteString(string(st.Phase))
	if st.Reason != "" {
		fmt.Fprintf(&b, " (%s)", st.Reason)
	}
	ready := 0
	for _, c := range st.ContainerStatuses {
		if c.Ready {
			ready++
		}
	}
	if n := len(st.ContainerStatuses); n > 0 {
		fmt.Fprintf(&b, ", %d/%d containers ready", ready, n)
	}
	return b.String()
}
