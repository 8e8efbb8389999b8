package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Volume context keys of ephemeral inline volumes.
const (
	// ephemeralKey marks an ephemeral inline volume (set by the kubelet).
	ephemeralKey = "csi.storage.k8s.io/ephemeral"
	// sizeKey is the size of an ephemeral volume (a quantity, "64Mi").
	sizeKey = "size"
	// podInfoPrefix starts the keys the kubelet adds for podInfoOnMount and
	// tokenRequests.
	podInfoPrefix = "csi.storage.k8s.io/"
)

func (d *driver) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{
		NodeId:             d.cfg.NodeID,
		MaxVolumesPerNode:  d.cfg.MaxVolumes,
		AccessibleTopology: d.topology(),
	}, nil
}

func (d *driver) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	types := []csi.NodeServiceCapability_RPC_Type{
		csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME,
		csi.NodeServiceCapability_RPC_GET_VOLUME_STATS,
		csi.NodeServiceCapability_RPC_EXPAND_VOLUME,
	}
	if d.cfg.VolumeMountGroup {
		types = append(types, csi.NodeServiceCapability_RPC_VOLUME_MOUNT_GROUP)
	}
	var caps []*csi.NodeServiceCapability
	for _, t := range types {
		caps = append(caps, &csi.NodeServiceCapability{Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: t}}})
	}
	return &csi.NodeGetCapabilitiesResponse{Capabilities: caps}, nil
}

// checkAttached enforces --require-attach: the volume must be
// ControllerPublished to this node and the CO must pass on the publish
// context the controller returned.
func (d *driver) checkAttached(v *volume, publishContext map[string]string) error {
	if !d.cfg.RequireAttach || v.Ephemeral {
		return nil
	}
	if _, ok := v.Published[d.cfg.NodeID]; !ok {
		return status.Errorf(codes.FailedPrecondition, "volume %s is not ControllerPublished to node %s", v.ID, d.cfg.NodeID)
	}
	if publishContext[PublishContextKey] != d.cfg.NodeID {
		return status.Errorf(codes.FailedPrecondition, "volume %s: the publish context lacks %s=%s", v.ID, PublishContextKey, d.cfg.NodeID)
	}
	return nil
}

// stagedLoop returns the loop device of a staged block volume, attaching
// the file again when the device is gone (the host rebooted) or reused.
func (d *driver) stagedLoop(ctx context.Context, v *volume, stagingPath string) (string, error) {
	file := d.dirs.blockFile(v.ID)
	dev := v.Staged[stagingPath]
	if dev != "" && loopBacking(dev) == file {
		return dev, nil
	}
	dev, err := attachLoop(ctx, file, false)
	if err != nil {
		return "", status.Error(codes.Internal, err.Error())
	}
	v.Staged[stagingPath] = dev
	return dev, nil
}

func (d *driver) NodeStageVolume(ctx context.Context, req *csi.NodeStageVolumeRequest) (resp *csi.NodeStageVolumeResponse, err error) {
	rec := callRecord{Method: "NodeStageVolume", VolumeID: req.GetVolumeId(), StagingTargetPath: req.GetStagingTargetPath(),
		VolumeContext: req.GetVolumeContext(), PublishContext: req.GetPublishContext(), Secrets: secretKeys(req.GetSecrets())}
	describeCapability(&rec, req.GetVolumeCapability())
	defer func() { d.record(rec, err) }()
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID missing")
	}
	if req.GetStagingTargetPath() == "" {
		return nil, status.Error(codes.InvalidArgument, "staging target path missing")
	}
	block, err := d.checkCapability(req.GetVolumeCapability())
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	v, ok := d.state.Volumes[req.GetVolumeId()]
	if !ok {
		return nil, notFound(req.GetVolumeId())
	}
	if block != v.Block {
		return nil, status.Errorf(codes.InvalidArgument, "volume %s has another access type", v.ID)
	}
	if err := d.checkAttached(v, req.GetPublishContext()); err != nil {
		return nil, err
	}
	path := req.GetStagingTargetPath()
	if v.Staged == nil {
		v.Staged = map[string]string{}
	}
	if block {
		if _, err := d.stagedLoop(ctx, v, path); err != nil {
			return nil, err
		}
	} else if _, staged := v.Staged[path]; !staged {
		m := req.GetVolumeCapability().GetMount()
		flags, _ := parseMountFlags(m.GetMountFlags()) // checked by checkCapability
		if g := m.GetVolumeMountGroup(); g != "" {
			if err := chownGroup(d.dirs.volumeDir(v.ID), g); err != nil {
				return nil, status.Error(codes.InvalidArgument, err.Error())
			}
		}
		if err := os.MkdirAll(path, 0o750); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		if err := bindMount(d.dirs.volumeDir(v.ID), path, flags); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		v.Staged[path] = ""
	}
	if err := d.state.save(); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.NodeStageVolumeResponse{}, nil
}

