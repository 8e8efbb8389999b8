// Command staticpoduid prints the static pod UIDs the upstream kubelet
// v1.37.2 gives manifests, by running its own file and URL pod sources
// (k8s.io/kubernetes/pkg/kubelet/config) on them. It generates
// internal/podsource/manifest/testdata/upstream-uids.txt (see the comment
// at its top).
//
// Every FILE is copied into -dir (the UID of a file depends on its path, so
// the path must not depend on where the repository is). For each it prints
// "file PATH UID NAME" from the file source given PATH as a single-file
// staticPodPath, and "url URL UID NAME" from the URL source polling
// -url-base + the base name of FILE, which this program serves itself on
// that host and port. With -dump it prints instead the text upstream hashes
// (k8s.io/utils/dump.ForHash of the decoded internal pod), to compare with
// heartlet's when a UID differs.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	_ "k8s.io/kubernetes/pkg/apis/core/install"
	"k8s.io/kubernetes/pkg/capabilities"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/config"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"
	"k8s.io/utils/dump"
)

func main() {
	node := flag.String("node", "node1", "node name")
	base := flag.String("url-base", "http://127.0.0.1:38123/manifests/", "URL the manifests are served under")
	dir := flag.String("dir", "/tmp/staticpoduid/manifests", "directory the manifests are copied to and read from")
	dumpOnly := flag.Bool("dump", false, "print the text upstream hashes for each FILE instead")
	flag.Parse()
	var err error
	if *dumpOnly {
		err = dumpAll(flag.Args())
	} else {
		err = run(*node, *base, *dir, flag.Args())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func dumpAll(files []string) error {
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		js, err := utilyaml.ToJSON(data)
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		obj, err := runtime.Decode(legacyscheme.Codecs.UniversalDecoder(), js)
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		fmt.Println(dump.ForHash(obj))
	}
	return nil
}

func run(node, base, dir string, files []string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	u, err := url.Parse(base)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", u.Host)
	if err != nil {
		return err
	}
	served := map[string]string{}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, ok := served[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		http.ServeFile(w, r, f)
	})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	// As the kubelet does at start (cmd/kubelet/app/server.go).
	capabilities.Initialize(capabilities.Capabilities{AllowPrivileged: true})

	logger := klog.Background()
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		p := filepath.Join(dir, filepath.Base(f))
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return err
		}
		// A file holds one Pod; a PodList is only served by URL.
		if !strings.Contains(string(data), "kind: PodList") && !strings.Contains(string(data), `"kind": "PodList"`) {
			pods, err := first(kubetypes.FileSource, func(ctx context.Context, c *kubeletconfig.PodConfig) {
				kubeletconfig.NewSourceFile(logger, p, types.NodeName(node), time.Hour, c.Channel(ctx, kubetypes.FileSource))
			})
			if err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
			for _, pod := range pods {
				fmt.Printf("file %s %s %s\n", p, pod.UID, pod.Name)
			}
		}

		target := base + filepath.Base(f)
		tu, _ := url.Parse(target)
		served[tu.Path] = p
		pods, err := first(kubetypes.HTTPSource, func(ctx context.Context, c *kubeletconfig.PodConfig) {
			kubeletconfig.NewSourceURL(logger, target, http.Header{}, types.NodeName(node), time.Hour, c.Channel(ctx, kubetypes.HTTPSource))
		})
		if err != nil {
			return fmt.Errorf("%s: %w", target, err)
		}
		for _, pod := range pods {
			fmt.Printf("url %s %s %s\n", target, pod.UID, pod.Name)
		}
	}
	return nil
}

// first starts one source and returns the pods of its first delivery,
// sorted by name.
func first(source string, start func(context.Context, *kubeletconfig.PodConfig)) ([]*v1.Pod, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c := kubeletconfig.NewPodConfig(record.NewFakeRecorder(100), nil)
	start(ctx, c)
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("no pod from the %s source", source)
		case u := <-c.Updates():
			if len(u.Pods) > 0 {
				sort.Slice(u.Pods, func(i, j int) bool { return u.Pods[i].Name < u.Pods[j].Name })
				return u.Pods, nil
			}
		}
	}
}
