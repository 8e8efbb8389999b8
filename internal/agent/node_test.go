package agent

import (
	"bufio"
	"strings"
	"testing"
)

func TestParseMemTotal(t *testing.T) {
	tests := []struct {
		in   string
		want int64
	}{
		{"MemTotal:       24554172 kB\nMemFree: 1 kB\n", 24554172 * 1024},
		{"MemFree: 1 kB\n", 0},
		{"MemTotal: x kB\n", 0},
	}
	for _, tt := range tests {
		if got := parseMemTotal(bufio.NewScanner(strings.NewReader(tt.in))); got != tt.want {
			t.Errorf("parseMemTotal(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}