func (d *driver) NodeUnstageVolume(ctx context.Context, req *csi.NodeUnstageVolumeRequest) (resp *csi.NodeUnstageVolumeResponse, err error) {
	rec := callRecord{Method: "NodeUnstageVolume", VolumeID: req.GetVolumeId(), StagingTargetPath: req.GetStagingTargetPath()}
	defer func() { d.record(rec, err) }()
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID missing")
	}
	if req.GetStagingTargetPath() == "" {
		return nil, status.Error(codes.InvalidArgument, "staging target path missing")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	path := req.GetStagingTargetPath()
	v, ok := d.state.Volumes[req.GetVolumeId()]
	if !ok {
		if err := goneUnlessMounted(req.GetVolumeId(), path); err != nil {
			return nil, err
		}
		return &csi.NodeUnstageVolumeResponse{}, nil
	}
	for t, pub := range v.Targets {
		if pub.StagingPath == path {
			return nil, status.Errorf(codes.FailedPrecondition, "volume %s is still published at %s", v.ID, t)
		}
	}
	dev, staged := v.Staged[path]
	if !staged {
		return &csi.NodeUnstageVolumeResponse{}, nil
	}
	if err := unmountAll(path); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if err := detachLoop(ctx, dev, d.dirs.blockFile(v.ID)); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	delete(v.Staged, path)
	if err := d.state.save(); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.NodeUnstageVolumeResponse{}, nil
}

// ephemeralVolume returns the inline volume of a NodePublishVolume with
// the ephemeral context, creating it on the first publication.
func (d *driver) ephemeralVolume(req *csi.NodePublishVolumeRequest) (*volume, error) {
	if req.GetStagingTargetPath() != "" {
		return nil, status.Error(codes.InvalidArgument, "an ephemeral volume is never staged")
	}
	if req.GetVolumeCapability().GetBlock() != nil {
		return nil, status.Error(codes.InvalidArgument, "ephemeral volumes are filesystem volumes")
	}
	size := int64(defaultCapacity)
	for k, val := range req.GetVolumeContext() {
		switch {
		case k == sizeKey:
			q, err := resource.ParseQuantity(val)
			if err != nil || q.Value() <= 0 {
				return nil, status.Errorf(codes.InvalidArgument, "volume attribute %s=%q is not a positive quantity", k, val)
			}
			size = q.Value()
		case strings.HasPrefix(k, podInfoPrefix):
		default:
			return nil, status.Errorf(codes.InvalidArgument, "volume attribute %q is not supported (only %q)", k, sizeKey)
		}
	}
	if v, ok := d.state.Volumes[req.GetVolumeId()]; ok {
		if !v.Ephemeral {
			return nil, status.Errorf(codes.AlreadyExists, "volume %s exists and is not ephemeral", v.ID)
		}
		return v, nil
	}
	if size > d.cfg.MaxVolumeSize {
		return nil, status.Errorf(codes.OutOfRange, "%d bytes exceed the largest volume of %d bytes", size, d.cfg.MaxVolumeSize)
	}
	v := &volume{ID: req.GetVolumeId(), Name: req.GetVolumeId(), Capacity: size, Ephemeral: true}
	if err := d.createBacking(v); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	d.state.Volumes[v.ID] = v
	return v, nil
}

