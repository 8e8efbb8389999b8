//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
)

// The node registers itself with the upstream well-known labels, reports
// Ready and keeps renewing its Lease.
func TestClusterNodeRegisters(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{})
	node := waitNodeReady(t, h, v1.ConditionTrue, nodeReadyTimeout)

	t.Run("labels", func(t *testing.T) {
		want := map[string]string{
			"kubernetes.io/hostname": clusterNode,
			"kubernetes.io/os":       "linux",
			"kubernetes.io/arch":     runtime.GOARCH,
		}
		for k, v := range want {
			if got, ok := node.Labels[k]; !ok || got != v {
				t.Errorf("label %s = %q (present %v), want %q", k, got, ok, v)
			}
		}
		for _, k := range []string{"node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type"} {
			if v, ok := node.Labels[k]; ok {
				t.Errorf("label %s = %q is set on a node without a cloud provider", k, v)
			}
		}
	})
	t.Run("status", func(t *testing.T) {
		var hostname bool
		for _, a := range node.Status.Addresses {
			if a.Type == v1.NodeHostName && a.Address == clusterNode {
				hostname = true
			}
		}
		if !hostname {
			t.Errorf("status.addresses %v lack Hostname %s", node.Status.Addresses, clusterNode)
		}
		if node.Status.NodeInfo.KubeletVersion == "" {
			t.Error("status.nodeInfo.kubeletVersion is empty")
		}
		if !strings.HasPrefix(node.Status.NodeInfo.ContainerRuntimeVersion, "containerd://") {
			t.Errorf("status.nodeInfo.containerRuntimeVersion = %q, want containerd://...", node.Status.NodeInfo.ContainerRuntimeVersion)
		}
		if node.Status.Allocatable.Pods().IsZero() || node.Status.Capacity.Cpu().IsZero() {
			t.Errorf("capacity %v / allocatable %v lack cpu or pods", node.Status.Capacity, node.Status.Allocatable)
		}
	})
	t.Run("lease renews", func(t *testing.T) {
		first, err := getLease()
		if err != nil {
			t.Fatal(err)
		}
		if first.Spec.HolderIdentity == nil || *first.Spec.HolderIdentity != clusterNode {
			t.Errorf("lease holderIdentity = %v, want %s", first.Spec.HolderIdentity, clusterNode)
		}
		if first.Spec.RenewTime == nil {
			t.Fatal("lease has no renewTime")
		}
		var last *coordinationv1.Lease
		waitFor(t, time.Minute, "the lease's renewTime to advance", func() (bool, string) {
			l, err := getLease()
			if err != nil {
				return false, err.Error()
			}
			if l.Spec.RenewTime == nil {
				return false, "no renewTime"
			}
			last = l
			return l.Spec.RenewTime.After(first.Spec.RenewTime.Time), "renewTime " + l.Spec.RenewTime.String()
		})
		// A lease created before the Node may lack the owner at first; a
		// renewal adds it.
		var owned bool
		for _, o := range last.OwnerReferences {
			owned = owned || (o.Kind == "Node" && o.Name == clusterNode && o.UID == node.UID)
		}
		if !owned {
			t.Errorf("renewed lease ownerReferences %v do not name node %s (uid %s)", last.OwnerReferences, clusterNode, node.UID)
		}
	})
}

// Stopping heartlet makes the node controller mark the node NotReady
// (Ready=Unknown); starting it again makes it Ready.
func TestClusterNodeNotReadyWhenStopped(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{})
	h.stop()
	// The control plane runs with --node-monitor-grace-period=20s; the
	// upstream default of 50s fits in the timeout as well.
	waitNodeReady(t, nil, v1.ConditionUnknown, 2*time.Minute)
	var unreachable bool
	waitFor(t, 30*time.Second, "the unreachable taint", func() (bool, string) {
		n, err := getNode()
		if err != nil {
			return false, err.Error()
		}
		for _, taint := range n.Spec.Taints {
			unreachable = unreachable || taint.Key == v1.TaintNodeUnreachable
		}
		return unreachable, "taints: " + describeTaints(n)
	})

	startCluster(t, h, clusterOptions{})
	waitNodeSchedulable(t, h)
}

func describeTaints(n *v1.Node) string {
	var parts []string
	for _, taint := range n.Spec.Taints {
		parts = append(parts, taint.ToString())
	}
	return strings.Join(parts, ",")
}

// A kubeconfig that does not exist makes heartlet fail at once with a
// message naming the file.
func TestClusterMissingKubeconfig(t *testing.T) {
	h := newClusterHeartlet(t, clusterOptions{})
	missing := filepath.Join(h.dir, "nonexistent", "kubeconfig")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, heartletBin, clusterArgs(h, missing)...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("heartlet still ran after %v with a missing kubeconfig; output:\n%s", took, out.String())
	case err == nil:
		t.Fatalf("heartlet exited 0 with a missing kubeconfig; output:\n%s", out.String())
	case !errors.As(err, &exit):
		t.Fatalf("run heartlet: %v", err)
	}
	if took > 10*time.Second {
		t.Errorf("heartlet took %v to fail; want a fast failure", took)
	}
	if !strings.Contains(out.String(), missing) {
		t.Errorf("output does not name %s:\n%s", missing, out.String())
	}
}
