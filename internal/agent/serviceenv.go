package agent

import (
	"github.com/heartlet/heartlet/internal/kubeclient"
	"github.com/heartlet/heartlet/internal/podsync"
	"github.com/heartlet/heartlet/internal/serviceenv"
)

// buildServiceEnv builds the Service environment variables' source in
// cluster mode (run starts its informer); standalone pods get none.
func buildServiceEnv(c *components, cl *kubeclient.Client) podsync.ServiceEnv {
	if cl == nil {
		return nil
	}
	c.serviceEnv = serviceenv.New(cl.Kube, cl.Reach.Waiter())
	return c.serviceEnv
}
