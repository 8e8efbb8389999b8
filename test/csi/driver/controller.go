package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// PublishContextKey is the key of the publish context ControllerPublish
// returns; its value names the node the volume is published to. With
// --require-attach, NodeStage and NodePublish insist on it.
const PublishContextKey = "csi.heartlet.test/published-to"

// volumeID derives a volume's ID from the name CreateVolume was given, so
// that a repeated call finds the same volume.
func volumeID(name string) string {
	sum := sha256.Sum256([]byte(name))
	return "vol-" + hex.EncodeToString(sum[:10])
}

// supportedAccessMode tells whether the driver serves mode. The driver is
// single-node, so every multi-node mode is trivially served from the one
// node; the single-node single/multi-writer modes need a capability the
// driver does not advertise.
func supportedAccessMode(mode csi.VolumeCapability_AccessMode_Mode) bool {
	switch mode {
	case csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER,
		csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY,
		csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY,
		csi.VolumeCapability_AccessMode_MULTI_NODE_SINGLE_WRITER,
		csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER:
		return true
	}
	return false
}

// checkCapability validates one volume capability and tells whether it
// asks for a block volume.
func (d *driver) checkCapability(c *csi.VolumeCapability) (block bool, err error) {
	if c == nil {
		return false, status.Error(codes.InvalidArgument, "volume capability missing")
	}
	if c.GetAccessMode() == nil {
		return false, status.Error(codes.InvalidArgument, "volume capability has no access mode")
	}
	if !supportedAccessMode(c.GetAccessMode().GetMode()) {
		return false, status.Errorf(codes.InvalidArgument, "access mode %s is not supported", c.GetAccessMode().GetMode())
	}
	switch {
	case c.GetBlock() != nil:
		return true, nil
	case c.GetMount() != nil:
		m := c.GetMount()
		if fs := m.GetFsType(); fs != "" && fs != "ext4" {
			return false, status.Errorf(codes.InvalidArgument, "fsType %q is not supported (volumes live on ext4)", fs)
		}
		if _, err := parseMountFlags(m.GetMountFlags()); err != nil {
			return false, status.Error(codes.InvalidArgument, err.Error())
		}
		if m.GetVolumeMountGroup() != "" && !d.cfg.VolumeMountGroup {
			return false, status.Error(codes.InvalidArgument, "volume_mount_group given but the driver does not advertise VOLUME_MOUNT_GROUP")
		}
		return false, nil
	}
	return false, status.Error(codes.InvalidArgument, "volume capability has neither block nor mount access type")
}

// checkCapabilities validates caps, which must agree on the access type.
func (d *driver) checkCapabilities(caps []*csi.VolumeCapability) (block bool, err error) {
	if len(caps) == 0 {
		return false, status.Error(codes.InvalidArgument, "volume capabilities missing")
	}
	for i, c := range caps {
		b, err := d.checkCapability(c)
		if err != nil {
			return false, err
		}
		if i > 0 && b != block {
			return false, status.Error(codes.InvalidArgument, "volume capabilities mix block and mount access types")
		}
		block = b
	}
	return block, nil
}

// capacityFor picks a volume size from a capacity range.
func (d *driver) capacityFor(r *csi.CapacityRange) (int64, error) {
	req, lim := r.GetRequiredBytes(), r.GetLimitBytes()
	if req < 0 || lim < 0 {
		return 0, status.Error(codes.InvalidArgument, "negative capacity")
	}
	if lim > 0 && req > lim {
		return 0, status.Errorf(codes.InvalidArgument, "required bytes %d exceed the limit %d", req, lim)
	}
	size := req
	if size == 0 {
		size = defaultCapacity
		if lim > 0 && lim < size {
			size = lim
		}
	}
	if size > d.cfg.MaxVolumeSize {
		return 0, status.Errorf(codes.OutOfRange, "%d bytes exceed the largest volume of %d bytes", size, d.cfg.MaxVolumeSize)
	}
	return size, nil
}

// topology is the driver's one topology segment.
func (d *driver) topology() *csi.Topology {
	return &csi.Topology{Segments: map[string]string{d.cfg.TopologyKey: d.cfg.NodeID}}
}

