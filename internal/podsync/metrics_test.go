package podsync

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"

	"github.com/heartlet/heartlet/internal/metrics"
)

func counterValues() map[string]float64 {
	return map[string]float64{
		"started_pods":                    testutil.ToFloat64(metrics.StartedPods),
		"started_pods_errors":             testutil.ToFloat64(metrics.StartedPodsErrors),
		"started_containers/container":    testutil.ToFloat64(metrics.StartedContainers.WithLabelValues("container")),
		"started_containers/init":         testutil.ToFloat64(metrics.StartedContainers.WithLabelValues("init_container")),
		"container_errors/create":         testutil.ToFloat64(metrics.StartedContainersErrors.WithLabelValues("container", ReasonCreateContainerError)),
		"run_podsandbox_errors":           testutil.ToFloat64(metrics.RunPodSandboxErrors.WithLabelValues("")),
		"run_podsandbox_duration/default": sampleCount(metrics.RunPodSandboxDuration.WithLabelValues("")),
	}
}

func sampleCount(o prometheus.Observer) float64 {
	var m dto.Metric
	_ = o.(prometheus.Metric).Write(&m)
	return float64(m.GetHistogram().GetSampleCount())
}

// Sandbox and container starts and their failures are counted as upstream
// counts them.
func TestStartMetrics(t *testing.T) {
	h := newHarness(t)
	pod := testPod(v1.RestartPolicyAlways, []string{"init"}, "app")
	pod.Spec.InitContainers[0].Image = "busybox:1.35"
	pod.Spec.InitContainers[0].ImagePullPolicy = v1.PullIfNotPresent
	pod.Spec.Containers[0].Image = "example.org/new:1"
	pod.Spec.Containers[0].ImagePullPolicy = v1.PullIfNotPresent
	before := counterValues()

	h.fake.InjectError("RunPodSandbox", errors.New("no network"))
	if _, err := h.syncer.SyncPod(h.ctx, 0, pod); err == nil {
		t.Fatal("SyncPod with a failing RunPodSandbox succeeded")
	}
	h.sync(pod) // sandbox and the init container
	h.fake.SetExit(h.running("init").ID, 0, "Completed")
	h.fake.InjectError("CreateContainer", errors.New("disk full"))
	if _, err := h.syncer.SyncPod(h.ctx, 0, pod); err == nil {
		t.Fatal("SyncPod with a failing CreateContainer succeeded")
	}
	h.sync(pod) // the app container, its image now present
	h.running("app")

	after := counterValues()
	want := map[string]float64{
		"started_pods":                    2,
		"started_pods_errors":             1,
		"started_containers/container":    2,
		"started_containers/init":         1,
		"container_errors/create":         1,
		"run_podsandbox_errors":           1,
		"run_podsandbox_duration/default": 2,
	}
	for k, w := range want {
		if got := after[k] - before[k]; got != w {
			t.Errorf("%s grew by %v, want %v", k, got, w)
		}
	}
}

type startRecorder struct{ container, id, logPath []string }

func (r *startRecorder) ContainerStarted(_ *v1.Pod, container, id, logPath string) {
	r.container = append(r.container, container)
	r.id = append(r.id, id)
	r.logPath = append(r.logPath, logPath)
}

// Each container started is told with its log file, for log rotation.
func TestStartedRecorder(t *testing.T) {
	h := newHarness(t)
	rec := &startRecorder{}
	h.syncer.opts.Started = rec
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	h.sync(pod)
	app := h.running("app")
	if len(rec.id) != 1 || rec.container[0] != "app" || rec.id[0] != app.ID {
		t.Fatalf("told of %v %v, want app %s", rec.container, rec.id, app.ID)
	}
	if want := filepath.Join(podLogDir(h.syncer.opts.PodLogsDir, pod), "app", "0.log"); rec.logPath[0] != want {
		t.Errorf("log path %q, want %q", rec.logPath[0], want)
	}
}
