package images

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/distribution/reference"
	v1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/flowcontrol"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/heartlet/heartlet/internal/journal"
	"github.com/heartlet/heartlet/internal/metrics"
	"github.com/heartlet/heartlet/internal/podspec"
)

// The errors of EnsureImage: each failure wraps exactly one of them, and
// its text is the container's waiting reason, with upstream's spelling.
var (
	// ErrImagePull: the image could not be pulled (or its status read).
	ErrImagePull = errors.New("ErrImagePull")
	// ErrImagePullBackOff: an earlier pull of the image failed and the
	// pull backoff holds the next one.
	ErrImagePullBackOff = errors.New("ImagePullBackOff")
	// ErrImageNeverPull: the image is missing and the pull policy is Never.
	ErrImageNeverPull = errors.New("ErrImageNeverPull")
	// ErrInvalidImageName: the image is not a valid reference.
	ErrInvalidImageName = errors.New("InvalidImageName")
)

// Image pull backoff, as upstream: 10 s doubling to 5 min.
const (
	initialPullBackoff = 10 * time.Second
	maxPullBackoff     = 300 * time.Second
)

// ImageService is what the manager needs of the runtime's image service.
// It must be safe for concurrent use.
type ImageService interface {
	Runtime
	// ImageRef returns the image's ID when the runtime has it, "" and no
	// error when it does not.
	ImageRef(ctx context.Context, image string) (string, error)
	// ImageSize returns the image's size in bytes, 0 when unknown.
	ImageSize(ctx context.Context, image string) (uint64, error)
}

// Recorder records events about pods.
type Recorder interface {
	Eventf(object k8sruntime.Object, eventtype, reason, messageFmt string, args ...any)
}

// PullRecorder is told when the pulls of a pod start and end (pod startup
// latency). Calls for one pod come in pairs.
type PullRecorder interface {
	PullStarted(uid types.UID)
	PullFinished(uid types.UID)
}

// Credentials gives the credentials to try, in order, for pulling repo (a
// normalized repository without tag or digest, such as
// docker.io/library/busybox) for pod. Nil or empty means pull without
// credentials. It must be safe for concurrent use.
type Credentials interface {
	Lookup(ctx context.Context, pod *v1.Pod, repo string) []*runtimeapi.AuthConfig
}

// Journal records image decisions in the pod's journal (journal.Journal).
// Record must be safe for concurrent use and must not block.
type Journal interface {
	Record(uid types.UID, e journal.Entry)
}

// ManagerOptions configure a Manager.
type ManagerOptions struct {
	// Limits are the node-wide pull limits.
	Limits Options
	// Clock drives the pull backoff and durations; nil means the real one.
	Clock clock.Clock
	// Recorder records Pulling, Pulled, Failed, BackOff, ErrImageNeverPull
	// and InspectFailed events; nil records none.
	Recorder Recorder
	// Pulls is told when pulls start and end; nil tells no one.
	Pulls PullRecorder
	// Credentials gives the credentials of pulls; nil pulls without.
	Credentials Credentials
	// Journal records pulls, their failures and backoffs; nil records
	// none.
	Journal Journal
	// Ensured is told every image reference EnsureImage returns, so that
	// image garbage collection keeps it for the container about to use
	// it (GC.Ensured); nil tells no one.
	Ensured interface{ Ensured(ref string) }
}

// Manager makes a container's image present as its pull policy asks,
// within the node's pull limits, with the pod's credentials and an image
// pull backoff per pod and image. It is safe for concurrent use.
type Manager struct {
	is     ImageService
	puller *Puller
	opts   ManagerOptions
	clock  clock.Clock
	pulls  *flowcontrol.Backoff

	// mu guards failed: the last pull error per pod and backoff key, also
	// the index of the backoff entries to drop when the pod goes.
	mu     sync.Mutex
	failed map[types.UID]map[string]string
}

// NewManager returns a Manager pulling through is. It starts nothing.
func NewManager(is ImageService, opts ManagerOptions) *Manager {
	clk := opts.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	limits := opts.Limits
	if limits.Clock == nil {
		limits.Clock = clk
	}
	return &Manager{
		is:     is,
		puller: NewPuller(is, limits),
		opts:   opts,
		clock:  clk,
		pulls:  flowcontrol.NewFakeBackOff(initialPullBackoff, maxPullBackoff, clk),
		failed: map[types.UID]map[string]string{},
	}
}

