package config

import (
	"strings"
	"testing"
)

func TestPLEGRelistPeriodFlag(t *testing.T) {
	e := fakeEnv(map[string]string{"ok.yaml": header + "maxPods: 10\n"}, "node1")
	for _, tc := range []struct {
		args []string
		want string // the period, or the problem
	}{
		{nil, "0s"},
		{[]string{"--pleg-relist-period=30s", "--config", "ok.yaml"}, "30s"},
		{[]string{"--pleg-relist-period=-1s"}, `flag --pleg-relist-period: plegRelistPeriod: Invalid value: "-1s"`},
	} {
		opts, err := load(tc.args, e)
		got := ""
		if err != nil {
			got = err.Error()
		} else {
			got = opts.PLEGRelistPeriod.String()
		}
		if !strings.HasPrefix(got, tc.want) {
			t.Errorf("%q: got %q, want %q", tc.args, got, tc.want)
		}
	}
	if strings.Contains(FlagUsages(), "pleg-relist-period") {
		t.Errorf("FlagUsages lists the hidden --pleg-relist-period")
	}
}
