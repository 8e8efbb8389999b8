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
