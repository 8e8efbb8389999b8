package procmem

import (
	"strings"
	"testing"
)

func TestBinaryMappings(t *testing.T) {
	const exe = "/usr/bin/heart let"
	maps := strings.Join([]string{
		"00400000-0135a000 r-xp 00000000 fe:01 1234 /usr/bin/heart let",
		"0135a000-024b0000 r--p 00f5a000 fe:01 1234 /usr/bin/heart let",
		"024b0000-0254c000 rw-p 020b0000 fe:01 1234 /usr/bin/heart let",
		"0254c000-0259c000 rw-p 00000000 00:00 0 ",
		"c000000000-c004000000 rw-p 00000000 00:00 0",
		"7f0000000000-7f0000001000 r--p 00000000 fe:01 99 /usr/bin/heart let.old",
		"7f0000001000-7f0000002000 r-xp 00000000 fe:01 98 /usr/lib/libc.so.6",
		"7f0000002000-7f0000003000 ---p 00000000 fe:01 1234 /usr/bin/heart let",
		"7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]",
		"7ffd00100000-7ffd00102000 r-xp 00000000 00:00 0 [vdso]",
	}, "\n")
	for _, tc := range []struct {
		name, maps, exe string
		want            []Mapping
		err             string
	}{
		{name: "code and read-only data of the binary only", maps: maps, exe: exe,
			want: []Mapping{{0x400000, 0x135a000}, {0x135a000, 0x24b0000}}},
		{name: "a binary replaced on disk", exe: "/bin/h",
			maps: "1000-3000 r-xp 00000000 fe:01 7 /bin/h (deleted)\n3000-4000 r--p 00002000 fe:01 7 /bin/h (deleted)",
			want: []Mapping{{0x1000, 0x3000}, {0x3000, 0x4000}}},
		{name: "another binary", maps: maps, exe: "/bin/other"},
		{name: "empty", maps: "", exe: exe},
		{name: "too few fields", maps: "1000-2000 r-xp 0 fe:01", exe: exe, err: "line 1"},
		{name: "no range", maps: "1000 r-xp 0 fe:01 7 /bin/h", exe: exe, err: "without '-'"},
		{name: "bad start", maps: maps + "\nzz-2000 r-xp 0 fe:01 7 /bin/h", exe: exe, err: "line 11: start address"},
		{name: "bad end", maps: "1000-zz r-xp 0 fe:01 7 /bin/h", exe: exe, err: "end address"},
		{name: "range backwards", maps: "2000-1000 r-xp 0 fe:01 7 /bin/h", exe: exe, err: "ends before it starts"},
		{name: "bad permissions", maps: "1000-2000 rx 0 fe:01 7 /bin/h", exe: exe, err: "not 4 characters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := binaryMappings(strings.NewReader(tc.maps), tc.exe)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("mapping %d: got %#x-%#x, want %#x-%#x", i, got[i].Start, got[i].End, tc.want[i].Start, tc.want[i].End)
				}
			}
		})
	}
}

func TestRSSFile(t *testing.T) {
	for _, tc := range []struct {
		name, status string
		want         int64
		err          bool
	}{
		{name: "present", status: "Name:\theartlet\nRssAnon:\t    9764 kB\nRssFile:\t   28900 kB\nRssShmem:\t       0 kB\n", want: 28900 * 1024},
		{name: "missing", status: "Name:\theartlet\n", err: true},
		{name: "not a number", status: "RssFile:\t  many kB\n", err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := rssFile(strings.NewReader(tc.status))
			if (err != nil) != tc.err {
				t.Fatalf("error %v, want error %v", err, tc.err)
			}
			if got != tc.want {
				t.Errorf("got %d, want %d", got, tc.want)
			}
		})
	}
}

func FuzzBinaryMappings(f *testing.F) {
	f.Add("00400000-0135a000 r-xp 00000000 fe:01 1234 /bin/h\n0135a000-024b0000 r--p 00f5a000 fe:01 1234 /bin/h (deleted)\n")
	f.Add("2000-1000 r-xp 0 fe:01 7 /bin/h")
	f.Add("")
	f.Fuzz(func(t *testing.T, maps string) {
		ms, err := binaryMappings(strings.NewReader(maps), "/bin/h")
		if err != nil {
			return
		}
		for _, m := range ms {
			if m.End < m.Start {
				t.Fatalf("mapping %#x-%#x ends before it starts", m.Start, m.End)
			}
		}
	})
}
