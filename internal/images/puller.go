// Package images holds the node-wide limits on image pulls, as the upstream
// kubelet's: pulls one at a time (serializeImagePulls) or at most
// maxParallelImagePulls at once, and a token bucket on pulls
// (registryPullQPS, registryBurst) whose refusals are pull failures.
package images

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/client-go/util/flowcontrol"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// ErrPullQPSExceeded is the error of a pull refused by the registry pull
// rate limit (registryPullQPS, registryBurst). As upstream, the pull is not
// retried here: it fails, and the caller's image pull backoff applies.
var ErrPullQPSExceeded = errors.New("pull QPS exceeded")

// Runtime pulls one image and returns the image reference the runtime
// resolved it to. It must be safe for concurrent use.
type Runtime interface {
	PullImage(ctx context.Context, image string, auth *runtimeapi.AuthConfig, sb *runtimeapi.PodSandboxConfig) (string, error)
}

// Options are the node's pull limits, from the kubelet configuration.
type Options struct {
	// Serialize allows one pull at a time node-wide (serializeImagePulls).
	Serialize bool
	// MaxParallel bounds the pulls in flight when Serialize is false
	// (maxParallelImagePulls); 0 means no bound.
	MaxParallel int
	// QPS and Burst are the token bucket every pull takes a token from
	// (registryPullQPS, registryBurst); QPS 0 means no limit.
	QPS   float32
	Burst int
	// Clock feeds the token bucket; nil means the real clock.
	Clock clock.PassiveClock
}

// Puller pulls images within the node's limits. It is safe for concurrent
// use.
type Puller struct {
	rt      Runtime
	slots   chan struct{} // one per pull in flight; nil: no bound
	limiter flowcontrol.PassiveRateLimiter
	clock   clock.PassiveClock
}

// NewPuller returns a Puller in front of rt. It starts nothing.
func NewPuller(rt Runtime, opts Options) *Puller {
	clk := opts.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	p := &Puller{rt: rt, clock: clk}
	switch {
	case opts.Serialize:
		p.slots = make(chan struct{}, 1)
	case opts.MaxParallel > 0:
		p.slots = make(chan struct{}, opts.MaxParallel)
	}
	if opts.QPS > 0 {
		p.limiter = flowcontrol.NewTokenBucketPassiveRateLimiterWithClock(opts.QPS, opts.Burst, clk)
	}
	return p
}

// PullImage waits until a pull may start (or ctx is done), takes a token
// from the rate limit, failing with ErrPullQPSExceeded when there is none,
// and pulls. It returns the image reference and how long the pull took
// once started, without the wait.
func (p *Puller) PullImage(ctx context.Context, image string, auth *runtimeapi.AuthConfig, sb *runtimeapi.PodSandboxConfig) (string, time.Duration, error) {
	if p.slots != nil {
		select {
		case p.slots <- struct{}{}:
			defer func() { <-p.slots }()
		case <-ctx.Done():
			return "", 0, fmt.Errorf("waiting to pull image %s: %w", image, context.Cause(ctx))
		}
	}
	if p.limiter != nil && !p.limiter.TryAccept() {
		return "", 0, ErrPullQPSExceeded
	}
	start := p.clock.Now()
	ref, err := p.rt.PullImage(ctx, image, auth, sb)
	return ref, p.clock.Since(start), err
}
