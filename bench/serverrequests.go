package main

import (
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
)

// serverRequests are the API server's requests from every client (its
// apiserver_request_total), by "VERB:resource[/subresource]".
type serverRequests map[string]float64

// takeServerRequests reads the API server's request counters; nil when
// they cannot be read (the columns that use them then stay empty).
func takeServerRequests(ctx context.Context, cs kubernetes.Interface) serverRequests {
	b, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil
	}
	s, err := parseServerRequests(bytes.NewReader(b))
	if err != nil {
		return nil
	}
	return s
}

// parseServerRequests sums apiserver_request_total of a metrics page by
// verb, resource and subresource.
func parseServerRequests(r io.Reader) (serverRequests, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse the API server's metrics: %w", err)
	}
	s := serverRequests{}
	f := families["apiserver_request_total"]
	if f == nil {
		return s, nil
	}
	for _, m := range f.GetMetric() {
		var verb, resource, sub string
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "verb":
				verb = l.GetValue()
			case "resource":
				resource = l.GetValue()
			case "subresource":
				sub = l.GetValue()
			}
		}
		key := verb + ":" + resource
		if sub != "" {
			key += "/" + sub
		}
		s[key] += m.GetCounter().GetValue()
	}
	return s, nil
}

// since is the requests per pod made after before, by kind; nil when
// either reading failed.
func (s serverRequests) since(before serverRequests, n int) map[string]float64 {
	return perPod(before, s, n)
}
