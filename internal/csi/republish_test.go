package csi

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/heartlet/heartlet/internal/kubeapi/kubeapifake"
)

// countingTokens hands out a new token for every request.
type countingTokens struct {
	mu sync.Mutex
	n  int
}

func (f *countingTokens) RequestToken(_ context.Context, _, _ string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	out := req.DeepCopy()
	out.Status.Token = fmt.Sprintf("token-%d", f.n)
	return out, nil
}

// publishes returns the driver's NodePublishVolume requests.
func (s *nodeServer) publishes() []*csipb.NodePublishVolumeRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slicesOf[*csipb.NodePublishVolumeRequest](s.reqs, "publish")
}

func slicesOf[T any](reqs []recorded, kind string) []T {
	var out []T
	for _, r := range reqs {
		if r.kind == kind {
			out = append(out, r.req.(T))
		}
	}
	return out
}

func tokenOf(t *testing.T, req *csipb.NodePublishVolumeRequest) string {
	t.Helper()
	var got map[string]struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal([]byte(req.VolumeContext[keyTokens]), &got); err != nil {
		t.Fatalf("tokens in the volume context: %v (%q)", err, req.VolumeContext[keyTokens])
	}
	return got["vault"].Token
}

// A driver that sets requiresRepublish gets the same NodePublishVolume
// again, with a fresh token, when the pod's set-up runs and the last
// publication is RepublishInterval old; other drivers never do.
func TestRepublish(t *testing.T) {
	ctx := context.Background()
	inline := &v1.Volume{Name: "secrets", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{
		Driver: testDriver, VolumeAttributes: map[string]string{"class": "vault"}}}}
	kinds := map[string]func(e *env, p *Publisher) error{
		"persistent": func(_ *env, p *Publisher) error {
			_, err := p.SetUpPersistent(ctx, pod("a"), claimVolume(), csiPV("pv-1", "vol-1"), false)
			return err
		},
		"block": func(_ *env, p *Publisher) error {
			_, err := p.SetUpPersistentBlock(ctx, pod("a"), claimVolume(), blockPV("pv-1", "vol-1"), false)
			return err
		},
		"inline": func(_ *env, p *Publisher) error {
			_, err := p.SetUp(ctx, pod("a"), inline)
			return err
		},
	}
	for kind, setUp := range kinds {
		for _, requires := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s requiresRepublish=%t", kind, requires), func(t *testing.T) {
				srv := &nodeServer{stage: true}
				e := newEnv(t, srv, csiDriverObj(func(cd *storagev1.CSIDriver) {
					cd.Spec.RequiresRepublish = &requires
					cd.Spec.TokenRequests = []storagev1.TokenRequest{{Audience: "vault"}}
					cd.Spec.VolumeLifecycleModes = []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent, storagev1.VolumeLifecycleEphemeral}
				}))
				clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
				pub := NewPublisher(PublisherOptions{RootDir: e.root, NodeName: testNode, Drivers: e.drivers, Kube: kubeapifake.Wrap(e.kube),
					Tokens: &countingTokens{}, Clock: clk, RepublishInterval: 30 * time.Second})
				if err := setUp(e, pub); err != nil {
					t.Fatal(err)
				}
				// Too early: nothing.
				clk.SetTime(clk.Now().Add(29 * time.Second))
				if err := setUp(e, pub); err != nil {
					t.Fatal(err)
				}
				if got := srv.publishes(); len(got) != 1 {
					t.Fatalf("%d publishes before the interval, want 1", len(got))
				}
				for range 2 {
					clk.SetTime(clk.Now().Add(30 * time.Second))
					if err := setUp(e, pub); err != nil {
						t.Fatal(err)
					}
				}
				got := srv.publishes()
				if !requires {
					if len(got) != 1 {
						t.Fatalf("%d publishes of a driver without requiresRepublish, want 1", len(got))
					}
					return
				}
				if len(got) != 3 {
					t.Fatalf("%d publishes, want 3", len(got))
				}
				for i := 1; i < len(got); i++ {
					if tokenOf(t, got[i]) == tokenOf(t, got[i-1]) {
						t.Errorf("publish %d has the same token %q as the one before", i, tokenOf(t, got[i]))
					}
					a, b := cloneWithoutTokens(got[0]), cloneWithoutTokens(got[i])
					if a.String() != b.String() {
						t.Errorf("republish %d differs from the publication:\n%v\n%v", i, b, a)
					}
				}
				if stages := countCalls(srv, "stage vol-1"); kind != "inline" && stages != 1 {
					t.Errorf("%d stages, want 1", stages)
				}
				// Torn down: never republished again.
				if err := pub.TearDown(ctx, "a"); err != nil {
					t.Fatal(err)
				}
				clk.SetTime(clk.Now().Add(time.Hour))
				name := map[bool]string{true: "secrets", false: "pv-1"}[kind == "inline"]
				if err := pub.republish(ctx, pod("a"), name, kind == "block", nil); err != nil {
					t.Fatal(err)
				}
				if got := srv.publishes(); len(got) != 3 {
					t.Fatalf("%d publishes after the tear-down, want 3", len(got))
				}
			})
		}
	}
}

