// Package http is the staticPodURL pod source: it reads a URL every
// httpCheckFrequency and delivers the pods it serves, as the upstream
// kubelet's HTTP source does.
//
// Rules (upstream's):
//
//   - The URL is fetched with GET and the staticPodURLHeader headers; a
//     request times out after 10 s; at most 10 MiB are read.
//   - The body is one Pod or a v1 PodList (see manifest.ParseList), YAML or
//     JSON. Pods get the static identity with the source "http" and a UID
//     derived from their content and the URL.
//   - A body identical to the last one read changes nothing. A failed
//     request, a status other than 200 or a body that cannot be used keeps
//     the pods last delivered, and is logged (a few times, then at a higher
//     verbosity until it recovers) and reported by Err. An empty body
//     delivers no pods (and is an error too), as upstream.
//   - Nothing is delivered before the first usable read, so pods of this
//     source are not considered gone while the URL has never answered.
package http

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	nethttp "net/http"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/heartlet/heartlet/internal/podconfig"
	"github.com/heartlet/heartlet/internal/podsource/manifest"
)

// SourceName is the name of this source in podconfig.
const SourceName = podconfig.SourceHTTP

const (
	// maxBodySize bounds the body read, as upstream's maxConfigLength.
	maxBodySize = 10 << 20
	// requestTimeout bounds one request, as upstream's client.
	requestTimeout = 10 * time.Second
	// loudFailures is how many failures in a row are logged at the
	// default verbosity.
	loudFailures = 3
)

// Doer sends one HTTP request; *net/http.Client is one. It must honour
// the request's context.
type Doer interface {
	Do(*nethttp.Request) (*nethttp.Response, error)
}

// Config describes one source.
type Config struct {
	// URL is staticPodURL. Required.
	URL string
	// Header is staticPodURLHeader, sent with every request.
	Header map[string][]string
	// NodeName is this node's name. Required.
	NodeName string
	// Period is httpCheckFrequency; 20 s when not positive.
	Period time.Duration
	// Sink receives the full set of pods after every change; it is called
	// from Run's goroutine, must not block for long, and owns the pods.
	Sink func([]*v1.Pod)
	// Client sends the requests; nil means a client with a 10 s timeout.
	Client Doer
	// Clock times the polls and stamps kubernetes.io/config.seen; nil
	// means the real clock.
	Clock clock.WithTicker
}

// Source polls one URL.
type Source struct {
	cfg Config

	mu  sync.Mutex
	err error

	// Owned by the Run goroutine.
	last      []byte
	delivered []types.UID
	pods      map[types.UID]*v1.Pod
	sent      bool
	failures  int
}

// New returns a source for cfg. It has no side effects.
func New(cfg Config) *Source {
	if cfg.Period <= 0 {
		cfg.Period = 20 * time.Second
	}
	if cfg.Client == nil {
		cfg.Client = &nethttp.Client{Timeout: requestTimeout}
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Sink == nil {
		cfg.Sink = func([]*v1.Pod) {}
	}
	return &Source{cfg: cfg, pods: map[types.UID]*v1.Pod{}}
}

// Err returns the problem of the last read, nil when it succeeded.
func (s *Source) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Run reads the URL at once and then every period until ctx is done. It
// fails only if the URL cannot make a request at all.
func (s *Source) Run(ctx context.Context) error {
	if _, err := nethttp.NewRequest(nethttp.MethodGet, s.cfg.URL, nil); err != nil {
		return fmt.Errorf("static pod URL %q: %w", s.cfg.URL, err)
	}
	logger := klog.FromContext(ctx).WithValues("url", s.cfg.URL)
	ctx = klog.NewContext(ctx, logger)
	logger.V(1).Info("Watching static pod URL", "period", s.cfg.Period)
	ticker := s.cfg.Clock.NewTicker(s.cfg.Period)
	defer ticker.Stop()
	for {
		s.poll(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C():
		}
	}
}

// poll reads the URL once and records the outcome.
func (s *Source) poll(ctx context.Context) {
	logger := klog.FromContext(ctx)
	err := s.read(ctx)
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
	if err == nil {
		if s.failures > 0 {
			logger.Info("Read static pods from URL again")
		}
		s.failures = 0
		return
	}
	if ctx.Err() != nil {
		return
	}
	switch {
	case s.failures < loudFailures:
		logger.Error(err, "Failed to read static pods from URL, keeping the pods last read")
	case s.failures == loudFailures:
		logger.Error(err, "Failed to read static pods from URL, keeping the pods last read; logging further failures at verbosity 4")
	default:
		logger.V(4).Info("Failed to read static pods from URL, keeping the pods last read", "err", err)
	}
	s.failures++
}

// read fetches and decodes the URL, delivering its pods if they changed.
func (s *Source) read(ctx context.Context) error {
	data, err := s.fetch(ctx)
	if err != nil {
		return err
	}
	if len(data) == 0 {
		s.deliver(nil)
		s.last = nil
		return fmt.Errorf("static pod URL %s: the body is empty", s.cfg.URL)
	}
	if s.sent && bytes.Equal(data, s.last) {
		return nil
	}
	logger := klog.FromContext(ctx)
	pods, err := manifest.ParseList(data, manifest.Options{
		NodeName: s.cfg.NodeName,
		Origin:   s.cfg.URL,
		Source:   SourceName,
		Seen:     s.cfg.Clock.Now(),
		Warn: func(p manifest.Problem) {
			logger.Info("Static pod from URL has a warning", "warning", p.String())
		},
	})
	// As upstream, a body is decoded once: a bad one is not read again
	// until it changes.
	s.last = data
	if err != nil {
		return fmt.Errorf("static pods from %s: %w", s.cfg.URL, err)
	}
	s.deliver(pods)
	return nil
}

func (s *Source) fetch(ctx context.Context) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, err := nethttp.NewRequestWithContext(ctx, nethttp.MethodGet, s.cfg.URL, nil)
	if err != nil {
		return nil, fmt.Errorf("static pod URL %q: %w", s.cfg.URL, err)
	}
	for k, vs := range s.cfg.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := s.cfg.Client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("static pod URL: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBodySize+1))
	if err != nil {
		return nil, fmt.Errorf("static pod URL %s: reading the body: %w", s.cfg.URL, err)
	}
	if len(data) > maxBodySize {
		return nil, fmt.Errorf("static pod URL %s: %w", s.cfg.URL, errTooLarge)
	}
	if resp.StatusCode != nethttp.StatusOK {
		return nil, fmt.Errorf("static pod URL %s: %s", s.cfg.URL, resp.Status)
	}
	return data, nil
}

var errTooLarge = errors.New("the body is larger than 10 MiB")

// deliver hands pods to the sink on the first delivery and whenever the
// set of UIDs changed; a pod whose content is unchanged keeps its first
// config.seen time.
func (s *Source) deliver(pods []*v1.Pod) {
	uids := make([]types.UID, 0, len(pods))
	next := make(map[types.UID]*v1.Pod, len(pods))
	out := make([]*v1.Pod, 0, len(pods))
	for _, p := range pods {
		if prev, ok := s.pods[p.UID]; ok {
			p = prev
		}
		if _, dup := next[p.UID]; dup {
			continue
		}
		next[p.UID] = p
		uids = append(uids, p.UID)
		out = append(out, p.DeepCopy())
	}
	s.pods = next
	if s.sent && slices.Equal(uids, s.delivered) {
		return
	}
	s.sent, s.delivered = true, uids
	s.cfg.Sink(out)
}
