//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/heartlet/heartlet/internal/criclient"
)

// With serializeImagePulls off, maxParallelImagePulls set, no registry
// pull rate limit and the image service named explicitly, pods whose
// images are pulled every time all run.
func TestParallelImagePulls(t *testing.T) {
	h := newHeartlet(t, fmt.Sprintf("serializeImagePulls: false\nmaxParallelImagePulls: 2\nregistryPullQPS: 0\nimageServiceEndpoint: %s\n", criEndpoint))
	t.Cleanup(h.cleanup)
	h.start()

	images := []string{busyboxImage, testserverImage, busyboxImage}
	for i, img := range images {
		name := fmt.Sprintf("pull-%d", i)
		h.addPod(t, name+".yaml", name, manifest(t, name, func(p *v1.Pod) {
			c := shContainer("c", "sleep 3600")
			c.Image = img
			c.ImagePullPolicy = v1.PullAlways
			p.Spec.Containers = []v1.Container{c}
		}))
	}
	for i := range images {
		h.waitRunning(t, fmt.Sprintf("pull-%d", i))
	}
	if !h.logContains("Pulled image") {
		t.Error("heartlet's log has no \"Pulled image\" line")
	}
}

// An image service endpoint with no socket makes heartlet fail at once
// with a message naming it, as for the runtime endpoint.
func TestImageServiceEndpointMissing(t *testing.T) {
	h := newHeartlet(t, "")
	missing := "unix://" + filepath.Join(h.dir, "nonexistent", "image.sock")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, heartletBin,
		"--config", h.configPath,
		"--root-dir", h.rootDir,
		"--pod-manifest-path", h.manifestDir,
		"--container-runtime-endpoint", criEndpoint,
		"--image-service-endpoint", missing,
		"--hostname-override", nodeName,
		"--anonymous-auth=true", "--authentication-token-webhook=false", "--authorization-mode=AlwaysAllow",
	)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("heartlet still ran with a missing image service endpoint; output:\n%s", out.String())
	case err == nil:
		t.Fatalf("heartlet exited 0 with a missing image service endpoint; output:\n%s", out.String())
	case !errors.As(err, &exit):
		t.Fatalf("run heartlet: %v", err)
	}
	if want := "image service endpoint " + missing + ": no such socket"; !strings.Contains(out.String(), want) {
		t.Errorf("output does not say %q:\n%s", want, out.String())
	}
}

// nodeStatusMaxImages: 1 reports only the largest image in the Node's
// status, though the runtime has more.
func TestClusterNodeStatusMaxImages(t *testing.T) {
	startClusterHeartlet(t, clusterOptions{config: "nodeStatusMaxImages: 1\n"})

	ctx, cancel := ctx30()
	defer cancel()
	is, err := criclient.NewImageService(ctx, criEndpoint, 30*time.Second)
	if err != nil {
		t.Fatalf("connect to CRI image service %s: %v", criEndpoint, err)
	}
	defer is.Close(context.Background())
	list, err := is.ListImages(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var named int
	var largest uint64
	for _, im := range list {
		if len(im.RepoTags)+len(im.RepoDigests) > 0 {
			named++
			largest = max(largest, im.Size)
		}
	}
	if named < 2 {
		t.Fatalf("the runtime has %d named images; the test needs at least 2", named)
	}

	var node *v1.Node
	waitFor(t, nodeReadyTimeout, "node status to list images", func() (bool, string) {
		n, err := getNode()
		if err != nil {
			return false, err.Error()
		}
		node = n
		return len(n.Status.Images) > 0, fmt.Sprintf("%d images", len(n.Status.Images))
	})
	if len(node.Status.Images) != 1 {
		t.Fatalf("node status lists %d images, want 1 (nodeStatusMaxImages: 1; the runtime has %d)", len(node.Status.Images), named)
	}
	if got := node.Status.Images[0]; uint64(got.SizeBytes) != largest {
		t.Errorf("node status lists %v (%d bytes), want the largest image (%d bytes)", got.Names, got.SizeBytes, largest)
	}
}
