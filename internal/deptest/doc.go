// Package deptest guards the shape of heartlet's import graph. Its test
// reads the graph with `go list` and fails on every arrow that runs the
// wrong way, naming the arrow:
//
//   - nothing but a command (cmd/...) imports internal/agent, which only
//     wires;
//   - internal/server, which depends on function types only, does not
//     reach internal/podsync;
//   - a domain package does not import internal/kubeclient: the API server
//     is reached through interfaces the domain declares, and only the
//     agent and the commands hold a client (exceptions are listed with
//     their reason in the test);
//   - heartlet's binary does not link client-go's clientset, its typed
//     clients, informers or anything else that registers every API group
//     in one scheme: internal/kubeapi holds the groups heartlet calls.
package deptest
