package podsync

import (
	"context"
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/heartlet/heartlet/internal/podworker"
)

// runtimeClasses is a RuntimeClassGetter over a fixed set, or failing
// with err.
type runtimeClasses struct {
	classes map[string]string // name → handler
	err     error
}

func (r runtimeClasses) GetRuntimeClass(_ context.Context, name string) (*nodev1.RuntimeClass, error) {
	if r.err != nil {
		return nil, r.err
	}
	h, ok := r.classes[name]
	if !ok {
		// What client-go returns for a GET of a missing object.
		return nil, apierrors.NewNotFound(nodev1.Resource("runtimeclasses"), name)
	}
	return &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Handler: h}, nil
}

// The sandbox of a pod runs with the handler of its RuntimeClass (the
// node's default without one); a RuntimeClass that does not exist, an API
// error, or no API server at all (standalone) leaves the pod without a
// sandbox, with upstream's FailedCreatePodSandBox event and message, and
// the sync fails so the worker retries.
func TestSyncPodRuntimeClass(t *testing.T) {
	getter := runtimeClasses{classes: map[string]string{"sandboxed": "heartlet-test"}}
	for _, tc := range []struct {
		name        string
		className   string
		getter      RuntimeClassGetter
		wantHandler string
		wantErr     string // in the error and the event; "" for success
	}{
		{name: "no RuntimeClass", wantHandler: "default-handler", getter: getter},
		{name: "no RuntimeClass standalone", wantHandler: "default-handler"},
		{name: "handler of the RuntimeClass", className: "sandboxed", getter: getter, wantHandler: "heartlet-test"},
		{name: "missing RuntimeClass", className: "nope", getter: getter, wantErr: `runtimeclass.node.k8s.io "nope" not found`},
		{name: "API error", className: "sandboxed", getter: runtimeClasses{err: errors.New("connection refused")}, wantErr: "failed to lookup RuntimeClass sandboxed: connection refused"},
		{name: "standalone", className: "sandboxed", wantErr: `runtimeClassName "sandboxed" cannot be resolved`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			rec := &recorder{}
			h.syncer.opts.Recorder = rec
			h.syncer.opts.RuntimeHandler = "default-handler"
			h.syncer.opts.RuntimeClasses = tc.getter
			pod := testPod(v1.RestartPolicyAlways, nil, "app")
			pod.Spec.Containers[0].Image = "busybox:1.35"
			pod.Spec.Containers[0].ImagePullPolicy = v1.PullIfNotPresent
			if tc.className != "" {
				pod.Spec.RuntimeClassName = &tc.className
			}
			_, err := h.syncer.SyncPod(h.ctx, podworker.UpdateSync, pod)
			sbs := h.fake.Sandboxes()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("SyncPod: %v", err)
				}
				if len(sbs) != 1 || sbs[0].RuntimeHandler != tc.wantHandler {
					t.Fatalf("sandboxes %+v, want one with handler %q", sbs, tc.wantHandler)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("SyncPod = %v, want an error containing %q", err, tc.wantErr)
			}
			if len(sbs) != 0 {
				t.Errorf("sandboxes %+v, want none", sbs)
			}
			var found bool
			for _, e := range rec.events {
				found = found || (e.reason == "FailedCreatePodSandBox" &&
					strings.HasPrefix(e.message, "Failed to create pod sandbox: ") && strings.Contains(e.message, tc.wantErr))
			}
			if !found {
				t.Errorf("events %+v, want FailedCreatePodSandBox with %q", rec.events, tc.wantErr)
			}
			if st, ok := h.status.GetPodStatus(pod.UID); !ok || st.Phase != v1.PodPending {
				t.Errorf("status %+v (found %v), want Pending", st, ok)
			}
		})
	}
}
