package runtime

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/heartlet/heartlet/internal/runtime/fakecri"
)

// imageMethods are the CRI ImageService methods.
var imageMethods = []string{"ListImages", "ImageStatus", "PullImage", "RemoveImage", "ImageFsInfo"}

// TestImageEndpoint checks that with an image service endpoint every image
// call goes to it and every runtime call to the runtime endpoint.
func TestImageEndpoint(t *testing.T) {
	rtSrv := fakecri.Start(t)
	imgSrv := fakecri.Start(t)
	ctx := context.Background()
	r, err := New(ctx, rtSrv.Endpoint(), 5*time.Second, WithImageEndpoint(imgSrv.Endpoint()))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })

	ref, err := r.PullImage(ctx, testImage, nil, nil)
	if err != nil {
		t.Fatalf("PullImage: %v", err)
	}
	if got, err := r.ImageRef(ctx, testImage); err != nil || got != ref {
		t.Errorf("ImageRef = %q, %v; want %q", got, err, ref)
	}
	if _, err := r.ImageSize(ctx, testImage); err != nil {
		t.Errorf("ImageSize: %v", err)
	}
	if _, _, err := r.ImageUser(ctx, testImage); err != nil {
		t.Errorf("ImageUser: %v", err)
	}
	if list, err := r.ListImages(ctx); err != nil || len(list) != 1 {
		t.Errorf("ListImages = %d images, %v; want 1", len(list), err)
	}
	if _, err := r.ImageFsInfo(ctx); err != nil {
		t.Errorf("ImageFsInfo: %v", err)
	}
	if err := r.RemoveImage(ctx, testImage); err != nil {
		t.Errorf("RemoveImage: %v", err)
	}
	if _, err := r.Status(ctx); err != nil {
		t.Errorf("Status: %v", err)
	}
	if _, err := r.RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "ns", Uid: "uid-1"}}, ""); err != nil {
		t.Errorf("RunPodSandbox: %v", err)
	}
	if _, err := r.ListPods(ctx); err != nil {
		t.Errorf("ListPods: %v", err)
	}

	for _, m := range rtSrv.Calls() {
		if slices.Contains(imageMethods, m) {
			t.Errorf("runtime endpoint got image call %s (calls %v)", m, rtSrv.Calls())
		}
	}
	imgCalls := imgSrv.Calls()
	for _, m := range imgCalls {
		if !slices.Contains(imageMethods, m) {
			t.Errorf("image endpoint got runtime call %s (calls %v)", m, imgCalls)
		}
	}
	for _, m := range imageMethods {
		if !slices.Contains(imgCalls, m) {
			t.Errorf("image endpoint never got %s (calls %v)", m, imgCalls)
		}
	}
	for _, m := range []string{"Version", "Status", "RunPodSandbox", "ListPodSandbox"} {
		if !slices.Contains(rtSrv.Calls(), m) {
			t.Errorf("runtime endpoint never got %s (calls %v)", m, rtSrv.Calls())
		}
	}
	if len(rtSrv.Images()) != 0 {
		t.Errorf("the runtime endpoint has images %v, want none", rtSrv.Images())
	}
}

// TestImageEndpointErrors checks that New fails at start, naming the image
// service endpoint, when that endpoint is missing or does not serve the
// CRI image API, while the runtime endpoint is fine.
func TestImageEndpointErrors(t *testing.T) {
	rtSrv := fakecri.Start(t)
	dir := t.TempDir()
	if len(dir) > 80 {
		d, err := os.MkdirTemp("", "img")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(d) })
		dir = d
	}
	// A gRPC server with the runtime service only: no image API.
	runtimeOnly := filepath.Join(dir, "runtime-only.sock")
	l, err := net.Listen("unix", runtimeOnly)
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(gs, runtimeapi.UnimplementedRuntimeServiceServer{})
	go func() { _ = gs.Serve(l) }()
	t.Cleanup(gs.Stop)

	missing := "unix://" + filepath.Join(dir, "nope.sock")
	tests := []struct {
		name     string
		endpoint string
		want     []string
		is       error
	}{
		{name: "missing socket", endpoint: missing, want: []string{"image service endpoint " + missing + ": no such socket"}, is: fs.ErrNotExist},
		{name: "no image API", endpoint: "unix://" + runtimeOnly, want: []string{"image service endpoint unix://" + runtimeOnly, "not a CRI v1 image service"}},
		{name: "unsupported scheme", endpoint: "tcp://127.0.0.1:1", want: []string{"image service endpoint tcp://127.0.0.1:1", "only unix sockets"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := New(context.Background(), rtSrv.Endpoint(), 5*time.Second, WithImageEndpoint(tt.endpoint))
			if err == nil {
				_ = r.Close(context.Background())
				t.Fatalf("New with image endpoint %s succeeded, want an error", tt.endpoint)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %v is not %v", err, tt.is)
			}
		})
	}
}
