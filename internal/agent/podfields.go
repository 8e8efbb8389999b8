package agent

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"github.com/heartlet/heartlet/internal/admission"
	"github.com/heartlet/heartlet/internal/podfields"
	"github.com/heartlet/heartlet/internal/podlifecycle"
)

// statuser is the runtime's CRI status (runtime.Runtime).
type statuser interface {
	Status(ctx context.Context) (*runtimeapi.StatusResponse, error)
}

// runtimeFeatures reads what the runtime reports it supports; a runtime
// that cannot be asked supports nothing optional.
func runtimeFeatures(ctx context.Context, rt statuser) podfields.Features {
	st, err := rt.Status(ctx)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Reading the runtime's features failed; assuming none")
		return podfields.Features{}
	}
	return podfields.FeaturesOf(st)
}

// podFieldsAdmission refuses pods that use a pod field heartlet refuses,
// and warns about admitted pods using fields it does not honour yet.
func podFieldsAdmission(feat podfields.Features) (podlifecycle.Predicate, podlifecycle.Warner) {
	pred := func(a podlifecycle.AdmitAttrs) admission.Result { return podfields.Admit(a.Pod, feat) }
	warn := func(a podlifecycle.AdmitAttrs) []podlifecycle.Warning {
		msg, ok := podfields.Warning(a.Pod, feat)
		if !ok {
			return nil
		}
		return []podlifecycle.Warning{{Reason: podfields.Reason, Message: msg}}
	}
	return pred, warn
}
