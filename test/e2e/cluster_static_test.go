//go:build e2e

package e2e

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

const mirrorAnnotation = "kubernetes.io/config.mirror"

// A static pod gets a mirror pod in the API, which comes back when deleted
// without the static pod being restarted, and goes when the manifest goes.
func TestClusterMirrorPod(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{})
	const file, name = "mirror.yaml", "mirror"
	mirrorName := name + "-" + clusterNode
	h.writeManifest(t, file, manifest(t, name, func(p *v1.Pod) {
		p.Spec.Containers = []v1.Container{shContainer("main", sleeper)}
	}))
	t.Cleanup(func() {
		h.removeManifest(t, file)
		if h.running() {
			waitFor(t, podRemoveTimeout, "the mirror pod to be deleted with the manifest", func() (bool, string) {
				p, err := getAPIPod(mirrorName)
				if err != nil {
					return false, err.Error()
				}
				return p == nil, "still present"
			})
		}
		deletePodAndWait(t, mirrorName)
	})

	first := waitAPIPod(t, h, mirrorName, podStartTimeout, "to be a Running mirror pod", func(p *v1.Pod) bool {
		return p.Annotations[mirrorAnnotation] != "" && podRunningReady(p)
	})
	if first.Spec.NodeName != clusterNode {
		t.Errorf("mirror spec.nodeName = %q, want %q", first.Spec.NodeName, clusterNode)
	}
	if src := first.Annotations["kubernetes.io/config.source"]; src != "file" {
		t.Errorf("annotation kubernetes.io/config.source = %q, want file", src)
	}
	var ownedByNode bool
	for _, o := range first.OwnerReferences {
		ownedByNode = ownedByNode || (o.Kind == "Node" && o.Name == clusterNode)
	}
	if !ownedByNode {
		t.Errorf("mirror pod ownerReferences %v do not name node %s", first.OwnerReferences, clusterNode)
	}
	before := containerSummary(first)

	t.Run("recreated after delete", func(t *testing.T) {
		mustKubectl(t, "delete", "pod", "-n", "default", mirrorName, "--wait=false")
		again := waitAPIPod(t, h, mirrorName, 90*time.Second, "to be recreated", func(p *v1.Pod) bool {
			return p.UID != first.UID && p.DeletionTimestamp == nil && p.Annotations[mirrorAnnotation] != "" &&
				podRunningReady(p)
		})
		if got := containerSummary(again); got != before {
			t.Errorf("the static pod's containers changed when its mirror was deleted:\nbefore %s\nafter  %s", before, got)
		}
	})
}
