//go:build integration

package apiserver

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2/ktesting"

	"github.com/heartlet/heartlet/internal/kubeapi"
)

// TestAgainstAPIServer runs the source with a node identity against a real
// API server: the pods bound to the node arrive, mirror pods are kept apart,
// and a deleted pod leaves the set.
func TestAgainstAPIServer(t *testing.T) {
	adminPath, nodePath := os.Getenv("HEARTLET_KUBECONFIG"), os.Getenv("HEARTLET_NODE_KUBECONFIG")
	if adminPath == "" || nodePath == "" {
		t.Skip("set HEARTLET_KUBECONFIG (admin) and HEARTLET_NODE_KUBECONFIG (a system:node:<name> identity) to run against an API server")
	}
	admin := clientFor(t, adminPath)
	nodeClient := clientFor(t, nodePath)
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()

	review, err := nodeClient.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("self subject review of the node identity: %v", err)
	}
	nodeName, ok := strings.CutPrefix(review.Status.UserInfo.Username, "system:node:")
	if !ok {
		t.Fatalf("HEARTLET_NODE_KUBECONFIG authenticates as %q, want system:node:<name>", review.Status.UserInfo.Username)
	}

	ns := fmt.Sprintf("apisource-%d", time.Now().UnixNano())
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", ns, err)
	}
	t.Cleanup(func() {
		_ = admin.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	// The ServiceAccount admission plugin wants the default account, which
	// only a controller manager would create.
	// A running controller manager may have created it first.
	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create service account %s/default: %v", ns, err)
	}

	no := false
	podOn := func(name, node string, annotations map[string]string) *v1.Pod {
		return &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: annotations},
			Spec: v1.PodSpec{
				NodeName:                     node,
				AutomountServiceAccountToken: &no,
				Containers:                   []v1.Container{{Name: "c", Image: "busybox"}},
			},
		}
	}
	create := func(p *v1.Pod) *v1.Pod {
		t.Helper()
		got, err := admin.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create pod %s/%s: %v", ns, p.Name, err)
		}
		return got
	}
	mine := create(podOn("mine", nodeName, nil))
	create(podOn("elsewhere", nodeName+"-other", nil))
	mirrorPod := create(podOn("static-"+nodeName, nodeName, map[string]string{"kubernetes.io/config.mirror": "hash"}))

	inNS := func(pods []*v1.Pod) []string {
		var out []string
		for _, p := range pods {
			if p.Namespace == ns {
				out = append(out, p.Name)
			}
		}
		return out
	}
	rec := newRecorder()
	src := New(nodeClient, nodeName, rec.sink())
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- src.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run() = %v", err)
		}
	}()

	rec.waitFor(t, "with pod mine", func(pods []*v1.Pod) bool { return slices.Equal(inNS(pods), []string{"mine"}) })
	var mirrors []string
	for _, p := range src.MirrorPods() {
		if p.Namespace == ns {
			mirrors = append(mirrors, string(p.UID))
		}
	}
	if !slices.Equal(mirrors, []string{string(mirrorPod.UID)}) {
		t.Errorf("MirrorPods() in %s = %v, want [%s]", ns, mirrors, mirrorPod.UID)
	}

	zero := int64(0)
	if err := admin.CoreV1().Pods(ns).Delete(ctx, mine.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatalf("delete pod %s/%s: %v", ns, mine.Name, err)
	}
	rec.waitFor(t, "without pod mine", func(pods []*v1.Pod) bool { return len(inNS(pods)) == 0 })
}

// clientFor is heartlet's own client of the kubeconfig at path, so that
// the test also runs kubeapi against a real API server.
func clientFor(t *testing.T, path string) kubeapi.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("kubeconfig %s: %v", path, err)
	}
	c, err := kubeapi.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("client for kubeconfig %s: %v", path, err)
	}
	return c
}
