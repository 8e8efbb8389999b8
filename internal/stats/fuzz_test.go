package stats

import "testing"

// FuzzMemTotal feeds MemTotal what a hostile or broken /proc/meminfo could
// hold: it must never panic nor report a negative size without an error.
func FuzzMemTotal(f *testing.F) {
	f.Add("MemTotal: 16384 kB\n")
	f.Add("MemTotal: -1 kB")
	f.Add("MemTotal:")
	f.Add("MemTotal: 18446744073709551615 kB\nMemFree: 1 kB\n")
	f.Add("Inactive(file): 1 MB\nMemTotal: 1\n")
	f.Fuzz(func(t *testing.T, s string) {
		n, err := MemTotal([]byte(s))
		if err == nil && n < 0 {
			t.Errorf("MemTotal(%q) = %d without error", s, n)
		}
	})
}
