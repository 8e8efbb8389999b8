package images_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/heartlet/heartlet/internal/images"
	"github.com/heartlet/heartlet/internal/runtime"
	"github.com/heartlet/heartlet/internal/runtime/fakecri"
)

// TestPullerWithCRI runs pulls through a real CRI client against a fake
// runtime whose pulls block until the test lets them go, and counts the
// pulls the runtime serves at once for each setting.
func TestPullerWithCRI(t *testing.T) {
	const pulls = 4
	tests := []struct {
		name string
		opts images.Options
		want int
	}{
		{"serializeImagePulls true", images.Options{Serialize: true}, 1},
		{"maxParallelImagePulls 2", images.Options{MaxParallel: 2}, 2},
		{"maxParallelImagePulls unset", images.Options{}, pulls},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			srv := fakecri.Start(t)
			var (
				mu       sync.Mutex
				inflight int
				most     int
			)
			entered := make(chan string, pulls)
			release := make(chan struct{})
			srv.SetPullHook(func(ctx context.Context, image string) error {
				mu.Lock()
				inflight++
				most = max(most, inflight)
				mu.Unlock()
				defer func() {
					mu.Lock()
					inflight--
					mu.Unlock()
				}()
				entered <- image
				select {
				case <-release:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			})
			rt, err := runtime.New(ctx, srv.Endpoint(), 30*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Close(context.Background())
			p := images.NewPuller(rt, tt.opts)

			done := make(chan error, pulls)
			for i := range pulls {
				go func() {
					_, _, err := p.PullImage(ctx, fmt.Sprintf("registry.test/img:%d", i), nil, nil)
					done <- err
				}()
			}
			// The first tt.want pulls reach the runtime together...
			for range tt.want {
				select {
				case <-entered:
				case <-ctx.Done():
					t.Fatalf("fewer than %d pulls reached the runtime at once", tt.want)
				}
			}
			// ...and each one finished lets the next in.
			for finished := range pulls {
				release <- struct{}{}
				if err := <-done; err != nil {
					t.Fatalf("pull: %v", err)
				}
				if finished+tt.want < pulls {
					<-entered
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if most != tt.want {
				t.Errorf("the runtime served up to %d pulls at once, want %d", most, tt.want)
			}
			if n := len(srv.Images()); n != pulls {
				t.Errorf("runtime has %d images, want %d", n, pulls)
			}
		})
	}
}
