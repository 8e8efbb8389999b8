//go:build integration

package nodestatus

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/heartlet/heartlet/internal/kubeclient"
)

// TestIntegrationNodeStatus registers a Node with a node identity against a
// real API server (authorization Node,RBAC with NodeRestriction), renews
// its Lease and patches its status.
func TestIntegrationNodeStatus(t *testing.T) {
	path := os.Getenv("HEARTLET_NODE_KUBECONFIG")
	if path == "" {
		t.Skip("HEARTLET_NODE_KUBECONFIG is not set: it must name a kubeconfig with a node identity (system:node:<name>) for a real API server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := kubeclient.Load(ctx, kubeclient.Options{Kubeconfig: path})
	if err != nil {
		t.Fatal(err)
	}
	name, ok := strings.CutPrefix(c.Identity, "system:node:")
	if !ok {
		t.Fatalf("identity %q is not a node identity", c.Identity)
	}

	clk := clocktesting.NewFakeClock(time.Now())
	rt := newFakeRuntime()
	m := New(c.Kube, clk, Options{
		NodeName:     name,
		RegisterNode: true,
		Labels:       map[string]string{"heartlet.test/integration": "true"},
		Taints:       []v1.Taint{{Key: "heartlet.test/integration", Effect: v1.TaintEffectNoSchedule}},
		Version:      "v0.0.0-integration",
		RootDir:      t.TempDir(),
		Heartbeat:    c.Heartbeat,
	}, rt)
	deleteNode := func() {
		ctx := context.Background()
		_ = c.Heartbeat.CoordinationV1().Leases(LeaseNamespace).Delete(ctx, name, metav1.DeleteOptions{})
		if admin := os.Getenv("HEARTLET_KUBECONFIG"); admin != "" {
			if ac, err := kubeclient.Load(ctx, kubeclient.Options{Kubeconfig: admin}); err == nil {
				_ = ac.Kube.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
			}
		}
	}
	// Node labels apply at registration only: start from no Node, even
	// when an earlier test registered this node name.
	deleteNode()
	t.Cleanup(deleteNode)

	if err := m.syncStatus(ctx); err != nil {
		t.Fatalf("registering: %v", err)
	}
	n, err := c.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Labels[v1.LabelHostname] != name || n.Labels["heartlet.test/integration"] != "true" {
		t.Errorf("labels = %v", n.Labels)
	}
	if condition(n, v1.NodeReady).Status != v1.ConditionTrue {
		t.Errorf("Ready = %+v", condition(n, v1.NodeReady))
	}
	if len(n.Status.Addresses) == 0 || n.Status.Capacity.Cpu().IsZero() {
		t.Errorf("status = %+v", n.Status)
	}

	m.syncLease(ctx)
	l, err := c.Kube.CoordinationV1().Leases(LeaseNamespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("lease: %v", err)
	}
	if len(l.OwnerReferences) != 1 || l.OwnerReferences[0].UID != n.UID {
		t.Errorf("lease owners = %v, want node %s", l.OwnerReferences, n.UID)
	}
	first := l.Spec.RenewTime.Time
	clk.Step(10 * time.Second)
	m.syncLease(ctx)
	l, err = c.Kube.CoordinationV1().Leases(LeaseNamespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !l.Spec.RenewTime.Time.After(first) {
		t.Errorf("renewTime %v not after %v", l.Spec.RenewTime.Time, first)
	}

	// A change is patched at once: the runtime goes down.
	rt.set(func(r *fakeRuntime) { r.versionErr = context.DeadlineExceeded })
	clk.Step(10 * time.Second)
	if err := m.syncStatus(ctx); err != nil {
		t.Fatalf("patching status: %v", err)
	}
	n, err = c.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r := condition(n, v1.NodeReady); r.Status != v1.ConditionFalse || !strings.Contains(r.Message, "container runtime is down") {
		t.Errorf("Ready after runtime failure = %+v", r)
	}
	// Without a change, after the report frequency: a heartbeat.
	rt.set(func(r *fakeRuntime) { r.versionErr = nil })
	if err := m.syncStatus(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Step(6 * time.Minute)
	if err := m.syncStatus(ctx); err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	n, err = c.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r := condition(n, v1.NodeReady); r.Status != v1.ConditionTrue || !r.LastHeartbeatTime.Time.Equal(clk.Now().Truncate(time.Second)) {
		t.Errorf("Ready after heartbeat = %+v, want heartbeat at %v", r, clk.Now())
	}
}
