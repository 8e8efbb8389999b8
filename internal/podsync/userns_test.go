package podsync

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/heartlet/heartlet/internal/podworker"
)

// fixedUserNamespaces gives every pod the same mapping and supports the
// handlers named.
type fixedUserNamespaces struct{ handlers map[string]bool }

var testMapping = []*runtimeapi.IDMapping{{HostId: 1 << 20, ContainerId: 0, Length: 1 << 16}}

func (fixedUserNamespaces) Mapping(*v1.Pod) (*runtimeapi.UserNamespace, error) {
	return &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD, Uids: testMapping, Gids: testMapping}, nil
}

func (f fixedUserNamespaces) HandlerSupports(h string) bool { return f.handlers[h] }

// A pod with hostUsers: false gets its user namespace in the sandbox and
// every container; a handler that does not support user namespaces, or a
// node that sets none up, leaves it without a sandbox (upstream's message
// in a FailedCreatePodSandBox event), never in the node's user namespace.
// Pods that do not ask keep the runtime's default.
func TestSyncPodUserNamespace(t *testing.T) {
	for _, tc := range []struct {
		name      string
		hostUsers *bool
		uns       UserNamespaces
		wantUsers bool
		wantErr   string
	}{
		{name: "hostUsers unset", uns: fixedUserNamespaces{handlers: map[string]bool{"": true}}},
		{name: "hostUsers true", hostUsers: ptr.To(true), uns: fixedUserNamespaces{handlers: map[string]bool{"": true}}},
		{name: "own user namespace", hostUsers: ptr.To(false), uns: fixedUserNamespaces{handlers: map[string]bool{"": true}}, wantUsers: true},
		{name: "handler without support", hostUsers: ptr.To(false), uns: fixedUserNamespaces{}, wantErr: `RuntimeClass handler "" does not support user namespaces`},
		{name: "no user namespaces on the node", hostUsers: ptr.To(false), wantErr: "hostUsers: false needs user namespaces"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			rec := &recorder{}
			h.syncer.opts.Recorder = rec
			h.syncer.opts.UserNamespaces = tc.uns
			pod := testPod(v1.RestartPolicyAlways, nil, "app")
			pod.Spec.HostUsers = tc.hostUsers
			_, err := h.syncer.SyncPod(h.ctx, podworker.UpdateSync, pod)
			sbs := h.fake.Sandboxes()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("SyncPod = %v, want an error containing %q", err, tc.wantErr)
				}
				if len(sbs) != 0 {
					t.Fatalf("sandboxes %+v, want none", sbs)
				}
				var found bool
				for _, e := range rec.events {
					found = found || (e.reason == "FailedCreatePodSandBox" && strings.Contains(e.message, tc.wantErr))
				}
				if !found {
					t.Errorf("events %+v, want FailedCreatePodSandBox with %q", rec.events, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("SyncPod: %v", err)
			}
			if len(sbs) != 1 {
				t.Fatalf("sandboxes %+v, want one", sbs)
			}
			got := []*runtimeapi.UserNamespace{sbs[0].Config.GetLinux().GetSecurityContext().GetNamespaceOptions().GetUsernsOptions()}
			cs := h.fake.Containers()
			if len(cs) != 1 {
				t.Fatalf("containers %+v, want one", cs)
			}
			got = append(got, cs[0].Config.GetLinux().GetSecurityContext().GetNamespaceOptions().GetUsernsOptions())
			for i, u := range got {
				switch {
				case !tc.wantUsers && u != nil:
					t.Errorf("config %d: user namespace %v, want the runtime's default", i, u)
				case tc.wantUsers && (u.GetMode() != runtimeapi.NamespaceMode_POD || len(u.GetUids()) != 1 || u.GetUids()[0].GetHostId() != 1<<20 || len(u.GetGids()) != 1):
					t.Errorf("config %d: user namespace %v, want POD mode with the pod's mapping", i, u)
				}
			}
		})
	}
}