// topologyReachable tells whether the requirement admits this node.
func (d *driver) topologyReachable(req *csi.TopologyRequirement) bool {
	if len(req.GetRequisite()) == 0 && len(req.GetPreferred()) == 0 {
		return true
	}
	match := func(ts []*csi.Topology) bool {
		for _, t := range ts {
			if v, ok := t.GetSegments()[d.cfg.TopologyKey]; ok && v == d.cfg.NodeID && len(t.GetSegments()) == 1 {
				return true
			}
		}
		return false
	}
	if len(req.GetRequisite()) > 0 {
		return match(req.GetRequisite())
	}
	return match(req.GetPreferred())
}

func (d *driver) csiVolume(v *volume) *csi.Volume {
	return &csi.Volume{
		VolumeId:           v.ID,
		CapacityBytes:      v.Capacity,
		AccessibleTopology: []*csi.Topology{d.topology()},
	}
}

func (d *driver) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	if req.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume name missing")
	}
	block, err := d.checkCapabilities(req.GetVolumeCapabilities())
	if err != nil {
		return nil, err
	}
	if len(req.GetParameters()) > 0 {
		for k := range req.GetParameters() {
			return nil, status.Errorf(codes.InvalidArgument, "parameter %q is not supported (the driver takes no parameters)", k)
		}
	}
	if req.GetVolumeContentSource() != nil {
		return nil, status.Error(codes.InvalidArgument, "volume content sources (snapshots, clones) are not supported")
	}
	size, err := d.capacityFor(req.GetCapacityRange())
	if err != nil {
		return nil, err
	}
	if !d.topologyReachable(req.GetAccessibilityRequirements()) {
		return nil, status.Errorf(codes.ResourceExhausted, "the topology requirement excludes the driver's only node %q", d.cfg.NodeID)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if v := d.state.byName(req.GetName()); v != nil {
		lim := req.GetCapacityRange().GetLimitBytes()
		if v.Block != block || v.Capacity < req.GetCapacityRange().GetRequiredBytes() || (lim > 0 && v.Capacity > lim) {
			return nil, status.Errorf(codes.AlreadyExists, "volume %q exists with a different size or access type", req.GetName())
		}
		return &csi.CreateVolumeResponse{Volume: d.csiVolume(v)}, nil
	}
	v := &volume{ID: volumeID(req.GetName()), Name: req.GetName(), Capacity: size, Block: block}
	if err := d.createBacking(v); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	d.state.Volumes[v.ID] = v
	if err := d.state.save(); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	d.log.Info("volume created", "volumeID", v.ID, "name", v.Name, "capacity", v.Capacity, "block", v.Block)
	return &csi.CreateVolumeResponse{Volume: d.csiVolume(v)}, nil
}

func (d *driver) DeleteVolume(_ context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID missing")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	v, ok := d.state.Volumes[req.GetVolumeId()]
	if !ok {
		return &csi.DeleteVolumeResponse{}, nil
	}
	if len(v.Staged) > 0 || len(v.Targets) > 0 {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is still staged or published on the node", v.ID)
	}
	if err := d.removeBacking(v); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	delete(d.state.Volumes, v.ID)
	if err := d.state.save(); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	d.log.Info("volume deleted", "volumeID", v.ID)
	return &csi.DeleteVolumeResponse{}, nil
}

func (d *driver) ControllerPublishVolume(_ context.Context, req *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID missing")
	}
	if req.GetNodeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "node ID missing")
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
	if req.GetNodeId() != d.cfg.NodeID {
		return nil, status.Errorf(codes.NotFound, "node %s does not exist (the driver's node is %s)", req.GetNodeId(), d.cfg.NodeID)
	}
	if block != v.Block {
		return nil, status.Errorf(codes.InvalidArgument, "volume %s has another access type", v.ID)
	}
	if ro, ok := v.Published[req.GetNodeId()]; ok && ro != req.GetReadonly() {
		return nil, status.Errorf(codes.AlreadyExists, "volume %s is published to %s with readonly=%t", v.ID, req.GetNodeId(), ro)
	}
	if _, ok := v.Published[req.GetNodeId()]; !ok && d.cfg.MaxVolumes > 0 && d.publishedTo(req.GetNodeId()) >= d.cfg.MaxVolumes {
		return nil, status.Errorf(codes.ResourceExhausted, "node %s has the most volumes it can take (%d)", req.GetNodeId(), d.cfg.MaxVolumes)
	}
	if v.Published == nil {
		v.Published = map[string]bool{}
	}
	v.Published[req.GetNodeId()] = req.GetReadonly()
	if err := d.state.save(); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.ControllerPublishVolumeResponse{PublishContext: map[string]string{PublishContextKey: req.GetNodeId()}}, nil
}

