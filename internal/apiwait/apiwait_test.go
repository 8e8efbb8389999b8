package apiwait

import (
	"context"
	"errors"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

func TestRetryWhenBackCalls(t *testing.T) {
	refused := errors.New("connect: connection refused")
	forbidden := errors.New("pods is forbidden")
	// Three retries after the first one that follows the server's return.
	delays := []time.Duration{0, 0, 0}
	tests := []struct {
		name      string
		results   []error // of the calls, in order
		wait      WaitFunc
		wantCalls int
		wantErr   error
	}{
		{name: "success", results: []error{nil}, wait: func(context.Context, time.Time) bool { panic("waited") }, wantCalls: 1},
		{name: "failed, server back", results: []error{refused, nil}, wait: func(context.Context, time.Time) bool { return true }, wantCalls: 2},
		{name: "failed, back, refused twice, then served", results: []error{refused, forbidden, forbidden, nil}, wait: func(context.Context, time.Time) bool { return true }, wantCalls: 4},
		{name: "failed, back, refused on every try", results: []error{refused, forbidden, forbidden, forbidden, forbidden}, wait: func(context.Context, time.Time) bool { return true }, wantCalls: 5, wantErr: forbidden},
		{name: "failed, not back", results: []error{refused}, wait: func(context.Context, time.Time) bool { return false }, wantCalls: 1, wantErr: refused},
		{name: "failed, no wait", results: []error{refused}, wantCalls: 1, wantErr: refused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			v, err := retryWhenBack(context.Background(), tt.wait, delays, func() (int, error) {
				calls++
				return calls, tt.results[calls-1]
			})
			if calls != tt.wantCalls || !errors.Is(err, tt.wantErr) {
				t.Fatalf("calls = %d, err = %v; want %d, %v", calls, err, tt.wantCalls, tt.wantErr)
			}
			if err == nil && v != calls {
				t.Errorf("value = %d, want the last call's %d", v, calls)
			}
		})
	}
}

// TestResumeListWatch: both the list and the watch of a ListWatch go
// through the wait; without a wait the ListWatch is left as it is.
func TestResumeListWatch(t *testing.T) {
	var lists, watches, waits int
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			if lists++; lists == 1 {
				return nil, errors.New("connect: connection refused")
			}
			return &v1.PodList{}, nil
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			if watches++; watches == 1 {
				return nil, errors.New("connect: connection refused")
			}
			return watch.NewFake(), nil
		},
	}
	if got := ResumeListWatch(lw, nil); got != lw {
		t.Error("without a wait, the ListWatch was replaced")
	}
	r := ResumeListWatch(lw, func(context.Context, time.Time) bool { waits++; return true })
	ctx := context.Background()
	if _, err := r.ListWithContextFunc(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("list: %v", err)
	}
	if _, err := r.WatchFuncWithContext(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("watch: %v", err)
	}
	if lists != 2 || watches != 2 || waits != 2 {
		t.Errorf("lists, watches, waits = %d, %d, %d; want 2, 2, 2", lists, watches, waits)
	}
}
