//go:build e2e

package e2e

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// The UIDs the upstream kubelet v1.37.2 gives the manifests of
// testdata/staticpods on node heartlet-e2e at these fixed locations,
// computed by its own file and URL sources with hack/tools/kube/staticpoduid:
//
//	/tmp/spuid -node heartlet-e2e -dir /run/heartlet-e2e-staticpods \
//	    -url-base http://127.0.0.1:38124/static/ test/e2e/testdata/staticpods/*.yaml
const (
	staticFileDir    = "/run/heartlet-e2e-staticpods"
	staticURLAddr    = "127.0.0.1:38124"
	staticURL        = "http://" + staticURLAddr + "/static/url.yaml"
	upstreamFileUID  = "45ddf7201868dad6455656875d874bfd" // single.yaml as a file
	upstreamURLUID   = "e32244a3bb58329d8c1f172b7fe5186d" // the pod of url.yaml
	staticURLHeader  = "X-Heartlet-E2E"
	staticURLHeaderV = "static-pods"
)

// A single-file staticPodPath and a staticPodURL serving a PodList (with
// staticPodURLHeader) both run their pods with the UIDs the upstream
// kubelet gives them, with mirror pods; the manifest's unknown field is a
// warning in the log, not a rejection.
func TestClusterStaticPodSources(t *testing.T) {
	requireCluster(t)
	single, err := os.ReadFile(filepath.Join("testdata", "staticpods", "single.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	list, err := os.ReadFile(filepath.Join("testdata", "staticpods", "url.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(staticFileDir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(staticFileDir) })
	file := filepath.Join(staticFileDir, "single.yaml")
	if err := os.WriteFile(file, single, 0o644); err != nil {
		t.Fatal(err)
	}
	// Another manifest next to the file is not a pod of this source.
	if err := os.WriteFile(filepath.Join(staticFileDir, "other.yaml"), []byte(manifest(t, "sp-other", func(p *v1.Pod) {
		p.Spec.Containers = []v1.Container{shContainer("main", sleeper)}
	})), 0o644); err != nil {
		t.Fatal(err)
	}

	var body atomic.Value
	body.Store(list)
	var badHeader atomic.Int32
	ln, err := net.Listen("tcp", staticURLAddr)
	if err != nil {
		t.Fatalf("listen on %s for the static pod URL: %v", staticURLAddr, err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/static/url.yaml" {
			http.NotFound(w, r)
			return
		}
		if r.Header.Get(staticURLHeader) != staticURLHeaderV {
			badHeader.Add(1)
			http.Error(w, "missing header", http.StatusForbidden)
			return
		}
		_, _ = w.Write(body.Load().([]byte))
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	h := newClusterHeartlet(t, clusterOptions{})
	fileMirror, urlMirror := "sp-single-"+clusterNode, "sp-url-"+clusterNode
	// Runs after heartlet has stopped (cleanups run last first).
	t.Cleanup(func() {
		deletePodAndWait(t, fileMirror)
		deletePodAndWait(t, urlMirror)
		deletePodAndWait(t, "sp-other-"+clusterNode)
	})
	t.Cleanup(h.cleanup)
	args := append(clusterArgs(h, nodeKubeconfig),
		"--pod-manifest-path", file,
		"--manifest-url", staticURL,
		"--manifest-url-header", staticURLHeader+":"+staticURLHeaderV,
		"--http-check-frequency", "2s")
	h.run("cluster mode", args...)
	waitNodeSchedulable(t, h)
	// While heartlet runs: the sources empty, so the pods stop and are
	// removed, and their mirror pods go.
	t.Cleanup(func() {
		_ = os.Remove(file)
		body.Store([]byte{})
		c := newCRI(t)
		for _, name := range []string{fileMirror, urlMirror} {
			waitFor(t, podRemoveTimeout, "pod "+name+" to be removed with its mirror pod", func() (bool, string) {
				p, err := getAPIPod(name)
				if err != nil {
					return false, err.Error()
				}
				n, err := c.countPodObjects(name)
				if err != nil {
					return false, err.Error()
				}
				return p == nil && n == 0, fmt.Sprintf("mirror pod present %v, %d sandboxes and containers", p != nil, n)
			})
		}
	})

	for _, tc := range []struct {
		mirror, source, uid string
	}{
		{fileMirror, "file", upstreamFileUID},
		{urlMirror, "http", upstreamURLUID},
	} {
		t.Run(tc.source, func(t *testing.T) {
			m := waitAPIPod(t, h, tc.mirror, podStartTimeout, "to be a Running mirror pod", func(p *v1.Pod) bool {
				return p.Annotations[mirrorAnnotation] != "" && podRunningReady(p)
			})
			want := tc.uid
			if clusterNode != "heartlet-e2e" {
				t.Logf("node %s is not heartlet-e2e: the upstream UID is not known, checking consistency only", clusterNode)
				want = m.Annotations["kubernetes.io/config.hash"]
			}
			for _, k := range []string{mirrorAnnotation, "kubernetes.io/config.hash"} {
				if got := m.Annotations[k]; got != want {
					t.Errorf("mirror annotation %s = %q, want upstream's UID %s", k, got, want)
				}
			}
			if got := m.Annotations["kubernetes.io/config.source"]; got != tc.source {
				t.Errorf("config.source = %q, want %s", got, tc.source)
			}
			if m.Annotations["kubernetes.io/config.seen"] == "" {
				t.Error("config.seen is missing")
			}
			// The running pod's own UID, as the runtime labels it.
			sbs, err := newCRI(t).sandboxes(map[string]string{labelPodName: tc.mirror, labelPodNamespace: "default"})
			if err != nil {
				t.Fatal(err)
			}
			var uids []string
			for _, sb := range sbs {
				uids = append(uids, sb.GetMetadata().GetUid())
			}
			if len(uids) != 1 || uids[0] != want {
				t.Errorf("sandboxes of %s carry pod UIDs %v, want [%s]", tc.mirror, uids, want)
			}
		})
	}
	if p, err := getAPIPod("sp-other-" + clusterNode); err != nil || p != nil {
		t.Errorf("a manifest next to the single staticPodPath file became a pod (%v, err %v)", p != nil, err)
	}
	if !h.logContains("imagePullPolcy: unknown field, ignored") {
		t.Error("the log has no warning about the unknown field imagePullPolcy")
	}
	if n := badHeader.Load(); n != 0 {
		t.Errorf("%d requests to the static pod URL came without %s", n, staticURLHeader)
	}
}
