package main

import (
	"strings"
	"testing"
)

func TestParseMemoryCgroups(t *testing.T) {
	for _, tc := range []struct {
		name, table string
		want        int
		wantErr     string
	}{
		{name: "hybrid", want: 2331, table: "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpuset\t3\t2\t1\nmemory\t4\t2331\t1\npids\t8\t2\t1\n"},
		{name: "no memory controller", table: "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpu\t1\t2\t1\n", wantErr: "no memory controller"},
		{name: "bad count", table: "memory\t4\tmany\t1\n", wantErr: `memory count "many"`},
		{name: "short row", table: "memory\t4\n", wantErr: "no memory controller"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseMemoryCgroups(strings.NewReader(tc.table))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}
