package mirror

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"

	"github.com/heartlet/heartlet/internal/kubeapi/kubeapifake"
	"github.com/heartlet/heartlet/internal/podconfig"
)

const nodeName = "node-a"

var testNode = &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName, UID: "node-uid"}}

func static(name, hash string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name + "-" + nodeName,
			Namespace: "kube-system",
			UID:       types.UID(hash),
			Labels:    map[string]string{"component": name},
			Annotations: map[string]string{
				podconfig.AnnotationConfigHash:   hash,
				podconfig.AnnotationConfigSource: podconfig.SourceFile,
				"example.com/note":               "kept",
			},
		},
		Spec: v1.PodSpec{
			NodeName:   nodeName,
			Containers: []v1.Container{{Name: name, Image: "registry.k8s.io/" + name + ":1"}},
		},
	}
}

// mirrorOf returns the mirror pod the API would hold for sp.
func mirrorOf(sp *v1.Pod, uid string) *v1.Pod {
	mp := sp.DeepCopy()
	mp.UID = types.UID(uid)
	mp.Annotations[podconfig.AnnotationConfigMirror] = ConfigHash(sp)
	return mp
}

func names(actions []clienttesting.Action) []string {
	var out []string
	for _, a := range actions {
		n := a.GetVerb()
		switch a := a.(type) {
		case clienttesting.CreateAction:
			n += " " + a.GetObject().(*v1.Pod).Name
		case clienttesting.DeleteAction:
			n += " " + a.GetName()
		}
		out = append(out, n)
	}
	return out
}

