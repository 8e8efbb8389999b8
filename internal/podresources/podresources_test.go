package podresources

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// calls records the handlers' calls in order, across handlers.
type calls struct{ log []string }

func (c *calls) add(name, op string, uid types.UID) {
	c.log = append(c.log, fmt.Sprintf("%s %s %s", op, name, uid))
}

// fake is a handler whose resource is a set of UIDs; errs fail operations.
type fake struct {
	name  string
	calls *calls
	held  map[types.UID]bool
	errs  map[string]error // by operation
}

func newFake(name string, c *calls) *fake {
	return &fake{name: name, calls: c, held: map[types.UID]bool{}, errs: map[string]error{}}
}

func (f *fake) Name() string { return f.name }
func (f *fake) Prepare(_ context.Context, pod *v1.Pod) error {
	f.calls.add(f.name, OpPrepare, pod.UID)
	if err := f.errs[OpPrepare]; err != nil {
		return err
	}
	f.held[pod.UID] = true
	return nil
}
func (f *fake) Reconstruct(_ context.Context, pod *v1.Pod) error {
	f.calls.add(f.name, OpReconstruct, pod.UID)
	return f.errs[OpReconstruct]
}
func (f *fake) Cleanup(_ context.Context, uid types.UID) error {
	f.calls.add(f.name, OpCleanup, uid)
	if err := f.errs[OpCleanup]; err != nil {
		return err
	}
	delete(f.held, uid)
	return nil
}

// releasing is a fake that is also a Releaser and a Lister.
type releasing struct{ *fake }

func (r releasing) Release(_ context.Context, pod *v1.Pod) error {
	r.calls.add(r.name, OpRelease, pod.UID)
	if err := r.errs[OpRelease]; err != nil {
		return err
	}
	delete(r.held, pod.UID)
	return nil
}
func (r releasing) List(context.Context) ([]types.UID, error) {
	var out []types.UID
	for uid := range r.held {
		out = append(out, uid)
	}
	slices.Sort(out)
	return out, r.errs[OpList]
}

func testPod(uid types.UID) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: uid}}
}