func cloneWithoutTokens(r *csipb.NodePublishVolumeRequest) *csipb.NodePublishVolumeRequest {
	c := &csipb.NodePublishVolumeRequest{VolumeId: r.VolumeId, PublishContext: r.PublishContext, StagingTargetPath: r.StagingTargetPath,
		TargetPath: r.TargetPath, VolumeCapability: r.VolumeCapability, Readonly: r.Readonly, Secrets: r.Secrets, VolumeContext: map[string]string{}}
	for k, v := range r.VolumeContext {
		if k != keyTokens {
			c.VolumeContext[k] = v
		}
	}
	return c
}

// After a restart, a reconstructed publication of such a driver is
// republished at the pod's first set-up, without staging again.
func TestRepublishAfterRestart(t *testing.T) {
	ctx := context.Background()
	yes := true
	srv := &nodeServer{stage: true}
	e := newEnv(t, srv, csiDriverObj(func(cd *storagev1.CSIDriver) { cd.Spec.RequiresRepublish = &yes }))
	pv := csiPV("pv-1", "vol-1")
	if _, err := e.pub.SetUpPersistent(ctx, pod("a"), claimVolume(), pv, false); err != nil {
		t.Fatal(err)
	}
	first := srv.publishes()[0]
	pub := e.newPublisher()
	if err := pub.Reconstruct(ctx, pod("a")); err != nil {
		t.Fatal(err)
	}
	if _, err := pub.SetUpPersistent(ctx, pod("a"), claimVolume(), pv, false); err != nil {
		t.Fatal(err)
	}
	got := srv.publishes()
	if len(got) != 2 || got[1].String() != first.String() {
		t.Fatalf("publishes %v, want the first one again", got)
	}
	if n := countCalls(srv, "stage vol-1"); n != 1 {
		t.Errorf("%d stages, want 1", n)
	}
}

// countCalls counts the driver's calls that are call.
func countCalls(s *nodeServer, call string) int {
	n := 0
	for _, c := range s.got() {
		if c == call {
			n++
		}
	}
	return n
}

// A republication the driver fails is a FailedMount warning on the pod
// with the driver's message, as upstream's failed remount; the set-up of
// the pod goes on with the last publication.
func TestRepublishFailureIsAnEvent(t *testing.T) {
	ctx := context.Background()
	srv := &nodeServer{stage: true}
	requires := true
	e := newEnv(t, srv, csiDriverObj(func(cd *storagev1.CSIDriver) { cd.Spec.RequiresRepublish = &requires }))
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	rec := record.NewFakeRecorder(10)
	pub := NewPublisher(PublisherOptions{RootDir: e.root, NodeName: testNode, Drivers: e.drivers, Kube: kubeapifake.Wrap(e.kube),
		Clock: clk, RepublishInterval: 30 * time.Second, Events: rec})
	if _, err := pub.SetUpPersistent(ctx, pod("a"), claimVolume(), csiPV("pv-1", "vol-1"), false); err != nil {
		t.Fatal(err)
	}
	srv.mu.Lock()
	srv.publishErr = status.Error(codes.Unavailable, "vault sealed")
	srv.mu.Unlock()
	clk.SetTime(clk.Now().Add(time.Minute))
	if _, err := pub.SetUpPersistent(ctx, pod("a"), claimVolume(), csiPV("pv-1", "vol-1"), false); err != nil {
		t.Fatalf("set-up with a failed republication = %v, want the last publication kept", err)
	}
	select {
	case ev := <-rec.Events:
		if !strings.HasPrefix(ev, `Warning FailedMount MountVolume.SetUp failed for volume "pv-1" : `) || !strings.Contains(ev, "vault sealed") {
			t.Errorf("event %q, want a FailedMount warning with the driver's message", ev)
		}
	default:
		t.Fatal("no event for the failed republication")
	}
}