// NormalizeImage returns image with upstream's default tag: a reference
// without tag or digest gets ":latest". A reference that does not parse is
// ErrInvalidImageName.
func NormalizeImage(image string) (string, error) {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return "", fmt.Errorf("couldn't parse image name %q: %w", image, err)
	}
	if _, tagged := named.(reference.Tagged); tagged {
		return image, nil
	}
	if _, digested := named.(reference.Digested); digested {
		return image, nil
	}
	return image + ":latest", nil
}

// Repository returns the normalized repository of image, without tag or
// digest (docker.io/library/busybox for busybox:1.35): what credentials
// are looked up by.
func Repository(image string) (string, error) {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return "", fmt.Errorf("couldn't parse image name %q: %w", image, err)
	}
	return named.Name(), nil
}

// reasonError is a failure of EnsureImage: its text is the message the
// status and the events show, and it wraps the reason and the cause.
type reasonError struct {
	reason error
	msg    string
	cause  error
}

func (e *reasonError) Error() string   { return e.msg }
func (e *reasonError) Unwrap() []error { return []error{e.reason, e.cause} }

func failure(reason error, cause error, format string, args ...any) error {
	return &reasonError{reason: reason, msg: fmt.Sprintf(format, args...), cause: cause}
}

// EnsureImage applies c's imagePullPolicy and returns the image reference
// to run: present images are used as they are (unless Always), missing
// ones are pulled unless Never. sb is the pod's sandbox configuration,
// passed to the runtime with the pull.
func (m *Manager) EnsureImage(ctx context.Context, pod *v1.Pod, c *v1.Container, sb *runtimeapi.PodSandboxConfig) (string, error) {
	logger := klog.FromContext(ctx).WithValues("container", c.Name)
	image, err := NormalizeImage(c.Image)
	if err != nil {
		msg := fmt.Sprintf("Failed to apply default image tag %q: %v", c.Image, err)
		m.event(pod, c.Name, v1.EventTypeWarning, "InspectFailed", "%s", msg)
		m.note(pod, journal.Entry{Kind: journal.KindImage, Container: c.Name, Reason: ErrInvalidImageName.Error(), Message: msg})
		return "", failure(ErrInvalidImageName, err, "%s", msg)
	}
	policy := c.ImagePullPolicy
	if policy != v1.PullAlways {
		ref, err := m.is.ImageRef(ctx, c.Image)
		if err != nil {
			return "", failure(ErrImagePull, err, "image status of %s: %v", c.Image, err)
		}
		if ref != "" {
			// As upstream without its re-verification of pull
			// credentials per pod (KubeletEnsureSecretPulledImages),
			// which heartlet does not do.
			m.event(pod, c.Name, v1.EventTypeNormal, "Pulled", "Container image %q already present on machine", c.Image)
			m.ensured(ref)
			return ref, nil
		}
		if policy == v1.PullNever {
			msg := fmt.Sprintf("Container image %q is not present with pull policy of Never", c.Image)
			m.event(pod, c.Name, v1.EventTypeWarning, ErrImageNeverPull.Error(), "%s", msg)
			m.note(pod, journal.Entry{Kind: journal.KindImage, Container: c.Name, Reason: ErrImageNeverPull.Error(), Message: msg})
			return "", failure(ErrImageNeverPull, nil, "%s", msg)
		}
	}
	key := string(pod.UID) + "_" + c.Image
	if m.pulls.IsInBackOffSinceUpdate(key, m.clock.Now()) {
		m.mu.Lock()
		last := m.failed[pod.UID][key]
		m.mu.Unlock()
		m.event(pod, c.Name, v1.EventTypeNormal, "BackOff", "Back-off pulling image %q", c.Image)
		err := failure(ErrImagePullBackOff, nil, "back-off pulling image %q: %s", c.Image, last)
		m.note(pod, journal.Entry{Kind: journal.KindBackoff, Container: c.Name, Reason: ErrImagePullBackOff.Error(), Message: err.Error()})
		return "", err
	}
	logger.Info("Pulling image", "image", c.Image)
	m.event(pod, c.Name, v1.EventTypeNormal, "Pulling", "Pulling image %q", c.Image)
	start := m.clock.Now()
	if m.opts.Pulls != nil {
		m.opts.Pulls.PullStarted(pod.UID)
	}
	ref, pulling, err := m.pull(ctx, pod, c.Image, image, sb)
	if m.opts.Pulls != nil {
		m.opts.Pulls.PullFinished(pod.UID)
	}
	if err != nil {
		m.pulls.Next(key, m.clock.Now())
		m.mu.Lock()
		if m.failed[pod.UID] == nil {
			m.failed[pod.UID] = map[string]string{}
		}
		m.failed[pod.UID][key] = err.Error()
		m.mu.Unlock()
		m.event(pod, c.Name, v1.EventTypeWarning, "Failed", "Failed to pull image %q: %v", c.Image, err)
		m.note(pod, journal.Entry{Kind: journal.KindImage, Container: c.Name, Reason: ErrImagePull.Error(), Message: fmt.Sprintf("pull of %q failed: %v", c.Image, err),
			Duration: m.clock.Since(start), NextRetry: m.clock.Now().Add(m.pulls.Get(key))})
		return "", failure(ErrImagePull, err, "pull image %q: %v", c.Image, err)
	}
	m.reset(pod.UID, key)
	took := m.clock.Since(start)
	size, err := m.is.ImageSize(ctx, ref)
	if err != nil {
		logger.V(2).Info("Image size unknown", "image", c.Image, "err", err)
	}
	metrics.ImagePullDuration.WithLabelValues(metrics.ImageSizeBucket(size)).Observe(took.Seconds())
	logger.Info("Pulled image", "image", c.Image, "duration", pulling, "durationWithWait", took, "size", size)
	m.event(pod, c.Name, v1.EventTypeNormal, "Pulled", "Successfully pulled image %q in %s (%s including waiting). Image size: %d bytes.",
		c.Image, pulling.Truncate(time.Millisecond), took.Truncate(time.Millisecond), size)
	m.note(pod, journal.Entry{Kind: journal.KindImage, Container: c.Name, Message: fmt.Sprintf("pulled %q (%d bytes, %s including waiting)", c.Image, size, took.Truncate(time.Millisecond)), Duration: pulling})
	m.ensured(ref)
	return ref, nil
}

