package volume

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// fakeMounter keeps a mount table in memory.
type fakeMounter struct {
	mu         sync.Mutex
	mounts     []MountPoint
	options    map[string][]string
	mountCalls int
	unmounted  []string
	// binds maps the targets of bind mounts to what their source named
	// when mounted (a /proc/self/fd/N source read as its link).
	binds      map[string]string
	bindErr    error
	unmountErr error
	listErr    error
	// lists counts the reads of the mount table.
	lists int
}

func newFakeMounter() *fakeMounter {
	return &fakeMounter{options: map[string][]string{}, binds: map[string]string{}}
}

func (f *fakeMounter) Mount(source, target, fstype string, options []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := os.Stat(target); err != nil {
		return fmt.Errorf("fake mount: %w", err)
	}
	f.mountCalls++
	f.mounts = append(f.mounts, MountPoint{Path: filepath.Clean(target), FSType: fstype})
	f.options[filepath.Clean(target)] = options
	return nil
}

func (f *fakeMounter) BindMount(source, target string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.bindErr != nil {
		return f.bindErr
	}
	if _, err := os.Stat(target); err != nil {
		return fmt.Errorf("fake bind mount: %w", err)
	}
	resolved, err := os.Readlink(source)
	if err != nil {
		resolved = source
	}
	f.mountCalls++
	f.mounts = append(f.mounts, MountPoint{Path: filepath.Clean(target), FSType: "bind"})
	f.binds[filepath.Clean(target)] = resolved
	return nil
}

// bound returns what target was last bind-mounted from.
func (f *fakeMounter) bound(target string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.binds[target]
}

func (f *fakeMounter) Unmount(target string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.unmountErr != nil {
		return f.unmountErr
	}
	for i := len(f.mounts) - 1; i >= 0; i-- {
		if f.mounts[i].Path == target {
			f.mounts = append(f.mounts[:i], f.mounts[i+1:]...)
			f.unmounted = append(f.unmounted, target)
			return nil
		}
	}
	return fmt.Errorf("fake unmount %s: not mounted", target)
}

func (f *fakeMounter) List() ([]MountPoint, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	if f.listErr != nil {
		return nil, f.listErr
	}
	return append([]MountPoint(nil), f.mounts...), nil
}

func (f *fakeMounter) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mountCalls
}

// fakeGetter serves ConfigMaps, Secrets and tokens from memory.
type fakeGetter struct {
	mu         sync.Mutex
	clk        *testingclock.FakeClock
	configMaps map[string]*v1.ConfigMap
	secrets    map[string]*v1.Secret
	tokenReqs  []tokenCall
	tokenErr   error
	// tokenErrs are the errors of the next token requests, in order,
	// before tokenErr.
	tokenErrs []error
	getErr    error
	gets      int
}

type tokenCall struct {
	namespace, serviceAccount string
	req                       *authenticationv1.TokenRequest
}

func newFakeGetter(clk *testingclock.FakeClock) *fakeGetter {
	return &fakeGetter{clk: clk, configMaps: map[string]*v1.ConfigMap{}, secrets: map[string]*v1.Secret{}}
}

func (g *fakeGetter) setConfigMap(cm *v1.ConfigMap) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.configMaps[cm.Namespace+"/"+cm.Name] = cm
}

func (g *fakeGetter) setSecret(s *v1.Secret) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.secrets[s.Namespace+"/"+s.Name] = s
}

func (g *fakeGetter) GetConfigMap(_ context.Context, ns, name string) (*v1.ConfigMap, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gets++
	if g.getErr != nil {
		return nil, g.getErr
	}
	cm, ok := g.configMaps[ns+"/"+name]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
	}
	return cm.DeepCopy(), nil
}

func (g *fakeGetter) GetSecret(_ context.Context, ns, name string) (*v1.Secret, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gets++
	if g.getErr != nil {
		return nil, g.getErr
	}
	s, ok := g.secrets[ns+"/"+name]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
	}
	return s.DeepCopy(), nil
}

func (g *fakeGetter) RequestToken(_ context.Context, ns, sa string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.tokenReqs = append(g.tokenReqs, tokenCall{ns, sa, req.DeepCopy()})
	if len(g.tokenErrs) > 0 {
		err := g.tokenErrs[0]
		g.tokenErrs = g.tokenErrs[1:]
		return nil, err
	}
	if g.tokenErr != nil {
		return nil, g.tokenErr
	}
	out := req.DeepCopy()
	out.Status.Token = fmt.Sprintf("token-%d", len(g.tokenReqs))
	out.Status.ExpirationTimestamp = metav1.NewTime(g.clk.Now().Add(time.Duration(*req.Spec.ExpirationSeconds) * time.Second))
	return out, nil
}

func (g *fakeGetter) tokenCalls() []tokenCall {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]tokenCall(nil), g.tokenReqs...)
}

// env is a manager over a temporary root with fakes.
type env struct {
	m       *Manager
	root    string
	clk     *testingclock.FakeClock
	mounter *fakeMounter
	getter  *fakeGetter
}

func newEnv(t *testing.T, withAPI bool) *env {
	t.Helper()
	clk := testingclock.NewFakeClock(epoch)
	e := &env{root: t.TempDir(), clk: clk, mounter: newFakeMounter(), getter: newFakeGetter(clk)}
	opts := Options{RootDir: e.root, Clock: clk, Mounter: e.mounter, NodeName: "node-1", NodeIPs: []string{"10.0.0.7"}}
	if withAPI {
		opts.Getter = e.getter
	}
	e.m = New(opts)
	return e
}

func newPod(uid string, vols ...v1.Volume) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web", Namespace: "ns1", UID: types.UID(uid),
			Labels:      map[string]string{"app": "web", "tier": "front"},
			Annotations: map[string]string{podConfigSourceKey: "api"},
		},
		Spec: v1.PodSpec{
			ServiceAccountName: "sa1",
			Containers:         []v1.Container{{Name: "c1"}},
			Volumes:            vols,
		},
	}
}

const podConfigSourceKey = "kubernetes.io/config.source"

// readVolume returns the user-visible files of a volume directory (read
// through the links), keyed by relative path.
func readVolume(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("read volume %s: %v", dir, err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "..") {
			continue
		}
		walkVisible(t, dir, e.Name(), out)
	}
	return out
}

func walkVisible(t *testing.T, dir, rel string, out map[string]string) {
	t.Helper()
	full := filepath.Join(dir, rel)
	fi, err := os.Stat(full)
	if err != nil {
		t.Fatalf("stat %s: %v", full, err)
	}
	if fi.IsDir() {
		entries, err := os.ReadDir(full)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			walkVisible(t, dir, rel+"/"+e.Name(), out)
		}
		return
	}
	b, err := os.ReadFile(full)
	if err != nil {
		t.Fatal(err)
	}
	out[rel] = string(b)
}

// fileMode returns the permission bits of the file behind path.
func fileMode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// dataDirs lists the timestamped data directories of a volume.
func dataDirs(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), "..") {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

func mustEqualMap(t *testing.T, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("files = %v, want %v", got, want)
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Fatalf("files = %v, want %v", got, want)
		}
	}
}

func ptr[T any](v T) *T { return &v }
