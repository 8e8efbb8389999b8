package runtime

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/heartlet/heartlet/internal/errdefs"
	"github.com/heartlet/heartlet/internal/runtime/fakecri"
)

// An image without a user runs as root (upstream getImageUser treats it
// as uid 0); a numeric user is a uid, a name stays a name.
func TestImageUser(t *testing.T) {
	uid := int64(1000)
	tests := []struct {
		name     string
		set      func(f *fakecri.Server)
		wantUID  *int64
		wantName string
		wantErr  error
	}{
		{name: "no user is root", set: func(f *fakecri.Server) { f.AddImage("img:1") }, wantUID: new(int64)},
		{name: "numeric", set: func(f *fakecri.Server) { f.SetImageUser("img:1", &uid, "") }, wantUID: &uid},
		{name: "name", set: func(f *fakecri.Server) { f.SetImageUser("img:1", nil, "app") }, wantName: "app"},
		{name: "missing image", set: func(*fakecri.Server) {}, wantErr: errdefs.ErrNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			f := fakecri.Start(t)
			tc.set(f)
			r, err := New(ctx, f.Endpoint(), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = r.Close(context.Background()) })
			gotUID, gotName, err := r.ImageUser(ctx, "img:1")
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (gotUID == nil) != (tc.wantUID == nil) || (gotUID != nil && *gotUID != *tc.wantUID) || gotName != tc.wantName {
				t.Errorf("ImageUser = %v %q, want %v %q", deref(gotUID), gotName, deref(tc.wantUID), tc.wantName)
			}
		})
	}
}

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

// The user of an image ID is asked of the runtime once: the status that
// ImageRef reads for the pull policy answers the security context's
// question too, and a removed image is asked about again.
func TestImageUserAskedOnce(t *testing.T) {
	countStatus := func(f *fakecri.Server) int {
		n := 0
		for _, c := range f.Calls() {
			if c == "ImageStatus" {
				n++
			}
		}
		return n
	}
	uid := int64(1000)
	tests := []struct {
		name  string
		steps func(ctx context.Context, t *testing.T, r *Runtime, id string)
		want  int
	}{
		{"after ImageRef", func(ctx context.Context, t *testing.T, r *Runtime, id string) {
			if ref, err := r.ImageRef(ctx, "img:1"); err != nil || ref != id {
				t.Fatalf("ImageRef = %q, %v; want %q", ref, err, id)
			}
			mustUser(ctx, t, r, id, uid)
		}, 1},
		{"twice by ID", func(ctx context.Context, t *testing.T, r *Runtime, id string) {
			mustUser(ctx, t, r, id, uid)
			mustUser(ctx, t, r, id, uid)
		}, 1},
		{"by name is not by ID", func(ctx context.Context, t *testing.T, r *Runtime, id string) {
			mustUser(ctx, t, r, "img:1", uid)
			mustUser(ctx, t, r, "img:1", uid)
		}, 2},
		{"removed in between", func(ctx context.Context, t *testing.T, r *Runtime, id string) {
			mustUser(ctx, t, r, id, uid)
			if err := r.RemoveImage(ctx, id); err != nil {
				t.Fatal(err)
			}
			if _, _, err := r.ImageUser(ctx, id); !errors.Is(err, errdefs.ErrNotFound) {
				t.Fatalf("ImageUser of a removed image: err = %v, want not found", err)
			}
		}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			f := fakecri.Start(t)
			f.SetImageUser("img:1", &uid, "")
			id := f.AddImage("img:1")
			r, err := New(ctx, f.Endpoint(), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = r.Close(context.Background()) })
			f.ResetCalls()
			tc.steps(ctx, t, r, id)
			if got := countStatus(f); got != tc.want {
				t.Errorf("ImageStatus calls = %d, want %d (calls %v)", got, tc.want, f.Calls())
			}
		})
	}
}

func mustUser(ctx context.Context, t *testing.T, r *Runtime, image string, wantUID int64) {
	t.Helper()
	uid, name, err := r.ImageUser(ctx, image)
	if err != nil || uid == nil || *uid != wantUID || name != "" {
		t.Fatalf("ImageUser(%s) = %v %q %v, want %d", image, deref(uid), name, err, wantUID)
	}
}