func (d *driver) NodePublishVolume(ctx context.Context, req *csi.NodePublishVolumeRequest) (resp *csi.NodePublishVolumeResponse, err error) {
	rec := callRecord{Method: "NodePublishVolume", VolumeID: req.GetVolumeId(), StagingTargetPath: req.GetStagingTargetPath(),
		TargetPath: req.GetTargetPath(), ReadOnly: req.GetReadonly(), VolumeContext: req.GetVolumeContext(),
		PublishContext: req.GetPublishContext(), Secrets: secretKeys(req.GetSecrets())}
	describeCapability(&rec, req.GetVolumeCapability())
	defer func() { d.record(rec, err) }()
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID missing")
	}
	if req.GetTargetPath() == "" {
		return nil, status.Error(codes.InvalidArgument, "target path missing")
	}
	block, err := d.checkCapability(req.GetVolumeCapability())
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var v *volume
	if req.GetVolumeContext()[ephemeralKey] == "true" {
		if v, err = d.ephemeralVolume(req); err != nil {
			return nil, err
		}
	} else {
		var ok bool
		if v, ok = d.state.Volumes[req.GetVolumeId()]; !ok {
			return nil, notFound(req.GetVolumeId())
		}
		if block != v.Block {
			return nil, status.Errorf(codes.InvalidArgument, "volume %s has another access type", v.ID)
		}
		if err := d.checkAttached(v, req.GetPublishContext()); err != nil {
			return nil, err
		}
		if req.GetStagingTargetPath() == "" {
			return nil, status.Errorf(codes.FailedPrecondition, "volume %s: staging target path missing (the driver stages volumes)", v.ID)
		}
		if _, staged := v.Staged[req.GetStagingTargetPath()]; !staged {
			return nil, status.Errorf(codes.FailedPrecondition, "volume %s is not staged at %s", v.ID, req.GetStagingTargetPath())
		}
	}
	path := req.GetTargetPath()
	m := req.GetVolumeCapability().GetMount()
	want := target{ReadOnly: req.GetReadonly(), StagingPath: req.GetStagingTargetPath(), MountFlags: m.GetMountFlags(), Group: m.GetVolumeMountGroup()}
	if have, ok := v.Targets[path]; ok {
		if have.ReadOnly != want.ReadOnly || have.StagingPath != want.StagingPath || have.Group != want.Group ||
			strings.Join(have.MountFlags, ",") != strings.Join(want.MountFlags, ",") {
			return nil, status.Errorf(codes.AlreadyExists, "volume %s is published at %s with other arguments", v.ID, path)
		}
		return &csi.NodePublishVolumeResponse{}, nil
	}
	flags, _ := parseMountFlags(m.GetMountFlags()) // checked by checkCapability
	if want.ReadOnly {
		flags |= unix.MS_RDONLY
	}
	if block {
		src, err := d.stagedLoop(ctx, v, want.StagingPath)
		if err != nil {
			return nil, err
		}
		if want.ReadOnly {
			if src, err = attachLoop(ctx, d.dirs.blockFile(v.ID), true); err != nil {
				return nil, status.Error(codes.Internal, err.Error())
			}
			want.Loop = src
		}
		if err := makeFile(path); err != nil {
			_ = detachLoop(ctx, want.Loop, d.dirs.blockFile(v.ID))
			return nil, status.Error(codes.Internal, err.Error())
		}
		if err := bindMount(src, path, flags); err != nil {
			_ = detachLoop(ctx, want.Loop, d.dirs.blockFile(v.ID))
			return nil, status.Error(codes.Internal, err.Error())
		}
	} else {
		src := want.StagingPath
		if v.Ephemeral {
			src = d.dirs.volumeDir(v.ID)
			if want.Group != "" {
				if err := chownGroup(src, want.Group); err != nil {
					return nil, status.Error(codes.InvalidArgument, err.Error())
				}
			}
		}
		if err := os.MkdirAll(path, 0o750); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		if err := bindMount(src, path, flags); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
	}
	if v.Targets == nil {
		v.Targets = map[string]target{}
	}
	v.Targets[path] = want
	if err := d.state.save(); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

// makeFile creates an empty file at path for a block device's bind mount;
// an empty directory there (left by a CO that prepared a directory) is
// replaced.
func makeFile(path string) error {
	if err := ensureParent(path); err != nil {
		return err
	}
	st, err := os.Lstat(path)
	if err == nil && st.IsDir() {
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("replacing the directory %s by a file: %w", path, err)
		}
	} else if err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("checking %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o640)
	if err != nil {
		return fmt.Errorf("creating %s: %w", path, err)
	}
	return f.Close()
}

func (d *driver) NodeUnpublishVolume(ctx context.Context, req *csi.NodeUnpublishVolumeRequest) (resp *csi.NodeUnpublishVolumeResponse, err error) {
	rec := callRecord{Method: "NodeUnpublishVolume", VolumeID: req.GetVolumeId(), TargetPath: req.GetTargetPath()}
	defer func() { d.record(rec, err) }()
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID missing")
	}
	if req.GetTargetPath() == "" {
		return nil, status.Error(codes.InvalidArgument, "target path missing")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	path := req.GetTargetPath()
	v, ok := d.state.Volumes[req.GetVolumeId()]
	if !ok {
		if err := goneUnlessMounted(req.GetVolumeId(), path); err != nil {
			return nil, err
		}
		// Repeated after it succeeded (an inline volume is gone by then):
		// only the empty target may be left.
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, status.Errorf(codes.Internal, "removing the target %s: %v", path, err)
		}
		return &csi.NodeUnpublishVolumeResponse{}, nil
	}
	t, published := v.Targets[path]
	if err := unmountAll(path); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, status.Errorf(codes.Internal, "removing the target %s: %v", path, err)
	}
	if !published {
		return &csi.NodeUnpublishVolumeResponse{}, nil
	}
	if err := detachLoop(ctx, t.Loop, d.dirs.blockFile(v.ID)); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	delete(v.Targets, path)
	if v.Ephemeral && len(v.Targets) == 0 {
		if err := d.removeBacking(v); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		delete(d.state.Volumes, v.ID)
	}
	if err := d.state.save(); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// goneUnlessMounted answers an unpublish or unstage of a volume the driver
