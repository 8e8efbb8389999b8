package main

import (
	"fmt"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// mountedVolumeAt is volumeAt for NodeGetVolumeStats: the path must also
// still be a mount of the volume, else the volume is not accessible there
// and the answer is NotFound, as the CSI spec says. A filesystem volume's
// mount is a bind mount of its directory, so the path's device and inode
// are the directory's; a block volume's is a bind mount of its loop
// device, checked only for being a mount.
func (d *driver) mountedVolumeAt(id, path string) (*volume, error) {
	v, err := d.volumeAt(id, path)
	if err != nil {
		return nil, err
	}
	ok, err := mounted(path)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if !ok {
		return nil, status.Errorf(codes.NotFound, "volume %s is not mounted at %s", id, path)
	}
	if v.Block {
		return v, nil
	}
	same, err := sameFile(path, d.dirs.volumeDir(v.ID))
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if !same {
		return nil, status.Errorf(codes.NotFound, "the mount at %s is not volume %s", path, id)
	}
	return v, nil
}

// sameFile tells whether a and b are the same file (device and inode).
func sameFile(a, b string) (bool, error) {
	var sa, sb unix.Stat_t
	if err := unix.Stat(a, &sa); err != nil {
		return false, fmt.Errorf("stat %s: %w", a, err)
	}
	if err := unix.Stat(b, &sb); err != nil {
		return false, fmt.Errorf("stat %s: %w", b, err)
	}
	return sa.Dev == sb.Dev && sa.Ino == sb.Ino, nil
}
