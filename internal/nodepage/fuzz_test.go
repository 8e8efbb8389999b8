package nodepage

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	testclock "k8s.io/utils/clock/testing"

	"github.com/heartlet/heartlet/internal/journal"
)

// FuzzPageEscaping: whatever a pod's owner writes into its name, namespace,
// container names, status and journal, the page holds only its own
// elements and attributes.
func FuzzPageEscaping(f *testing.F) {
	f.Add("web", "default", "app", "Evicted", "pulled", `"><script>alert(1)</script>`)
	f.Add(`<img src=x onerror=alert(1)>`, `</style><svg onload=alert(2)>`, `' onmouseover='x`, "javascript:alert(3)", "<!--", "]]><x>")
	f.Fuzz(func(t *testing.T, name, namespace, container, reason, message, text string) {
		pod := webPod()
		pod.Name, pod.Namespace, pod.UID = name, namespace, types.UID(name+namespace)
		pod.Spec.Containers[1].Name = container
		pod.Status.ContainerStatuses[1].Name = container
		pod.Status.ContainerStatuses[1].State.Waiting.Message = text
		pod.Status.Reason, pod.Status.Message = reason, message
		j := journal.New(4, testclock.NewFakePassiveClock(t0))
		j.Record(pod.UID, journal.Entry{Kind: journal.KindContainer, Container: container, Reason: reason, Message: text})
		p, _ := newTestPage([]*v1.Pod{pod}, j, nil)
		for _, path := range []string{"/node", "/node/body"} {
			_, page := get(t, p, path)
			checkMarkup(t, path, page)
		}
	})
}
