package agent

import (
	"context"
	"fmt"

	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/heartlet/heartlet/internal/kubeclient"
	"github.com/heartlet/heartlet/internal/podsync"
)

// runtimeClasses gives podsync the API server's RuntimeClasses; nil in
// standalone mode, where podsync refuses pods that name one.
func runtimeClasses(cl *kubeclient.Client) podsync.RuntimeClassGetter {
	if cl == nil {
		return nil
	}
	return runtimeClassGetter{kube: cl.Kube}
}

// runtimeClassGetter reads a RuntimeClass with a GET at each sandbox
// creation: the Node authorizer lets a node read every RuntimeClass.
type runtimeClassGetter struct {
	kube kubeclient.Interface
}

func (g runtimeClassGetter) GetRuntimeClass(ctx context.Context, name string) (*nodev1.RuntimeClass, error) {
	rc, err := g.kube.NodeV1().RuntimeClasses().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get RuntimeClass %s: %w", name, err)
	}
	return rc, nil
}