// does not know: done (nil) when nothing is mounted at path, as for a call
// repeated after it succeeded, and NotFound when something is, since that
// mount is not the driver's to remove.
func goneUnlessMounted(id, path string) error {
	ok, err := mounted(path)
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	if ok {
		return notFound(id)
	}
	return nil
}

// volumeAt returns the volume published or staged at path.
func (d *driver) volumeAt(id, path string) (*volume, error) {
	v, ok := d.state.Volumes[id]
	if !ok {
		return nil, notFound(id)
	}
	if _, ok := v.Targets[path]; ok {
		return v, nil
	}
	if _, ok := v.Staged[path]; ok {
		return v, nil
	}
	return nil, status.Errorf(codes.NotFound, "volume %s is neither published nor staged at %s", id, path)
}

func (d *driver) NodeGetVolumeStats(_ context.Context, req *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID missing")
	}
	if req.GetVolumePath() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume path missing")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	v, err := d.mountedVolumeAt(req.GetVolumeId(), req.GetVolumePath())
	if err != nil {
		return nil, err
	}
	if v.Block {
		return &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{{Unit: csi.VolumeUsage_BYTES, Total: v.Capacity}}}, nil
	}
	used, usedInodes, err := dirUsage(d.dirs.volumeDir(v.ID))
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	var sfs unix.Statfs_t
	if err := unix.Statfs(d.dirs.fs(), &sfs); err != nil {
		return nil, status.Errorf(codes.Internal, "statfs %s: %v", d.dirs.fs(), err)
	}
	// Inodes are shared by all the volumes on the backing filesystem: the
	// total is the filesystem's, what this volume may still use is what
	// the filesystem has free.
	inodesFree := int64(sfs.Ffree)
	return &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{
		{Unit: csi.VolumeUsage_BYTES, Total: v.Capacity, Used: used, Available: max(v.Capacity-used, 0)},
		{Unit: csi.VolumeUsage_INODES, Total: usedInodes + inodesFree, Used: usedInodes, Available: inodesFree},
	}}, nil
}

func (d *driver) NodeExpandVolume(ctx context.Context, req *csi.NodeExpandVolumeRequest) (resp *csi.NodeExpandVolumeResponse, err error) {
	rec := callRecord{Method: "NodeExpandVolume", VolumeID: req.GetVolumeId(), TargetPath: req.GetVolumePath(),
		StagingTargetPath: req.GetStagingTargetPath(), CapacityBytes: req.GetCapacityRange().GetRequiredBytes()}
	defer func() { d.record(rec, err) }()
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID missing")
	}
	if req.GetVolumePath() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume path missing")
	}
	if req.GetVolumeCapability() != nil {
		if _, err := d.checkCapability(req.GetVolumeCapability()); err != nil {
			return nil, err
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	v, err := d.volumeAt(req.GetVolumeId(), req.GetVolumePath())
	if err != nil {
		return nil, err
	}
	size, err := d.capacityFor(req.GetCapacityRange())
	if err != nil {
		return nil, err
	}
	if req.GetCapacityRange() == nil {
		size = v.Capacity
	}
	if err := d.grow(v, size); err != nil {
		return nil, err
	}
	if v.Block {
		for _, dev := range v.Staged {
			if dev != "" && loopBacking(dev) == d.dirs.blockFile(v.ID) {
				if err := refreshLoop(ctx, dev); err != nil {
					return nil, status.Error(codes.Internal, err.Error())
				}
			}
		}
		for _, t := range v.Targets {
			if t.Loop != "" && loopBacking(t.Loop) == d.dirs.blockFile(v.ID) {
				if err := refreshLoop(ctx, t.Loop); err != nil {
					return nil, status.Error(codes.Internal, err.Error())
				}
			}
		}
	}
	return &csi.NodeExpandVolumeResponse{CapacityBytes: v.Capacity}, nil
}