// ensured tells image garbage collection that ref is about to be used.
func (m *Manager) ensured(ref string) {
	if m.opts.Ensured != nil {
		m.opts.Ensured.Ensured(ref)
	}
}

// pull pulls image (as the pod spells it) through the node's limits, with
// each matching credential in turn until one works, as upstream; without
// any, once with none. normalized is image with its default tag.
func (m *Manager) pull(ctx context.Context, pod *v1.Pod, image, normalized string, sb *runtimeapi.PodSandboxConfig) (string, time.Duration, error) {
	var creds []*runtimeapi.AuthConfig
	if m.opts.Credentials != nil {
		repo, err := Repository(normalized)
		if err != nil {
			return "", 0, err
		}
		creds = m.opts.Credentials.Lookup(ctx, pod, repo)
	}
	if len(creds) == 0 {
		return m.puller.PullImage(ctx, image, nil, sb)
	}
	var errs []error
	var total time.Duration
	for _, auth := range creds {
		ref, d, err := m.puller.PullImage(ctx, image, auth, sb)
		total += d
		if err == nil {
			return ref, total, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return "", total, errors.Join(errs...)
}

// reset drops the backoff and the last error of key, an entry of pod uid.
func (m *Manager) reset(uid types.UID, key string) {
	m.mu.Lock()
	if errs := m.failed[uid]; errs != nil {
		delete(errs, key)
		if len(errs) == 0 {
			delete(m.failed, uid)
		}
	}
	m.mu.Unlock()
	m.pulls.DeleteEntry(key)
}

// Forget drops the pull backoffs and errors kept for pod uid; a pod that
// is gone never pulls again.
func (m *Manager) Forget(uid types.UID) {
	m.mu.Lock()
	keys := m.failed[uid]
	delete(m.failed, uid)
	m.mu.Unlock()
	for k := range keys {
		m.pulls.DeleteEntry(k)
	}
}

// held is the number of pods with pull errors kept (for tests).
func (m *Manager) held() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.failed)
}

// note records e in the pod's journal when there is one.
func (m *Manager) note(pod *v1.Pod, e journal.Entry) {
	if m.opts.Journal != nil {
		m.opts.Journal.Record(pod.UID, e)
	}
}

// event records an event about the image of one of the pod's containers,
// on the pod with the container's field path, as upstream.
func (m *Manager) event(pod *v1.Pod, container, eventtype, reason, format string, args ...any) {
	if m.opts.Recorder != nil {
		m.opts.Recorder.Eventf(podspec.EventObject(pod, container), eventtype, reason, format, args...)
	}
}
