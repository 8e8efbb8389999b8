package stats

import (
	"errors"
	"io/fs"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/utils/clock"
)

// fsInfo is what statfs tells about the filesystem holding a path.
type fsInfo struct {
	capacity, available, used uint64
	inodes, inodesFree        uint64
	// tmpfs marks a memory-backed filesystem.
	tmpfs bool
}

// statFS is statfs(2) of the filesystem holding p.
func statFS(p string) (fsInfo, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(p, &st); err != nil {
		return fsInfo{}, &fs.PathError{Op: "statfs", Path: p, Err: err}
	}
	bs := uint64(st.Bsize)
	return fsInfo{
		capacity:   st.Blocks * bs,
		available:  st.Bavail * bs,
		used:       sub(st.Blocks, st.Bfree) * bs,
		inodes:     st.Files,
		inodesFree: st.Ffree,
		tmpfs:      st.Type == unix.TMPFS_MAGIC,
	}, nil
}

// dirUsage is the disk usage of a directory tree, as du counts it:
// allocated blocks and inodes, hard links once.
type dirUsage struct {
	bytes, inodes uint64
}

// measureDir walks dir without leaving its filesystem. A missing dir is
// an empty usage; entries that vanish during the walk are skipped.
func measureDir(dir string) (dirUsage, error) {
	var u dirUsage
	var dev uint64
	seen := map[uint64]bool{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		fi, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		if p == dir {
			dev = uint64(st.Dev)
		} else if uint64(st.Dev) != dev {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if st.Nlink > 1 && !d.IsDir() {
			if seen[st.Ino] {
				return nil
			}
			seen[st.Ino] = true
		}
		u.inodes++
		u.bytes += uint64(st.Blocks) * 512
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return dirUsage{}, nil
	}
	return u, err
}

// duCache remembers directory usages for ttl: walking trees is the
// expensive part of the stats, and disk usage changes slowly.
type duCache struct {
	clock clock.PassiveClock
	ttl   time.Duration
	// measure is measureDir; replaced in tests.
	measure func(string) (dirUsage, error)

	mu      sync.Mutex
	entries map[string]duEntry
}

type duEntry struct {
	usage dirUsage
	at    time.Time
	used  bool // asked for since the last sweep
}

func newDUCache(clk clock.PassiveClock, ttl time.Duration) *duCache {
	return &duCache{clock: clk, ttl: ttl, measure: measureDir, entries: map[string]duEntry{}}
}

// get returns the usage of dir and when it was measured.
func (c *duCache) get(dir string) (dirUsage, time.Time, error) {
	now := c.clock.Now()
	c.mu.Lock()
	e, ok := c.entries[dir]
	if ok && now.Sub(e.at) < c.ttl {
		e.used = true
		c.entries[dir] = e
		c.mu.Unlock()
		return e.usage, e.at, nil
	}
	c.mu.Unlock()
	u, err := c.measure(dir)
	if err != nil {
		return dirUsage{}, now, err
	}
	c.mu.Lock()
	c.entries[dir] = duEntry{usage: u, at: now, used: true}
	c.mu.Unlock()
	return u, now, nil
}

// sweep forgets the directories not asked for since the last sweep.
func (c *duCache) sweep() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for dir, e := range c.entries {
		if !e.used {
			delete(c.entries, dir)
			continue
		}
		e.used = false
		c.entries[dir] = e
	}
}
