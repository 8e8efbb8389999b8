package eviction

import (
	"errors"
	"testing"
)

func TestParsePSI(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		want    PSI
		wantErr bool
	}{{
		name: "memory",
		in:   "some avg10=12.50 avg60=3.00 avg300=0.25 total=8864\nfull avg10=1.00 avg60=0.00 avg300=0.00 total=5795\n",
		want: PSI{Some: PSILine{Avg10: 12.5, Avg60: 3, Avg300: 0.25, Total: 8864}, Full: PSILine{Avg10: 1, Total: 5795}, HasFull: true},
	}, {
		name: "some only, fields in another order, unknown field",
		in:   "some total=7 avg300=0.00 avg60=0.00 avg10=100.00 avg1000=3",
		want: PSI{Some: PSILine{Avg10: 100, Total: 7}},
	}, {
		name:    "empty",
		in:      "",
		wantErr: true,
	}, {
		name:    "full only",
		in:      "full avg10=0.00 avg60=0.00 avg300=0.00 total=1",
		wantErr: true,
	}, {
		name:    "repeated line",
		in:      "some avg10=0 avg60=0 avg300=0 total=1\nsome avg10=0 avg60=0 avg300=0 total=1",
		wantErr: true,
	}, {
		name:    "missing field",
		in:      "some avg10=0.00 avg60=0.00 total=1",
		wantErr: true,
	}, {
		name:    "repeated field",
		in:      "some avg10=0.00 avg10=50 avg60=0.00 avg300=0 total=1",
		wantErr: true,
	}, {
		name:    "out of range",
		in:      "some avg10=100.01 avg60=0.00 avg300=0 total=1",
		wantErr: true,
	}, {
		name:    "negative",
		in:      "some avg10=-1 avg60=0.00 avg300=0 total=1",
		wantErr: true,
	}, {
		name:    "not a number",
		in:      "some avg10=NaN avg60=0.00 avg300=0 total=1",
		wantErr: true,
	}, {
		name:    "field without value",
		in:      "some avg10 avg60=0.00 avg300=0 total=1",
		wantErr: true,
	}, {
		name:    "other line",
		in:      "some avg10=0 avg60=0 avg300=0 total=1\nmost avg10=0",
		wantErr: true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParsePSI([]byte(tc.in))
			if tc.wantErr {
				if err == nil || !errors.Is(err, errPSIFormat) {
					t.Fatalf("ParsePSI = %+v, %v; want an errPSIFormat error", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParsePSI = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// FuzzParsePSI checks that any pressure file is refused or parses to
// percentages within 0 to 100 with a "some" line.
func FuzzParsePSI(f *testing.F) {
	for _, seed := range []string{
		"some avg10=0.00 avg60=0.00 avg300=0.00 total=8864\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=5795\n",
		"some avg10=99.99 avg60=1e2 avg300=0x1p-2 total=18446744073709551615",
		"some avg10=0 avg60=0 avg300=0 total=0\nfull",
		"some\x00avg10=1",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParsePSI(b)
		if err != nil {
			if !errors.Is(err, errPSIFormat) {
				t.Fatalf("error %v does not wrap errPSIFormat", err)
			}
			return
		}
		lines := []PSILine{p.Some}
		if p.HasFull {
			lines = append(lines, p.Full)
		}
		for _, l := range lines {
			for _, v := range []float64{l.Avg10, l.Avg60, l.Avg300} {
				if !(v >= 0 && v <= 100) {
					t.Fatalf("%q parsed to an average of %v", b, v)
				}
			}
		}
	})
}