func (d *driver) ControllerUnpublishVolume(_ context.Context, req *csi.ControllerUnpublishVolumeRequest) (*csi.ControllerUnpublishVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID missing")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	v, ok := d.state.Volumes[req.GetVolumeId()]
	if !ok {
		// The volume is gone, so it is published nowhere.
		return &csi.ControllerUnpublishVolumeResponse{}, nil
	}
	if req.GetNodeId() == "" {
		v.Published = nil
	} else {
		delete(v.Published, req.GetNodeId())
	}
	if err := d.state.save(); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.ControllerUnpublishVolumeResponse{}, nil
}

func (d *driver) ValidateVolumeCapabilities(_ context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID missing")
	}
	if len(req.GetVolumeCapabilities()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "volume capabilities missing")
	}
	d.mu.Lock()
	v, ok := d.state.Volumes[req.GetVolumeId()]
	d.mu.Unlock()
	if !ok {
		return nil, notFound(req.GetVolumeId())
	}
	block, err := d.checkCapabilities(req.GetVolumeCapabilities())
	if err != nil || block != v.Block || len(req.GetParameters()) > 0 {
		msg := "capabilities not supported"
		if err != nil {
			msg = err.Error()
		}
		return &csi.ValidateVolumeCapabilitiesResponse{Message: msg}, nil
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeContext:      req.GetVolumeContext(),
		VolumeCapabilities: req.GetVolumeCapabilities(),
		Parameters:         req.GetParameters(),
	}}, nil
}

func (d *driver) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	var caps []*csi.ControllerServiceCapability
	for _, t := range []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME,
		csi.ControllerServiceCapability_RPC_EXPAND_VOLUME,
	} {
		caps = append(caps, &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: t}}})
	}
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: caps}, nil
}

func (d *driver) ControllerExpandVolume(_ context.Context, req *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID missing")
	}
	if req.GetCapacityRange() == nil {
		return nil, status.Error(codes.InvalidArgument, "capacity range missing")
	}
	size, err := d.capacityFor(req.GetCapacityRange())
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	v, ok := d.state.Volumes[req.GetVolumeId()]
	if !ok {
		return nil, notFound(req.GetVolumeId())
	}
	if err := d.grow(v, size); err != nil {
		return nil, err
	}
	return &csi.ControllerExpandVolumeResponse{CapacityBytes: v.Capacity, NodeExpansionRequired: true}, nil
}

// grow makes v at least size bytes: a block volume's file grows (the
// loop devices see it on NodeExpandVolume); a directory has no size of its
// own, so only the recorded capacity changes. Shrinking is a no-op.
func (d *driver) grow(v *volume, size int64) error {
	if size <= v.Capacity {
		return nil
	}
	if v.Block {
		if err := createSparse(d.dirs.blockFile(v.ID), size); err != nil {
			return status.Error(codes.Internal, err.Error())
		}
	}
	v.Capacity = size
	if err := d.state.save(); err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	d.log.Info("volume expanded", "volumeID", v.ID, "capacity", v.Capacity)
	return nil
}

// notFound is the error for a volume ID the driver does not know.
func notFound(id string) error {
	return status.Errorf(codes.NotFound, "volume %s does not exist", id)
}

// publishedTo counts the volumes ControllerPublished to node.
func (d *driver) publishedTo(node string) int64 {
	var n int64
	for _, v := range d.state.Volumes {
		if _, ok := v.Published[node]; ok {
			n++
		}
	}
	return n
}
