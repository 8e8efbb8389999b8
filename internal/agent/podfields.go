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

// featureReader is what the runtime tells of itself (runtime.Runtime):
// its CRI status and its name and version.
type featureReader interface {
	statuser
	Version(ctx context.Context) (*runtimeapi.VersionResponse, error)
}

// runtimeFeatures reads what the runtime reports it supports; a runtime
// that cannot be asked supports nothing optional.
func runtimeFeatures(ctx context.Context, rt featureReader) podfields.Features {
	logger := klog.FromContext(ctx)
	st, err := rt.Status(ctx)
	if err != nil {
		logger.Error(err, "Reading the runtime's features failed; assuming none")
		return podfields.Features{}
	}
	f := podfields.FeaturesOf(st)
	v, err := rt.Version(ctx)
	if err != nil {
		logger.Error(err, "Reading the runtime's version failed; assuming it cannot mount image volumes")
		return f
	}
	f.ImageVolumes = podfields.ImageVolumesOf(v)
	logger.V(2).Info("Runtime image volume support", "runtime", v.GetRuntimeName(), "version", v.GetRuntimeVersion(), "supported", f.ImageVolumes)
	return f
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
