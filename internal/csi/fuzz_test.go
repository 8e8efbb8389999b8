package csi

import (
	"path/filepath"
	"strings"
	"testing"
)

func FuzzParseVolData(f *testing.F) {
	f.Add([]byte(`{"specVolID":"pv-1","volumeHandle":"vol-1","driverName":"hostpath.csi.k8s.io","nodeName":"n","volumeLifecycleMode":"Persistent"}`))
	f.Add([]byte(`{"volumeHandle":"h","driverName":"../../etc"}`))
	f.Add([]byte(`{"volumeHandle":"","driverName":"d"}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := parseVolData(b)
		if err != nil {
			return
		}
		if d.VolumeHandle == "" {
			t.Fatalf("accepted %q without a volume handle", b)
		}
		// The driver name is a directory below the CSI plugin directory.
		p := &Publisher{opts: PublisherOptions{RootDir: "/root"}}
		base := filepath.Join("/root", "plugins", "kubernetes.io", "csi")
		if dir := p.StagingDir(d.DriverName, d.VolumeHandle); filepath.Dir(filepath.Dir(dir)) != base || strings.Contains(d.DriverName, "/") {
			t.Fatalf("driver name %q of %q leads to %s", d.DriverName, b, dir)
		}
	})
}

func FuzzValidDriverName(f *testing.F) {
	for _, s := range []string{"csi.heartlet.test", "a", "..", "a/b", "-a", "a.", strings.Repeat("a", 64)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if ValidDriverName(s) != nil {
			return
		}
		if len(s) > 63 || strings.ContainsAny(s, "/\x00") || s == "." || s == ".." || filepath.Base(s) != s {
			t.Fatalf("accepted %q", s)
		}
	})
}
