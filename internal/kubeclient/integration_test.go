//go:build integration

package kubeclient

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// TestIntegrationLoad loads a node kubeconfig against a real API server,
// learns the node identity, and records an event about the node.
func TestIntegrationLoad(t *testing.T) {
	path := os.Getenv("HEARTLET_NODE_KUBECONFIG")
	if path == "" {
		t.Skip("HEARTLET_NODE_KUBECONFIG is not set: it must name a kubeconfig with a node identity (system:node:<name>) for a real API server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := Load(ctx, Options{Kubeconfig: path})
	if err != nil {
		t.Fatal(err)
	}
	name, ok := strings.CutPrefix(c.Identity, "system:node:")
	if !ok {
		t.Fatalf("identity %q is not a node identity", c.Identity)
	}
	if !strings.HasPrefix(c.ServerVersion, "v1.") {
		t.Errorf("server version %q", c.ServerVersion)
	}

	rec, shutdown := NewEventRecorder(ctx, c.Events, name)
	defer shutdown()
	reason := "HeartletIntegration" + time.Now().Format("150405")
	rec.Event(&v1.ObjectReference{Kind: "Node", Name: name}, v1.EventTypeNormal, reason, "integration test")

	admin := os.Getenv("HEARTLET_KUBECONFIG")
	if admin == "" {
		t.Log("HEARTLET_KUBECONFIG is not set: not checking the event arrived (a node may not read events)")
		return
	}
	ac, err := Load(ctx, Options{Kubeconfig: admin})
	if err != nil {
		t.Fatal(err)
	}
	sel := fields.OneTermEqualSelector("reason", reason).String()
	for {
		evs, err := ac.Kube.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			t.Fatal(err)
		}
		if len(evs.Items) > 0 {
			e := evs.Items[0]
			if e.Source.Component != "kubelet" || e.Source.Host != name {
				t.Errorf("event source = %+v", e.Source)
			}
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("the event never arrived")
		case <-time.After(200 * time.Millisecond):
		}
	}
}
