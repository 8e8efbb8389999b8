// Package nodepage serves heartlet's live node page: an HTML page a person
// reads instead of `kubectl describe node`: the node's conditions,
// allocatable against requested and used resources, every pod with its
// containers (state, restarts, probe results) and its latest journal
// entries, CPU and memory sparklines over the last minutes, the latest
// decisions on the node and heartlet's own loop health.
//
// The page is rendered on the server with html/template and has no
// external assets; a few lines of script fetch its body again every few
// seconds, so it updates itself. Like internal/server, it depends only on
// function types and small interfaces.
package nodepage

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"

	"github.com/heartlet/heartlet/internal/journal"
)

// Paths of the page and of its body, which the page fetches to update
// itself (relative to the page, so that it also works behind the API
// server's node proxy).
const (
	PagePath = "GET /node"
	BodyPath = "GET /node/body"
)

// Defaults of Options.
const (
	DefaultSampleEvery = 10 * time.Second
	DefaultSamples     = 36 // six minutes at one sample every 10 s
	// DefaultRefresh is how often the page fetches its body.
	DefaultRefresh = 5 * time.Second
	// journalLines is the number of journal entries shown per pod.
	journalLines = 5
	// latestLines is the number of latest decisions shown for the node.
	latestLines = 15
	// eventLines is the number of events shown.
	eventLines = 15
)

// SummaryProvider returns the node's stats summary (stats.Provider);
// onlyCPUAndMemory limits it to CPU and memory.
//
// Contract: safe for concurrent use; honours ctx.
type SummaryProvider interface {
	Summary(ctx context.Context, onlyCPUAndMemory bool) (*statsapi.Summary, error)
}

// Check is one line of heartlet's loop health: a name, what was found,
// and whether it is healthy.
type Check struct {
	Name  string
	Value string
	OK    bool
}

// Options are what the page reads. Every function may be nil: what it
// would show is then left out or shown as unknown.
type Options struct {
	// NodeName is the node's name.
	NodeName string
	// Node is the Node object heartlet last wrote (cluster mode).
	Node func() *v1.Node
	// Allocatable is the node's allocatable resources.
	Allocatable func() v1.ResourceList
	// Pods are the pods heartlet manages, with their statuses.
	Pods func() []*v1.Pod
	// Journal returns up to n of a pod's newest journal entries.
	Journal func(uid types.UID, n int) []journal.Entry
	// Stats is sampled every SampleEvery for the sparklines.
	Stats SummaryProvider
	// Events returns up to n of the newest events heartlet recorded
	// (EventLog.Latest); nil in standalone mode, where none are recorded.
	Events func(n int) []Event
	// Health is heartlet's loop health (PLEG relist, pod workers, ...).
	Health func() []Check
	// Clock paces the sampling and dates the page; the real clock when nil.
	Clock clock.WithTicker
	// SampleEvery and Samples size the sparklines; Refresh is how often
	// the page updates itself. Zero values are the defaults.
	SampleEvery time.Duration
	Samples     int
	Refresh     time.Duration
}

// Page is the node page and its sampler.
type Page struct {
	opts    Options
	samples *samples
}

// New returns the page; nothing is sampled until Run.
func New(opts Options) *Page {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.SampleEvery <= 0 {
		opts.SampleEvery = DefaultSampleEvery
	}
	if opts.Samples <= 0 {
		opts.Samples = DefaultSamples
	}
	if opts.Refresh <= 0 {
		opts.Refresh = DefaultRefresh
	}
	return &Page{opts: opts, samples: newSamples(opts.Samples)}
}

// Run samples the stats at once and then every SampleEvery until ctx is
// done. A failed sample is logged and skipped.
func (p *Page) Run(ctx context.Context) error {
	if p.opts.Stats == nil {
		<-ctx.Done()
		return nil
	}
	t := p.opts.Clock.NewTicker(p.opts.SampleEvery)
	defer t.Stop()
	for {
		p.Sample(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
	}
}

// Sample takes one sample of the stats.
func (p *Page) Sample(ctx context.Context) {
	if p.opts.Stats == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, sampleTimeout)
	defer cancel()
	if err := sample(ctx, p.opts.Stats, p.samples); err != nil {
		klog.FromContext(ctx).V(2).Info("Node page sample failed", "err", err)
	}
}

// Handlers are the page's handlers by pattern (PagePath, BodyPath).
func (p *Page) Handlers() map[string]http.Handler {
	return map[string]http.Handler{
		PagePath: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { p.serve(w, r, "page") }),
		BodyPath: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { p.serve(w, r, "body") }),
	}
}

// serve renders one template of the page, with a fresh script nonce and a
// content security policy that allows nothing else: no external asset, no
// inline script but the page's own.
func (p *Page) serve(w http.ResponseWriter, r *http.Request, name string) {
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	v := p.view()
	v.Nonce = base64.RawURLEncoding.EncodeToString(nonce)
	var buf bytes.Buffer
	if err := pageTemplate.ExecuteTemplate(&buf, name, v); err != nil {
		klog.FromContext(r.Context()).Error(err, "Failed to render the node page")
		http.Error(w, "internal server error: render the node page", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; script-src 'nonce-"+v.Nonce+"'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	_, _ = w.Write(buf.Bytes())
}
