package agent

import (
	v1 "k8s.io/api/core/v1"

	podhttp "github.com/heartlet/heartlet/internal/podsource/http"
)

// buildURLSource adds the staticPodURL source when one is configured; its
// pods join the desired set as the file source's do.
func (a *Agent) buildURLSource(c *components) {
	cfg := a.opts.Config
	if cfg.StaticPodURL == "" {
		return
	}
	c.sources = append(c.sources, podhttp.SourceName)
	c.urlSource = podhttp.New(podhttp.Config{
		URL:      cfg.StaticPodURL,
		Header:   cfg.StaticPodURLHeader,
		NodeName: a.opts.NodeName,
		Period:   cfg.HTTPCheckFrequency.Duration,
		Sink:     func(pods []*v1.Pod) { c.desired.Set(podhttp.SourceName, pods) },
	})
}
