package cgroups

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"strings"
)

// SwapsPath is the kernel's list of active swap areas.
const SwapsPath = "/proc/swaps"

// ErrSwapOn: swap is on and failSwapOn is true.
var ErrSwapOn = errors.New("swap is on")

// CheckSwap refuses to run with swap on when failSwapOn is true, as the
// upstream kubelet does: readSwaps returns the content of SwapsPath, whose
// lines after the header are the active swap areas. A missing file means
// no swap; another read error is returned. The error names the areas and
// both ways out.
func CheckSwap(failSwapOn bool, readSwaps func() ([]byte, error)) error {
	if !failSwapOn {
		return nil
	}
	data, err := readSwaps()
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the active swap areas (%s) for failSwapOn: %w", SwapsPath, err)
	}
	var areas []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for first := true; sc.Scan(); first = false {
		fields := strings.Fields(sc.Text())
		if first || len(fields) == 0 {
			continue // the header
		}
		areas = append(areas, fields[0])
	}
	if len(areas) == 0 {
		return nil
	}
	return fmt.Errorf("%w (%s): turn it off (swapoff -a) or set failSwapOn: false (--fail-swap-on=false)", ErrSwapOn, strings.Join(areas, ", "))
}
