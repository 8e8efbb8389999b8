package status

import (
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The reason and message of a pod stopped for running past
// spec.activeDeadlineSeconds, as upstream reports them.
const (
	ReasonDeadlineExceeded  = "DeadlineExceeded"
	MessageDeadlineExceeded = "Pod was active on the node longer than the specified deadline"
)

// ActiveDeadline tells whether the pod, active on the node since
// startTime, has reached its spec.activeDeadlineSeconds at now. When it has
// not, left is the time until it does; left is 0 when the pod has no
// deadline or no start time yet (the deadline counts from the start time
// only, as upstream).
func ActiveDeadline(pod *v1.Pod, startTime *metav1.Time, now time.Time) (exceeded bool, left time.Duration) {
	if pod.Spec.ActiveDeadlineSeconds == nil || startTime == nil || startTime.IsZero() {
		return false, 0
	}
	allowed := time.Duration(*pod.Spec.ActiveDeadlineSeconds) * time.Second
	active := now.Sub(startTime.Time)
	if active >= allowed {
		return true, 0
	}
	return false, allowed - active
}
