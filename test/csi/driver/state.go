package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// volume is one volume the driver created (CreateVolume) or an ephemeral
// inline volume (NodePublishVolume without staging). Everything a node
// operation needs after a restart of the driver is here.
type volume struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Capacity int64  `json:"capacity"`
	// Block is true for a raw block volume (a file attached to a loop
	// device), false for a filesystem volume (a directory).
	Block bool `json:"block"`
	// Ephemeral marks an inline volume: it exists only while published
	// and is deleted by its NodeUnpublishVolume.
	Ephemeral bool `json:"ephemeral,omitempty"`
	// Published maps node IDs the volume is controller-published to onto
	// the readonly flag of that publication.
	Published map[string]bool `json:"published,omitempty"`
	// Staged maps staging paths onto the loop device attached there
	// (empty for filesystem volumes).
	Staged map[string]string `json:"staged,omitempty"`
	// Targets maps published target paths onto their publication.
	Targets map[string]target `json:"targets,omitempty"`
}

// target is one NodePublishVolume.
type target struct {
	ReadOnly bool `json:"readOnly,omitempty"`
	// StagingPath is where the volume was staged for this target (empty
	// for ephemeral volumes).
	StagingPath string `json:"stagingPath,omitempty"`
	// Loop is the read-only loop device a read-only block publication
	// owns (a writable one shares the staged device).
	Loop string `json:"loop,omitempty"`
	// MountFlags and Group are kept so that a repeated call with the same
	// arguments is recognised as the same publication.
	MountFlags []string `json:"mountFlags,omitempty"`
	Group      string   `json:"group,omitempty"`
}

// state is the driver's persistent state: every volume by ID. It is
// written to one JSON file after every change, so the driver survives its
// own restart (the mounts and loop devices survive it anyway).
type state struct {
	path    string
	Volumes map[string]*volume `json:"volumes"`
}

// loadState reads the state file at path; a missing file is an empty state.
func loadState(path string) (*state, error) {
	s := &state{path: path, Volumes: map[string]*volume{}}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the driver state: %w", err)
	}
	if err := json.Unmarshal(b, s); err != nil {
		return nil, fmt.Errorf("parsing the driver state %s: %w", path, err)
	}
	if s.Volumes == nil {
		s.Volumes = map[string]*volume{}
	}
	return s, nil
}

// save writes the state atomically (a temporary file renamed over the old).
func (s *state) save() error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the driver state: %w", err)
	}
	tmp := s.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("writing the driver state: %w", err)
	}
	if err := os.Rename(tmp, s.path); err != nil {
		return fmt.Errorf("writing the driver state: %w", err)
	}
	return nil
}

// byName returns the non-ephemeral volume created under name, if any.
func (s *state) byName(name string) *volume {
	for _, v := range s.Volumes {
		if v.Name == name && !v.Ephemeral {
			return v
		}
	}
	return nil
}

// stateDirs are the paths under the driver's state directory.
type stateDirs struct {
	root string
}

func (d stateDirs) stateFile() string   { return filepath.Join(d.root, "state.json") }
func (d stateDirs) backingFile() string { return filepath.Join(d.root, "backing.img") }
func (d stateDirs) fs() string          { return filepath.Join(d.root, "fs") }
func (d stateDirs) volumeDir(id string) string {
	return filepath.Join(d.root, "fs", "volumes", id)
}
func (d stateDirs) blockFile(id string) string {
	return filepath.Join(d.root, "fs", "blocks", id+".img")
}
