package csi

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// volumeLocks serializes the operations on one volume (by driver and
// handle): a stage and the unstage of a tear-down, or two pods' publishes
// of a shared volume, never interleave, while other volumes go on.
type volumeLocks struct {
	mu sync.Mutex
	m  map[string]*volumeLock
}

type volumeLock struct {
	mu    sync.Mutex
	users int // holders and waiters; the entry goes with the last
}

// lock takes the volume's lock and returns its release.
func (l *volumeLocks) lock(driver, handle string) func() {
	key := driver + "/" + handle
	l.mu.Lock()
	if l.m == nil {
		l.m = map[string]*volumeLock{}
	}
	vl := l.m[key]
	if vl == nil {
		vl = &volumeLock{}
		l.m[key] = vl
	}
	vl.users++
	l.mu.Unlock()
	vl.mu.Lock()
	return func() {
		vl.mu.Unlock()
		l.mu.Lock()
		if vl.users--; vl.users == 0 {
			delete(l.m, key)
		}
		l.mu.Unlock()
	}
}

func (p *Publisher) isPublished(key string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.published[key]
	return ok
}

func (p *Publisher) forgetPublished(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.published, key)
	delete(p.repub, key)
	delete(p.reportedAs, key)
	p.expand.done(key)
}

func (p *Publisher) isStaged(key string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.staged[key]
}

func (p *Publisher) setStaged(key string, staged bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if staged {
		p.staged[key] = true
	} else {
		delete(p.staged, key)
	}
}

// volumeKind is where a volume mode (filesystem or raw block) keeps its
// publications and stagings; one tear-down path serves both.
type volumeKind struct {
	// unpublish unpublishes a pod's volume and removes its record.
	unpublish func(ctx context.Context, uid types.UID, name string, d volData) error
	// staging returns the staging target, whether there is a staging to
	// unstage, and what is removed once the volume is no longer used.
	staging func(name string, d volData) (path string, staged bool, leftovers []string)
	// uses reports whether a pod's directory still records the volume.
	uses func(uid types.UID, name string, d volData) (bool, error)
}

// tearDownVolume unpublishes one volume of a pod, then unstages it when no
// pod's directory records it any more, under the volume's lock.
func (p *Publisher) tearDownVolume(ctx context.Context, k volumeKind, uid types.UID, name string, d volData) error {
	handle := d.VolumeHandle
	if handle == "" {
		handle = "unrecorded:" + name // a raw block link without a record
	}
	defer p.locks.lock(d.DriverName, handle)()
	if err := k.unpublish(ctx, uid, name, d); err != nil {
		return err
	}
	return p.unstageIfUnused(ctx, k, name, d)
}

// unstageIfUnused unstages a volume that no pod's directory records and
// removes what its staging left. The volume's lock is held.
func (p *Publisher) unstageIfUnused(ctx context.Context, k volumeKind, name string, d volData) error {
	staging, staged, leftovers := k.staging(name, d)
	if !staged && len(leftovers) == 0 {
		return nil
	}
	used, err := p.anyPod(func(uid types.UID) (bool, error) { return k.uses(uid, name, d) })
	if err != nil || used {
		return err
	}
	if staged && d.VolumeHandle != "" {
		drv, err := p.opts.Drivers.get(d.DriverName)
		if err != nil {
			return fmt.Errorf("unstage volume %q: %w", name, err)
		}
		if drv.stage {
			if _, err := drv.client.NodeUnstageVolume(ctx, &csipb.NodeUnstageVolumeRequest{VolumeId: d.VolumeHandle, StagingTargetPath: staging}); err != nil {
				return fmt.Errorf("NodeUnstageVolume of volume %q (driver %s): %w", name, d.DriverName, err)
			}
			klog.FromContext(ctx).V(2).Info("CSI volume unstaged", "volume", name, "volumeHandle", d.VolumeHandle, "driver", d.DriverName)
		}
	}
	for _, path := range leftovers {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", path, err)
		}
	}
	p.setStaged(d.DriverName+"/"+d.VolumeHandle, false)
	return nil
}

// anyPod reports whether uses is true for any pod directory.
func (p *Publisher) anyPod(uses func(types.UID) (bool, error)) (bool, error) {
	entries, err := os.ReadDir(filepath.Join(p.opts.RootDir, "pods"))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("list pod directories: %w", err)
	}
	for _, e := range entries {
		used, err := uses(types.UID(e.Name()))
		if err != nil || used {
			return used, err
		}
	}
	return false, nil
}
