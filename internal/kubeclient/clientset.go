package kubeclient

import (
	"k8s.io/client-go/rest"

	"github.com/heartlet/heartlet/internal/kubeapi"
)

// Interface is the part of the Kubernetes API heartlet calls.
type Interface = kubeapi.Interface

// NewForConfig builds an Interface over REST for c.
func NewForConfig(c *rest.Config) (Interface, error) { return kubeapi.NewForConfig(c) }
