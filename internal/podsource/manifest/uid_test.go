package manifest

import (
	"bufio"
	"bytes"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/heartlet/heartlet/internal/podconfig"
)

// TestUIDMatchesUpstream checks UID, name and config.hash against the ones
// the upstream kubelet's own code gave the same manifests (see the header
// of testdata/upstream-uids.txt for how they were computed).
func TestUIDMatchesUpstream(t *testing.T) {
	f, err := os.Open("testdata/upstream-uids.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 4 {
			t.Fatalf("malformed line %q", line)
		}
		kind, origin, wantUID, wantName := fields[0], fields[1], fields[2], fields[3]
		n++
		t.Run(kind+" "+path.Base(origin)+" "+wantName, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", "upstream", path.Base(origin)))
			if err != nil {
				t.Fatal(err)
			}
			o := Options{NodeName: "node-1", Origin: origin, Source: podconfig.SourceFile}
			if kind == "url" {
				o.Source = podconfig.SourceHTTP
			}
			pods, err := ParseList(data, o)
			if err != nil {
				t.Fatal(err)
			}
			if kind == "file" && len(pods) != 1 {
				t.Fatalf("a file gave %d pods", len(pods))
			}
			var pod *v1.Pod
			for _, p := range pods {
				if p.Name == wantName {
					pod = p
				}
			}
			if pod == nil {
				t.Fatalf("no pod %s", wantName)
			}
			if string(pod.UID) != wantUID || pod.Name != wantName {
				t.Errorf("UID %s name %s, want upstream's %s %s", pod.UID, pod.Name, wantUID, wantName)
			}
			if pod.Annotations[podconfig.AnnotationConfigHash] != wantUID {
				t.Errorf("config.hash %q, want %s", pod.Annotations[podconfig.AnnotationConfigHash], wantUID)
			}
		})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n < 10 {
		t.Fatalf("only %d golden UIDs read", n)
	}
}

// TestHashDumpFormat pins the text written for the hash on small values
// whose go-spew "%#v" form (as k8s.io/utils/dump.ForHash writes it) is
// known, including the internal type names and the nil-element quirk.
func TestHashDumpFormat(t *testing.T) {
	one := int64(1)
	type inner struct {
		P *int64
		S []string
	}
	type withNils struct {
		S []v1.Container
		M v1.ResourceList
	}
	type withNilElem struct {
		L []*int64
		N int
	}
	tests := []struct {
		name string
		v    any
		want string
	}{
		{"core type named core", v1.Protocol("TCP"), "(core.Protocol)TCP"},
		{"pointer", &one, "(*int64)1"},
		{"nil pointer", (*v1.Probe)(nil), "(*core.Probe)<nil>"},
		{"sorted map without element types", map[string]string{"b": "2", "a": "1"}, "(map[string]string)map[a:1 b:2]"},
		{"nil slice and map", withNils{}, "(manifest.withNils){S:([]core.Container)<nil> M:(core.ResourceList)<nil>}"},
		{"slice elements without types, their fields with", []inner{{P: &one, S: []string{"x", ""}}}, "([]manifest.inner)[{P:(*int64)1 S:([]string)[x ]}]"},
		{"nil element leaves the next type out", withNilElem{L: []*int64{&one, nil}, N: 2}, "(manifest.withNilElem){L:([]*int64)[<*>1 <nil>] N:2}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			d := hashDumper{w: &b}
			d.format(reflect.ValueOf(tt.v))
			if b.String() != tt.want {
				t.Errorf("got  %s\nwant %s", b.String(), tt.want)
			}
		})
	}
}