func TestSync(t *testing.T) {
	etcd := static("etcd", "hash-1")
	api := static("apiserver", "hash-2")
	etcdChanged := static("etcd", "hash-3")
	terminating := mirrorOf(etcd, "m-1")
	terminating.DeletionTimestamp = &metav1.Time{Time: time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)}
	otherNode := mirrorOf(static("proxy", "hash-4"), "m-4")
	otherNode.Spec.NodeName = "node-b"
	plainPod := static("proxy", "hash-5")
	plainPod.Annotations = nil

	tests := []struct {
		name    string
		static  []*v1.Pod
		mirrors []*v1.Pod
		want    []string
	}{
		{name: "missing mirrors are created", static: []*v1.Pod{etcd, api}, want: []string{"create apiserver-node-a", "create etcd-node-a"}},
		{name: "up-to-date mirrors are left alone", static: []*v1.Pod{etcd, api}, mirrors: []*v1.Pod{mirrorOf(etcd, "m-1"), mirrorOf(api, "m-2")}},
		{name: "a changed static pod replaces its mirror: delete first", static: []*v1.Pod{etcdChanged}, mirrors: []*v1.Pod{mirrorOf(etcd, "m-1")}, want: []string{"delete etcd-node-a"}},
		{name: "a mirror being deleted is deleted now", static: []*v1.Pod{etcd}, mirrors: []*v1.Pod{terminating}, want: []string{"delete etcd-node-a"}},
		{name: "orphan mirrors are deleted", mirrors: []*v1.Pod{mirrorOf(etcd, "m-1")}, want: []string{"delete etcd-node-a"}},
		{name: "mirrors of other nodes and plain pods are not touched", mirrors: []*v1.Pod{otherNode, plainPod}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kube := fake.NewClientset()
			m := New(kubeapifake.Wrap(kube), nodeName, func() *v1.Node { return testNode })
			if err := m.Sync(context.Background(), tt.static, tt.mirrors); err != nil {
				t.Fatalf("Sync: %v", err)
			}
			if got := names(kube.Actions()); strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("actions = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestCreatedMirror(t *testing.T) {
	kube := fake.NewClientset()
	m := New(kubeapifake.Wrap(kube), nodeName, func() *v1.Node { return testNode })
	sp := static("etcd", "hash-1")
	sp.Spec.NodeName = ""
	if err := m.Sync(context.Background(), []*v1.Pod{sp}, nil); err != nil {
		t.Fatal(err)
	}
	mp, err := kube.CoreV1().Pods("kube-system").Get(context.Background(), "etcd-node-a", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("mirror not created: %v", err)
	}
	if got := mp.Annotations[podconfig.AnnotationConfigMirror]; got != "hash-1" {
		t.Errorf("mirror annotation = %q, want hash-1", got)
	}
	if mp.Annotations["example.com/note"] != "kept" || mp.Labels["component"] != "etcd" {
		t.Errorf("labels %v / annotations %v not copied", mp.Labels, mp.Annotations)
	}
	if mp.Spec.NodeName != nodeName || len(mp.Spec.Containers) != 1 || mp.Spec.Containers[0].Image != "registry.k8s.io/etcd:1" {
		t.Errorf("spec = %+v, want the static spec bound to %s", mp.Spec, nodeName)
	}
	if len(mp.OwnerReferences) != 1 {
		t.Fatalf("owner references = %+v, want one", mp.OwnerReferences)
	}
	o := mp.OwnerReferences[0]
	if o.APIVersion != "v1" || o.Kind != "Node" || o.Name != nodeName || o.UID != "node-uid" || o.Controller == nil || !*o.Controller || o.BlockOwnerDeletion != nil {
		t.Errorf("owner reference = %+v, want controller v1/Node %s node-uid", o, nodeName)
	}
	if _, ok := sp.Annotations[podconfig.AnnotationConfigMirror]; ok {
		t.Errorf("the static pod's annotations were modified")
	}
	if sp.Spec.NodeName != "" {
		t.Errorf("the static pod's spec was modified")
	}
}

func TestDeleteUsesUIDPrecondition(t *testing.T) {
	old := mirrorOf(static("etcd", "hash-1"), "m-1")
	kube := fake.NewClientset(old)
	m := New(kubeapifake.Wrap(kube), nodeName, func() *v1.Node { return testNode })
	if err := m.Sync(context.Background(), []*v1.Pod{static("etcd", "hash-2")}, []*v1.Pod{old}); err != nil {
		t.Fatal(err)
	}
	acts := kube.Actions()
	if len(acts) != 1 {
		t.Fatalf("actions = %v, want one delete", names(acts))
	}
	opts := acts[0].(clienttesting.DeleteAction).GetDeleteOptions()
	if opts.GracePeriodSeconds == nil || *opts.GracePeriodSeconds != 0 {
		t.Errorf("grace period = %v, want 0", opts.GracePeriodSeconds)
	}
	if opts.Preconditions == nil || opts.Preconditions.UID == nil || *opts.Preconditions.UID != "m-1" {
		t.Errorf("preconditions = %+v, want UID m-1", opts.Preconditions)
	}

	// The next Sync, with the old mirror gone, creates the new one.
	kube.ClearActions()
	if err := m.Sync(context.Background(), []*v1.Pod{static("etcd", "hash-2")}, nil); err != nil {
		t.Fatal(err)
	}
	mp, err := kube.CoreV1().Pods("kube-system").Get(context.Background(), "etcd-node-a", metav1.GetOptions{})
	if err != nil || mp.Annotations[podconfig.AnnotationConfigMirror] != "hash-2" {
		t.Errorf("new mirror = %v, %v; want annotation hash-2", mp, err)
	}
}

func TestSyncErrors(t *testing.T) {
	gr := schema.GroupResource{Resource: "pods"}
	tests := []struct {
		name    string
		verb    string
		err     error
		node    *v1.Node
		mirrors bool // the API has an outdated mirror to delete
		wantErr error
		wantAny bool // some error is expected
	}{
		{name: "already exists is fine", verb: "create", err: apierrors.NewAlreadyExists(gr, "etcd-node-a"), node: testNode},
		{name: "refused by admission is logged, not returned", verb: "create", err: apierrors.NewForbidden(gr, "etcd-node-a", errors.New(`node "node-a" can not create pods that reference secrets`)), node: testNode},
		{name: "invalid is logged, not returned", verb: "create", err: apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "etcd-node-a", nil), node: testNode},
		{name: "server error is returned", verb: "create", err: apierrors.NewInternalError(errors.New("boom")), node: testNode, wantAny: true},
		{name: "unknown node", node: nil, wantErr: ErrNodeUnknown},
		{name: "node without UID", node: &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}, wantErr: ErrNodeUnknown},
		{name: "mirror already deleted", verb: "delete", err: apierrors.NewNotFound(gr, "etcd-node-a"), node: testNode, mirrors: true},
		{name: "mirror replaced meanwhile", verb: "delete", err: apierrors.NewConflict(gr, "etcd-node-a", errors.New("uid")), node: testNode, mirrors: true},
		{name: "delete server error is returned", verb: "delete", err: apierrors.NewInternalError(errors.New("boom")), node: testNode, mirrors: true, wantAny: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kube := fake.NewClientset()
			if tt.verb != "" {
				kube.PrependReactor(tt.verb, "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
					return true, nil, tt.err
				})
			}
			m := New(kubeapifake.Wrap(kube), nodeName, func() *v1.Node { return tt.node })
			sp := static("etcd", "hash-1")
			var mirrors []*v1.Pod
			if tt.mirrors {
				mirrors = []*v1.Pod{mirrorOf(static("etcd", "hash-0"), "m-0")}
			}
			err := m.Sync(context.Background(), []*v1.Pod{sp}, mirrors)
			switch {
			case tt.wantErr != nil:
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("Sync = %v, want %v", err, tt.wantErr)
				}
				if len(kube.Actions()) != 0 {
					t.Errorf("actions = %v, want none without the node", names(kube.Actions()))
				}
			case tt.wantAny:
				if err == nil || !strings.Contains(err.Error(), "etcd-node-a") {
					t.Errorf("Sync = %v, want an error naming the pod", err)
				}
			case err != nil:
				t.Errorf("Sync = %v, want nil", err)
			}
		})
	}
}

