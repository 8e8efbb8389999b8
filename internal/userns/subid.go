package userns

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// User is the user whose subordinate IDs the node gives to pods, as
// upstream.
const User = "kubelet"

// NodeRange returns the node's range: User's subordinate IDs in the
// subuid and subgid files (which must be one range, the same for users and
// groups), else DefaultRange. Files that do not exist name no range.
func NodeRange(subuidPath, subgidPath string) (Range, error) {
	uids, err := readSubIDs(subuidPath)
	if err != nil {
		return Range{}, err
	}
	gids, err := readSubIDs(subgidPath)
	if err != nil {
		return Range{}, err
	}
	u, gotU := uids[User]
	g, gotG := gids[User]
	switch {
	case !gotU && !gotG:
		return DefaultRange, nil
	case gotU != gotG:
		return Range{}, fmt.Errorf("user %q has subordinate IDs in only one of %s and %s", User, subuidPath, subgidPath)
	case len(u) != 1 || len(g) != 1:
		return Range{}, fmt.Errorf("user %q must have exactly one subordinate ID range in %s and in %s", User, subuidPath, subgidPath)
	case u[0] != g[0]:
		return Range{}, fmt.Errorf("user %q has different subordinate user (%d+%d) and group (%d+%d) IDs", User, u[0].First, u[0].Length, g[0].First, g[0].Length)
	}
	return u[0], nil
}

func readSubIDs(path string) (map[string][]Range, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read subordinate IDs: %w", err)
	}
	out, err := ParseSubIDs(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// ParseSubIDs reads an /etc/subuid or /etc/subgid file: lines
// "name:first:count"; blank lines and lines starting with # are skipped.
func ParseSubIDs(data []byte) (map[string][]Range, error) {
	out := map[string][]Range{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		parts := strings.Split(line, ":")
		if len(parts) != 3 || parts[0] == "" {
			return nil, fmt.Errorf("line %d: want name:first:count, got %q", n, line)
		}
		first, err := strconv.ParseUint(parts[1], 10, 32)
		if err != nil {
			return nil, fmt.Errorf("line %d: first ID: %w", n, err)
		}
		count, err := strconv.ParseUint(parts[2], 10, 32)
		if err != nil {
			return nil, fmt.Errorf("line %d: count: %w", n, err)
		}
		if first+count > 1<<32 {
			return nil, fmt.Errorf("line %d: %d+%d exceeds the 32-bit ID space", n, first, count)
		}
		out[parts[0]] = append(out[parts[0]], Range{First: uint32(first), Length: uint32(count)})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}