// Prepare runs in list order; Release (Releasers only) and Cleanup run in
// reverse order; Reconstruct in list order.
func TestSetOrder(t *testing.T) {
	ctx := t.Context()
	c := &calls{}
	a, b, d := releasing{newFake("a", c)}, newFake("b", c), releasing{newFake("c", c)}
	s := New(a, nil, b, d)
	if got, want := s.Names(), []string{"a", "b", "c"}; !slices.Equal(got, want) {
		t.Fatalf("Names = %q, want %q (nil left out)", got, want)
	}
	pod := testPod("u")
	for _, step := range []func() error{
		func() error { return s.Prepare(ctx, pod) },
		func() error { return s.Reconstruct(ctx, pod) },
		func() error { return s.Release(ctx, pod) },
		func() error { return s.Cleanup(ctx, pod.UID) },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{
		"prepare a u", "prepare b u", "prepare c u",
		"reconstruct a u", "reconstruct b u", "reconstruct c u",
		"release c u", "release a u",
		"clean up c u", "clean up b u", "clean up a u",
	}
	if !slices.Equal(c.log, want) {
		t.Errorf("calls\n got %q\nwant %q", c.log, want)
	}
}

func TestForNodeOrder(t *testing.T) {
	c := &calls{}
	s := ForNode(NodeHandlers{
		ContainerFiles: newFake("files", c),
		Volumes:        newFake("volumes", c),
		Logs:           newFake("logs", c),
		Cgroup:         newFake("cgroup", c),
		Allocation:     newFake("allocation", c),
	})
	if got, want := s.Names(), []string{"allocation", "cgroup", "logs", "volumes", "files"}; !slices.Equal(got, want) {
		t.Errorf("ForNode order %q, want %q", got, want)
	}
	if got := ForNode(NodeHandlers{Volumes: newFake("volumes", c)}).Names(); !slices.Equal(got, []string{"volumes"}) {
		t.Errorf("ForNode with one handler = %q", got)
	}
}

// A failing Prepare stops the Set: later handlers are not prepared, and the
// error names the handler and wraps its cause.
func TestPrepareStopsAtFirstError(t *testing.T) {
	c := &calls{}
	a, b, d := newFake("a", c), newFake("b", c), newFake("c", c)
	cause := errors.New("no space")
	b.errs[OpPrepare] = cause
	err := New(a, b, d).Prepare(t.Context(), testPod("u"))
	var he *HandlerError
	if !errors.As(err, &he) || he.Handler != "b" || he.Op != OpPrepare || !errors.Is(err, cause) {
		t.Fatalf("Prepare = %v, want a HandlerError of b wrapping the cause", err)
	}
	if err.Error() != "prepare b: no space" {
		t.Errorf("message %q", err.Error())
	}
	if want := []string{"prepare a u", "prepare b u"}; !slices.Equal(c.log, want) {
		t.Errorf("calls %q, want %q", c.log, want)
	}
}

// Cleanup, Release and Reconstruct go on after an error and join every
// handler's error.
func TestCleanupKeepsGoingAndJoinsErrors(t *testing.T) {
	ctx := t.Context()
	errA, errC := errors.New("busy"), errors.New("mounted")
	tests := []struct {
		op   string
		run  func(*Set) error
		want []string
	}{
		{OpCleanup, func(s *Set) error { return s.Cleanup(ctx, "u") }, []string{"clean up c u", "clean up b u", "clean up a u"}},
		{OpRelease, func(s *Set) error { return s.Release(ctx, testPod("u")) }, []string{"release c u", "release a u"}},
		{OpReconstruct, func(s *Set) error { return s.Reconstruct(ctx, testPod("u")) }, []string{"reconstruct a u", "reconstruct b u", "reconstruct c u"}},
	}
	for _, tt := range tests {
		t.Run(tt.op, func(t *testing.T) {
			c := &calls{}
			a, b, d := releasing{newFake("a", c)}, newFake("b", c), releasing{newFake("c", c)}
			a.errs[tt.op], d.errs[tt.op] = errA, errC
			err := tt.run(New(a, b, d))
			if !errors.Is(err, errA) || !errors.Is(err, errC) {
				t.Errorf("error %v, want both handlers' errors", err)
			}
			if !slices.Equal(c.log, tt.want) {
				t.Errorf("calls %q, want %q", c.log, tt.want)
			}
		})
	}
}

// Cleanup without Prepare, and Cleanup twice, succeed and leave nothing.
func TestCleanupIdempotentWithoutPrepare(t *testing.T) {
	ctx := t.Context()
	c := &calls{}
	a := releasing{newFake("a", c)}
	s := New(a, newFake("b", c))
	for range 2 {
		if err := s.Cleanup(ctx, "never-prepared"); err != nil {
			t.Fatalf("Cleanup without Prepare: %v", err)
		}
	}
	if err := s.Prepare(ctx, testPod("u")); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := s.Release(ctx, testPod("u")); err != nil {
			t.Fatalf("Release: %v", err)
		}
		if err := s.CleanupPod(ctx, "u"); err != nil {
			t.Fatalf("CleanupPod: %v", err)
		}
	}
	if uids, err := s.PodsWithResources(ctx); err != nil || len(uids) != 0 {
		t.Errorf("after clean-up PodsWithResources = %v, %v; want none", uids, err)
	}
}

// PodsWithResources is the union, each UID once, of every Lister's list;
// a handler that cannot list does not hide the others' pods.
func TestPodsWithResources(t *testing.T) {
	ctx := t.Context()
	c := &calls{}
	a, b, plain := releasing{newFake("a", c)}, releasing{newFake("b", c)}, newFake("plain", c)
	a.held["x"], a.held["y"] = true, true
	b.held["y"], b.held["z"] = true, true
	plain.held["hidden"] = true // not a Lister: never listed
	s := New(a, plain, b)
	uids, err := s.PodsWithResources(ctx)
	if err != nil || !slices.Equal(uids, []types.UID{"x", "y", "z"}) {
		t.Fatalf("PodsWithResources = %v, %v; want [x y z]", uids, err)
	}
	cause := errors.New("unreadable")
	a.errs[OpList] = cause
	a.held = map[types.UID]bool{}
	uids, err = s.PodsWithResources(ctx)
	var he *HandlerError
	if !errors.As(err, &he) || he.Handler != "a" || he.Op != OpList || !slices.Equal(uids, []types.UID{"y", "z"}) {
		t.Errorf("with a list error PodsWithResources = %v, %v; want [y z] and a's error", uids, err)
	}
}

// An empty Set does nothing and fails nothing.
func TestEmptySet(t *testing.T) {
	ctx := t.Context()
	s := New()
	if err := errors.Join(s.Prepare(ctx, testPod("u")), s.Reconstruct(ctx, testPod("u")), s.Release(ctx, testPod("u")), s.Cleanup(ctx, "u")); err != nil {
		t.Error(err)
	}
	if uids, err := s.PodsWithResources(ctx); err != nil || uids != nil {
		t.Errorf("PodsWithResources = %v, %v", uids, err)
	}
}
