package main

import (
	"maps"
	"strconv"
	"strings"
	"testing"
)

func TestServerRequests(t *testing.T) {
	page := func(podsPatch, events float64) string {
		return strings.NewReplacer("PATCH_N", ftoa(podsPatch), "EVENTS_N", ftoa(events)).Replace(`# HELP apiserver_request_total Counter of apiserver requests.
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="status",verb="PATCH",version="v1"} PATCH_N
apiserver_request_total{code="409",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="status",verb="PATCH",version="v1"} 2
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="events",scope="resource",subresource="",verb="POST",version="v1"} EVENTS_N
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="nodes",scope="resource",subresource="",verb="GET",version="v1"} 7
# HELP other_total Something else.
# TYPE other_total counter
other_total 99
`)
	}
	before, err := parseServerRequests(strings.NewReader(page(10, 30)))
	if err != nil {
		t.Fatal(err)
	}
	if want := (serverRequests{"PATCH:pods/status": 12, "POST:events": 30, "GET:nodes": 7}); !maps.Equal(before, want) {
		t.Fatalf("parsed %v, want %v", before, want)
	}
	after, err := parseServerRequests(strings.NewReader(page(30, 90)))
	if err != nil {
		t.Fatal(err)
	}
	got := after.since(before, 20)
	if want := map[string]float64{"PATCH:pods/status": 1, "POST:events": 3}; !maps.Equal(got, want) {
		t.Errorf("per pod %v, want %v (unchanged kinds left out)", got, want)
	}
	if serverRequests(nil).since(before, 20) != nil || after.since(nil, 20) != nil {
		t.Error("a failed reading gave numbers")
	}
	if _, err := parseServerRequests(strings.NewReader("apiserver_request_total{verb=\"GET\" 1\n")); err == nil {
		t.Error("a malformed page parsed")
	}
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
