package agent

import (
	"errors"
	"syscall"
	"testing"
)

func TestDiskCheck(t *testing.T) {
	tests := []struct {
		name    string
		stats   map[string]syscall.Statfs_t
		wantErr string
	}{
		{name: "space left", stats: map[string]syscall.Statfs_t{
			"/root": {Bsize: 4096, Bfree: 1000, Files: 100, Ffree: 10},
			"/logs": {Bsize: 4096, Bfree: 256, Files: 100, Ffree: 10},
		}},
		{name: "root dir full", stats: map[string]syscall.Statfs_t{
			"/root": {Bsize: 4096, Bfree: 0, Files: 100, Ffree: 10},
			"/logs": {Bsize: 4096, Bfree: 1000, Files: 100, Ffree: 10},
		}, wantErr: "no space left on device: the filesystem of /root (root-dir) has 0 free"},
		{name: "logs dir below a MiB", stats: map[string]syscall.Statfs_t{
			"/root": {Bsize: 4096, Bfree: 1000, Files: 100, Ffree: 10},
			"/logs": {Bsize: 4096, Bfree: 255, Files: 100, Ffree: 10},
		}, wantErr: "no space left on device: the filesystem of /logs (podLogsDir) has 1020Ki free"},
		{name: "no inode left", stats: map[string]syscall.Statfs_t{
			"/root": {Bsize: 4096, Bfree: 1000, Files: 100, Ffree: 0},
			"/logs": {Bsize: 4096, Bfree: 1000, Files: 100, Ffree: 10},
		}, wantErr: "no space left on device: the filesystem of /root (root-dir) has no inode free"},
		{name: "no inode accounting (Files 0)", stats: map[string]syscall.Statfs_t{
			"/root": {Bsize: 4096, Bfree: 1000},
			"/logs": {Bsize: 4096, Bfree: 1000},
		}},
		{name: "unreadable directory is skipped", stats: map[string]syscall.Statfs_t{
			"/logs": {Bsize: 4096, Bfree: 1000, Files: 100, Ffree: 10},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			statfs := func(path string, st *syscall.Statfs_t) error {
				s, ok := tt.stats[path]
				if !ok {
					return syscall.ENOENT
				}
				*st = s
				return nil
			}
			err := diskCheck(statfs, diskDir{"/root", "root-dir"}, diskDir{"/logs", "podLogsDir"}, diskDir{"", "unset"})()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("check = %v, want nil", err)
				}
				return
			}
			if err == nil || err.Error() != tt.wantErr || !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("check = %v, want %q wrapping ENOSPC", err, tt.wantErr)
			}
		})
	}
}
