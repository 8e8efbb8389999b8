package podfields

import (
	v1 "k8s.io/api/core/v1"

	"github.com/heartlet/heartlet/internal/admission"
)

// Reason is the reason of the rejection, and of the warning event, of a
// pod that uses fields heartlet refuses or does not honour yet.
const Reason = "UnsupportedPodField"

// Admit refuses a pod that uses a refused field; the message names each
// such field and why.
func Admit(pod *v1.Pod, feat Features) admission.Result {
	refusals, _ := Check(pod, feat)
	if len(refusals) == 0 {
		return admission.Result{Admit: true}
	}
	return admission.Result{Reason: Reason, Message: "Pod uses fields this node does not support: " + Message(refusals)}
}

// Warning names the fields an admitted pod uses that heartlet does not
// honour yet; ok is false when there are none.
func Warning(pod *v1.Pod, feat Features) (msg string, ok bool) {
	_, warnings := Check(pod, feat)
	if len(warnings) == 0 {
		return "", false
	}
	return "Pod uses fields this node does not honour yet; it runs without them: " + Message(warnings), true
}