func TestRefusalLoggedOncePerPod(t *testing.T) {
	gr := schema.GroupResource{Resource: "pods"}
	kube := fake.NewClientset()
	kube.PrependReactor("create", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(gr, "etcd-node-a", errors.New("references a secret"))
	})
	m := New(kubeapifake.Wrap(kube), nodeName, func() *v1.Node { return testNode })
	var (
		mu     sync.Mutex
		logged []string
	)
	ctx := klog.NewContext(context.Background(), funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		logged = append(logged, args)
	}, funcr.Options{}))
	sp := static("etcd", "hash-1")
	for range 3 {
		if err := m.Sync(ctx, []*v1.Pod{sp}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(kube.Actions()); n != 3 {
		t.Errorf("create calls = %d, want a retry on every Sync", n)
	}
	mu.Lock()
	if len(logged) != 1 || !strings.Contains(logged[0], "references a secret") || !strings.Contains(logged[0], "etcd-node-a") {
		t.Errorf("log lines = %q, want one naming the pod and the API's message", logged)
	}
	mu.Unlock()
	if got := m.refused["kube-system/etcd-node-a"]; got != "hash-1" {
		t.Errorf("refused = %v, want the pod remembered with its hash", m.refused)
	}
	// A new version of the static pod is a new pod to log about; a removed
	// one is forgotten.
	if err := m.Sync(context.Background(), nil, nil); err != nil {
		t.Fatal(err)
	}
	if len(m.refused) != 0 {
		t.Errorf("refused = %v after the static pod was removed, want empty", m.refused)
	}
}

func TestMirrorFor(t *testing.T) {
	sp := static("etcd", "hash-1")
	current := mirrorOf(sp, "m-1")
	outdated := mirrorOf(static("etcd", "hash-0"), "m-0")
	deleting := mirrorOf(sp, "m-2")
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)}
	notMirror := sp.DeepCopy()
	notMirror.UID = "plain"
	otherNS := mirrorOf(sp, "m-3")
	otherNS.Namespace = "default"

	tests := []struct {
		name    string
		mirrors []*v1.Pod
		want    types.UID
	}{
		{name: "current mirror", mirrors: []*v1.Pod{otherNS, current}, want: "m-1"},
		{name: "outdated mirror is no mirror", mirrors: []*v1.Pod{outdated}},
		{name: "terminating mirror is no mirror", mirrors: []*v1.Pod{deleting}},
		{name: "pod without the annotation", mirrors: []*v1.Pod{notMirror}},
		{name: "other namespace", mirrors: []*v1.Pod{otherNS}},
		{name: "none", mirrors: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := MirrorFor(sp, tt.mirrors)
			if ok != (tt.want != "") {
				t.Fatalf("MirrorFor found = %v, want %v", ok, tt.want != "")
			}
			if ok && got.UID != tt.want {
				t.Errorf("MirrorFor = %s, want %s", got.UID, tt.want)
			}
		})
	}
}

func TestConfigHash(t *testing.T) {
	sp := static("etcd", "hash-1")
	if got := ConfigHash(sp); got != "hash-1" {
		t.Errorf("ConfigHash = %q, want hash-1", got)
	}
	delete(sp.Annotations, podconfig.AnnotationConfigHash)
	if got := ConfigHash(sp); got != "hash-1" {
		t.Errorf("ConfigHash without annotation = %q, want the UID", got)
	}
	if !IsMirror(mirrorOf(sp, "m")) || IsMirror(sp) {
		t.Errorf("IsMirror wrong")
	}
}
