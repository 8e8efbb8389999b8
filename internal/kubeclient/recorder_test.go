package kubeclient

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/heartlet/heartlet/internal/kubeapi/kubeapifake"
)

func TestNewEventRecorder(t *testing.T) {
	kube := fake.NewClientset()
	created := make(chan *v1.Event, 1)
	kube.PrependReactor("create", "events", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ev := a.(k8stesting.CreateAction).GetObject().(*v1.Event)
		select {
		case created <- ev.DeepCopy():
		default:
		}
		return false, nil, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watched := make(chan *v1.Event, 1)
	rec, shutdown := NewEventRecorder(ctx, kubeapifake.Wrap(kube), "worker-1", func(e *v1.Event) {
		select {
		case watched <- e.DeepCopy():
		default:
		}
	})
	defer shutdown()

	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team", UID: "uid-1"}}
	rec.Eventf(pod, v1.EventTypeNormal, Pulled, "Successfully pulled image %q", "busybox")

	select {
	case ev := <-created:
		if ev.Namespace != "team" {
			t.Errorf("namespace = %q, want team", ev.Namespace)
		}
		if ev.Source.Component != "kubelet" || ev.Source.Host != "worker-1" {
			t.Errorf("source = %+v, want {kubelet worker-1}", ev.Source)
		}
		if ev.Reason != "Pulled" || ev.Type != v1.EventTypeNormal || ev.Message != `Successfully pulled image "busybox"` {
			t.Errorf("event = %s %s %q", ev.Type, ev.Reason, ev.Message)
		}
		if ev.InvolvedObject.Kind != "Pod" || ev.InvolvedObject.Name != "web" || ev.InvolvedObject.UID != "uid-1" {
			t.Errorf("involvedObject = %+v", ev.InvolvedObject)
		}
		if ev.ReportingController != "kubelet" || ev.ReportingInstance != "worker-1" {
			t.Errorf("reporting = %q/%q, want kubelet/worker-1", ev.ReportingController, ev.ReportingInstance)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event reached the API")
	}
	select {
	case ev := <-watched:
		if ev.Reason != "Pulled" || ev.InvolvedObject.Name != "web" || ev.Message != `Successfully pulled image "busybox"` {
			t.Errorf("the watcher got %s %s %q", ev.Reason, ev.InvolvedObject.Name, ev.Message)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event reached the watcher")
	}
}
