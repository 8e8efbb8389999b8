package cgroups

import (
	"errors"
	"io/fs"
	"strings"
	"testing"
)

func TestCheckSwap(t *testing.T) {
	const header = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"
	on := header + "/dev/vda2                               partition\t2097148\t\t0\t\t-2\n/swapfile                               file\t\t1048572\t\t0\t\t-3\n"
	read := func(s string, err error) func() ([]byte, error) {
		return func() ([]byte, error) { return []byte(s), err }
	}
	for _, tc := range []struct {
		name       string
		failSwapOn bool
		read       func() ([]byte, error)
		wantErr    string // "" for none
		swapOn     bool
	}{
		{name: "swap off", failSwapOn: true, read: read(header, nil)},
		{name: "empty file", failSwapOn: true, read: read("", nil)},
		{name: "swap on", failSwapOn: true, read: read(on, nil), swapOn: true,
			wantErr: "swap is on (/dev/vda2, /swapfile): turn it off (swapoff -a) or set failSwapOn: false (--fail-swap-on=false)"},
		{name: "swap on allowed", failSwapOn: false, read: read(on, nil)},
		{name: "no /proc/swaps means no swap", failSwapOn: true, read: read("", fs.ErrNotExist)},
		{name: "unreadable", failSwapOn: true, read: read("", fs.ErrPermission), wantErr: "reading the active swap areas"},
		{name: "not read when allowed", failSwapOn: false, read: func() ([]byte, error) { t.Error("read"); return nil, nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckSwap(tc.failSwapOn, tc.read)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("CheckSwap = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("CheckSwap = %v, want %q", err, tc.wantErr)
			}
			if errors.Is(err, ErrSwapOn) != tc.swapOn {
				t.Errorf("errors.Is(err, ErrSwapOn) = %v, want %v", !tc.swapOn, tc.swapOn)
			}
		})
	}
}
