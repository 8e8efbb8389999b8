package csi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"

	"github.com/heartlet/heartlet/internal/kubeapi"
	"github.com/heartlet/heartlet/internal/podconfig"
	"github.com/heartlet/heartlet/internal/volume"
)

// KubeClient is the API groups the CSI node side reads and writes: a clientset (kubeclient's, or client-go's fake in
// tests).
type KubeClient interface {
	CoreV1() kubeapi.CoreV1Interface
	StorageV1() kubeapi.StorageV1Interface
}

// Upstream's names.
const (
	// PluginDir is the directory of CSI volumes below a pod's volumes.
	PluginDir = "kubernetes.io~csi"
	// volDataFile records a staged or published volume.
	volDataFile = "vol_data.json"
	// globalMount is the staging target below the volume's staging dir.
	globalMount = "globalmount"

	keyPodName        = "csi.storage.k8s.io/pod.name"
	keyPodNamespace   = "csi.storage.k8s.io/pod.namespace"
	keyPodUID         = "csi.storage.k8s.io/pod.uid"
	keyServiceAccount = "csi.storage.k8s.io/serviceAccount.name"
	keyEphemeral      = "csi.storage.k8s.io/ephemeral"
	keyTokens         = "csi.storage.k8s.io/serviceAccount.tokens"

	modePersistent = "Persistent"
	modeEphemeral  = "Ephemeral"
)

// ErrNotAttached reports a volume whose VolumeAttachment is missing or not
// attached yet; it is reported as FailedAttachVolume (see AttachError).
var ErrNotAttached = errors.New("volume is not attached to the node")

// AttachError is the error of a volume that is not attached: errors.Is
// finds ErrNotAttached, and its EventReason is upstream's
// FailedAttachVolume.
type AttachError struct{ Msg string }

func (e *AttachError) Error() string       { return e.Msg + ": " + ErrNotAttached.Error() }
func (e *AttachError) Unwrap() error       { return ErrNotAttached }
func (e *AttachError) EventReason() string { return "FailedAttachVolume" }

// TokenRequester requests service account tokens for the drivers that ask
// for them (CSIDriver tokenRequests); volume.Getter is one.
type TokenRequester interface {
	RequestToken(ctx context.Context, namespace, serviceAccount string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error)
}

// PublisherOptions configures a Publisher.
type PublisherOptions struct {
	// RootDir is the kubelet root directory.
	RootDir string
	// NodeName is this node's name (VolumeAttachment names, vol_data.json).
	NodeName string
	// Drivers are the registered drivers.
	Drivers *Drivers
	// Kube reads CSIDriver objects, VolumeAttachments and secrets; nil in
	// standalone mode, where every CSI volume fails with volume.ErrNoAPI.
	Kube KubeClient
	// Tokens requests tokens for tokenRequests; nil refuses such drivers.
	Tokens TokenRequester
	// StatsPeriod is how often RunStats reads the volumes' stats from
	// their drivers (volumeStatsAggPeriod); zero or negative: never.
	StatsPeriod time.Duration
	// Clock paces RunStats, stamps the stats and times republications
	// (requiresRepublish); default the real clock.
	Clock clock.WithTicker
	// Events records the events of volume expansion (expand.go); nil: none.
	Events EventRecorder
	// RepublishInterval is the least time between two publications of a
	// volume whose driver requires republishing (see republish.go).
	// Default DefaultRepublishInterval.
	RepublishInterval time.Duration
}

// EventRecorder records events about an object; it must not block.
type EventRecorder interface {
	Event(object runtime.Object, eventtype, reason, message string)
}

// Publisher stages and publishes CSI volumes for pods; it is the
// volume.Plugin of inline CSI volumes and the pvc.CSIPublisher of CSI
// persistent volumes. The operations on one volume (stage, publish,
// unpublish, unstage) are serialized by its lock (locks.go), those on
// different volumes run concurrently; safe for concurrent use.
type Publisher struct {
	opts  PublisherOptions
	locks volumeLocks

	// mu guards the maps; it is never held across a driver call.
	mu        sync.Mutex
	staged    map[string]bool          // driver/handle
	published map[string]volData       // uid/name
	repub     map[string]*republishing // uid/name
	// reportedAs are the pod volumes the filesystem publications are
	// reported under in stats (stats.go), by uid/name.
	reportedAs map[string]podVolume

	statsMu sync.Mutex
	stats   map[string]*statsapi.VolumeStats // uid/name; RunStats's last read
	// afterStats, if set, is called after every read of the stats (tests).
	afterStats func()

	expand expandState // expand.go
}

var _ volume.Plugin = (*Publisher)(nil)

// NewPublisher returns a Publisher; it has no side effects.
func NewPublisher(opts PublisherOptions) *Publisher {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.RepublishInterval <= 0 {
		opts.RepublishInterval = DefaultRepublishInterval
	}
	return &Publisher{opts: opts, staged: map[string]bool{}, published: map[string]volData{}, repub: map[string]*republishing{},
		reportedAs: map[string]podVolume{}}
}

// volData is upstream's vol_data.json.
type volData struct {
	SpecVolID           string `json:"specVolID,omitempty"`
	VolumeHandle        string `json:"volumeHandle"`
	DriverName          string `json:"driverName"`
	NodeName            string `json:"nodeName,omitempty"`
	AttachmentID        string `json:"attachmentID,omitempty"`
	VolumeLifecycleMode string `json:"volumeLifecycleMode,omitempty"`
}

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// StagingDir is the directory of a staged volume (its globalmount and
// vol_data.json).
func (p *Publisher) StagingDir(driver, handle string) string {
	return filepath.Join(p.opts.RootDir, "plugins", "kubernetes.io", "csi", driver, sha(handle))
}

// PublishDir is the directory of a pod's published volume (its mount and
// vol_data.json).
func (p *Publisher) PublishDir(uid types.UID, name string) string {
	return filepath.Join(p.opts.RootDir, "pods", string(uid), "volumes", PluginDir, name)
}

// AttachmentName is the VolumeAttachment name the attach-detach controller
// uses for a volume on a node.
func AttachmentName(handle, driver, node string) string {
	return "csi-" + sha(handle+driver+node)
}

// Handles implements volume.Plugin: inline CSI volumes.
func (p *Publisher) Handles(v *v1.Volume) bool { return v.CSI != nil }

// request is one publication to make.
type request struct {
	name       string // the directory name below kubernetes.io~csi
	driver     string
	handle     string
	mode       string
	readOnly   bool
	fsType     string
	accessMode csipb.VolumeCapability_AccessMode_Mode
	attrs      map[string]string
	pubCtx     map[string]string
	stageRef   *v1.SecretReference
	publishRef *v1.SecretReference
	mountFlags []string
	attachID   string
	rwoOnly    bool // the volume's access modes allow one node only
}

// SetUp implements volume.Plugin for an inline (ephemeral) CSI volume.
func (p *Publisher) SetUp(ctx context.Context, pod *v1.Pod, v *v1.Volume) (volume.Mounted, error) {
	if err := p.needAPI(pod); err != nil {
		return volume.Mounted{}, err
	}
	src := v.CSI
	build := func(ctx context.Context) (request, *storagev1.CSIDriver, error) { return p.inlineRequest(ctx, pod, v) }
	if m, ok := p.alreadyPublished(pod, v.Name, src.ReadOnly != nil && *src.ReadOnly); ok {
		p.remember(pod, v.Name, v)
		p.republishIfDue(ctx, pod, v.Name, false, build)
		return m, nil
	}
	req, cd, err := build(ctx)
	if err != nil {
		return volume.Mounted{}, err
	}
	m, err := p.publish(ctx, pod, cd, req)
	if err == nil {
		p.remember(pod, v.Name, v)
	}
	return m, err
}

// inlineRequest is the publication of an inline CSI volume: its driver
// must be registered and support ephemeral volumes.
func (p *Publisher) inlineRequest(ctx context.Context, pod *v1.Pod, v *v1.Volume) (request, *storagev1.CSIDriver, error) {
	src := v.CSI
	if _, err := p.opts.Drivers.get(src.Driver); err != nil {
		return request{}, nil, err
	}
	cd, err := p.csiDriver(ctx, src.Driver)
	if err != nil {
		return request{}, nil, err
	}
	if cd == nil || !hasMode(cd, storagev1.VolumeLifecycleEphemeral) {
		return request{}, nil, fmt.Errorf("CSI driver %q does not support inline ephemeral volumes (its CSIDriver object does not list volumeLifecycleModes Ephemeral)", src.Driver)
	}
	req := request{
		name: v.Name, driver: src.Driver, handle: "csi-" + sha(string(pod.UID)+v.Name), mode: modeEphemeral,
		readOnly: src.ReadOnly != nil && *src.ReadOnly, accessMode: csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER,
		attrs: src.VolumeAttributes, rwoOnly: true,
	}
	if src.FSType != nil {
		req.fsType = *src.FSType
	}
	if src.NodePublishSecretRef != nil {
		req.publishRef = &v1.SecretReference{Namespace: pod.Namespace, Name: src.NodePublishSecretRef.Name}
	}
	return req, cd, nil
}

// SetUpPersistent implements pvc.CSIPublisher: waits for the attachment
// when the driver needs one, stages the volume once per node when the
// driver stages, and publishes it for the pod.
func (p *Publisher) SetUpPersistent(ctx context.Context, pod *v1.Pod, v *v1.Volume, pv *v1.PersistentVolume, readOnly bool) (volume.Mounted, error) {
	if err := p.needAPI(pod); err != nil {
		return volume.Mounted{}, err
	}
	if m, ok := p.alreadyPublished(pod, pv.Name, readOnly); ok {
		p.remember(pod, pv.Name, v)
		p.republishIfDue(ctx, pod, pv.Name, false, func(ctx context.Context) (request, *storagev1.CSIDriver, error) {
			return p.persistentRequest(ctx, pv, readOnly)
		})
		return m, nil
	}
	req, cd, err := p.persistentRequest(ctx, pv, readOnly)
	if err != nil {
		return volume.Mounted{}, err
	}
	m, err := p.publish(ctx, pod, cd, req)
	if err == nil {
		p.remember(pod, pv.Name, v)
		p.expand.mark(string(pod.UID) + "/" + pv.Name)
	}
	return m, err
}

// persistentRequest is the publication of a CSI persistent volume: its
// driver must be registered and support persistent volumes, and its
// VolumeAttachment must be attached when the driver needs one.
func (p *Publisher) persistentRequest(ctx context.Context, pv *v1.PersistentVolume, readOnly bool) (request, *storagev1.CSIDriver, error) {
	src := pv.Spec.CSI
	if _, err := p.opts.Drivers.get(src.Driver); err != nil {
		return request{}, nil, err
	}
	cd, err := p.csiDriver(ctx, src.Driver)
	if err != nil {
		return request{}, nil, err
	}
	if cd != nil && !hasMode(cd, storagev1.VolumeLifecyclePersistent) {
		return request{}, nil, fmt.Errorf("CSI driver %q does not support persistent volumes (its CSIDriver object does not list volumeLifecycleModes Persistent)", src.Driver)
	}
	req := request{
		name: pv.Name, driver: src.Driver, handle: src.VolumeHandle, mode: modePersistent, readOnly: readOnly,
		fsType: src.FSType, accessMode: accessMode(pv.Spec.AccessModes), attrs: src.VolumeAttributes,
		stageRef: src.NodeStageSecretRef, publishRef: src.NodePublishSecretRef, mountFlags: pv.Spec.MountOptions,
		rwoOnly: rwoOnly(pv.Spec.AccessModes),
	}
	// Without a CSIDriver object a driver is taken to need attaching, as
	// upstream.
	if cd == nil || cd.Spec.AttachRequired == nil || *cd.Spec.AttachRequired {
		req.attachID = AttachmentName(src.VolumeHandle, src.Driver, p.opts.NodeName)
		va, err := p.opts.Kube.StorageV1().VolumeAttachments().Get(ctx, req.attachID, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return request{}, nil, &AttachError{Msg: fmt.Sprintf("volume %q: VolumeAttachment %s does not exist yet", pv.Name, req.attachID)}
		}
		if err != nil {
			return request{}, nil, fmt.Errorf("get VolumeAttachment %s: %w", req.attachID, err)
		}
		if !va.Status.Attached {
			msg := "not attached yet"
			if e := va.Status.AttachError; e != nil {
				msg = "attach failed: " + e.Message
			}
			return request{}, nil, &AttachError{Msg: fmt.Sprintf("volume %q: VolumeAttachment %s %s", pv.Name, req.attachID, msg)}
		}
		if err := p.attachedInNodeStatus(ctx, pv.Name, src.Driver, src.VolumeHandle); err != nil {
			return request{}, nil, err
		}
		req.pubCtx = va.Status.AttachmentMetadata
	}
	return req, cd, nil
}

// alreadyPublished returns the volume of a publication made earlier (or
// reconstructed after a restart), which needs neither the driver nor the
// API again; its ownership was applied when it was made.
func (p *Publisher) alreadyPublished(pod *v1.Pod, name string, readOnly bool) (volume.Mounted, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.published[string(pod.UID)+"/"+name]; !ok {
		return volume.Mounted{}, false
	}
	return volume.Mounted{HostPath: filepath.Join(p.PublishDir(pod.UID, name), "mount"), ReadOnly: readOnly}, true
}

func (p *Publisher) needAPI(pod *v1.Pod) error {
	if p.opts.Kube == nil || podconfig.IsStatic(pod) {
		return fmt.Errorf("csi volume: %w", volume.ErrNoAPI)
	}
	return nil
}

// csiDriver returns the driver's CSIDriver object, nil when there is none.
func (p *Publisher) csiDriver(ctx context.Context, name string) (*storagev1.CSIDriver, error) {
	cd, err := p.opts.Kube.StorageV1().CSIDrivers().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get CSIDriver %s: %w", name, err)
	}
	return cd, nil
}

func hasMode(cd *storagev1.CSIDriver, mode storagev1.VolumeLifecycleMode) bool {
	modes := cd.Spec.VolumeLifecycleModes
	if len(modes) == 0 {
		return mode == storagev1.VolumeLifecyclePersistent
	}
	for _, m := range modes {
		if m == mode {
			return true
		}
	}
	return false
}

func rwoOnly(modes []v1.PersistentVolumeAccessMode) bool {
	for _, m := range modes {
		if m != v1.ReadWriteOnce && m != v1.ReadWriteOncePod {
			return false
		}
	}
	return len(modes) > 0
}

// accessMode maps the PV's access modes to the CSI one, as upstream.
func accessMode(modes []v1.PersistentVolumeAccessMode) csipb.VolumeCapability_AccessMode_Mode {
	has := func(want v1.PersistentVolumeAccessMode) bool {
		for _, m := range modes {
			if m == want {
				return true
			}
		}
		return false
	}
	switch {
	case has(v1.ReadWriteMany):
		return csipb.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER
	case has(v1.ReadOnlyMany):
		return csipb.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
	case has(v1.ReadWriteOncePod):
		return csipb.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER
	}
	return csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
}

// ownership decides, by the driver's fsGroupPolicy, whether heartlet
// gives the volume to the pod's fsGroup.
func ownership(cd *storagev1.CSIDriver, req request) bool {
	policy := storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy
	if cd != nil && cd.Spec.FSGroupPolicy != nil {
		policy = *cd.Spec.FSGroupPolicy
	}
	switch policy {
	case storagev1.FileFSGroupPolicy:
		return true
	case storagev1.NoneFSGroupPolicy:
		return false
	}
	return req.fsType != "" && req.rwoOnly
}

// podFSGroup is the pod's fsGroup as a decimal string, "" without one.
func podFSGroup(pod *v1.Pod) string {
	if sc := pod.Spec.SecurityContext; sc != nil && sc.FSGroup != nil {
		return strconv.FormatInt(*sc.FSGroup, 10)
	}
	return ""
}

func policyNone(cd *storagev1.CSIDriver) bool {
	return cd != nil && cd.Spec.FSGroupPolicy != nil && *cd.Spec.FSGroupPolicy == storagev1.NoneFSGroupPolicy
}

// publish stages (when the driver stages) and publishes req for pod.
func (p *Publisher) publish(ctx context.Context, pod *v1.Pod, cd *storagev1.CSIDriver, req request) (volume.Mounted, error) {
	drv, err := p.opts.Drivers.get(req.driver)
	if err != nil {
		return volume.Mounted{}, err
	}
	dir := p.PublishDir(pod.UID, req.name)
	target := filepath.Join(dir, "mount")
	mounted := volume.Mounted{HostPath: target, ReadOnly: req.readOnly, Ownership: ownership(cd, req)}
	capability := mountCapability(drv, pod, cd, req)
	if capability.GetMount().GetVolumeMountGroup() != "" {
		mounted.Ownership = false
	}
	key := string(pod.UID) + "/" + req.name

	defer p.locks.lock(req.driver, req.handle)()
	if p.isPublished(key) {
		return mounted, nil
	}
	stageSecrets, err := p.secrets(ctx, req.stageRef)
	if err != nil {
		return volume.Mounted{}, err
	}
	publishSecrets, err := p.secrets(ctx, req.publishRef)
	if err != nil {
		return volume.Mounted{}, err
	}
	if _, err := volume.MakePodDir(p.opts.RootDir, pod.UID, "volumes", PluginDir); err != nil {
		return volume.Mounted{}, err
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return volume.Mounted{}, fmt.Errorf("create %s: %w", dir, err)
	}
	// Recorded before staging and publishing, so that what fails half-way
	// is still unpublished and unstaged when the pod goes.
	vd := volData{
		SpecVolID: req.name, VolumeHandle: req.handle, DriverName: req.driver, NodeName: p.opts.NodeName,
		AttachmentID: req.attachID, VolumeLifecycleMode: req.mode,
	}
	if err := writeVolData(dir, vd); err != nil {
		return volume.Mounted{}, err
	}
	staging := p.mountStaging(drv, req)
	if staging != "" {
		if err := p.stage(ctx, drv, req, staging, capability, stageSecrets); err != nil {
			return volume.Mounted{}, err
		}
	}
	volCtx, err := p.volumeContext(ctx, pod, cd, req)
	if err != nil {
		return volume.Mounted{}, err
	}
	_, err = drv.client.NodePublishVolume(ctx, &csipb.NodePublishVolumeRequest{
		VolumeId: req.handle, PublishContext: req.pubCtx, StagingTargetPath: staging, TargetPath: target,
		VolumeCapability: capability, Readonly: req.readOnly, Secrets: publishSecrets, VolumeContext: volCtx,
	})
	if err != nil {
		return volume.Mounted{}, fmt.Errorf("NodePublishVolume of volume %q (driver %s): %w", req.name, req.driver, err)
	}
	p.markPublished(key, vd, cd, req)
	klog.FromContext(ctx).V(2).Info("CSI volume published", "pod", klog.KObj(pod), "podUID", pod.UID, "volume", req.name, "driver", req.driver)
	return mounted, nil
}

// stage stages the volume unless it is staged already. The volume's lock
// is held.
func (p *Publisher) stage(ctx context.Context, drv *driver, req request, staging string, capability *csipb.VolumeCapability, secrets map[string]string) error {
	key := req.driver + "/" + req.handle
	if p.isStaged(key) {
		return nil
	}
	if err := os.MkdirAll(staging, 0o750); err != nil {
		return fmt.Errorf("create staging directory %s: %w", staging, err)
	}
	if err := writeVolData(filepath.Dir(staging), volData{VolumeHandle: req.handle, DriverName: req.driver}); err != nil {
		return err
	}
	_, err := drv.client.NodeStageVolume(ctx, &csipb.NodeStageVolumeRequest{
		VolumeId: req.handle, PublishContext: req.pubCtx, StagingTargetPath: staging,
		VolumeCapability: capability, Secrets: secrets, VolumeContext: req.attrs,
	})
	if err != nil {
		return fmt.Errorf("NodeStageVolume of volume %q (driver %s): %w", req.name, req.driver, err)
	}
	p.setStaged(key, true)
	return nil
}

// volumeContext is the volume's attributes plus the pod's information
// (podInfoOnMount) and tokens (tokenRequests).
func (p *Publisher) volumeContext(ctx context.Context, pod *v1.Pod, cd *storagev1.CSIDriver, req request) (map[string]string, error) {
	out := map[string]string{}
	for k, v := range req.attrs {
		out[k] = v
	}
	if cd == nil {
		return out, nil
	}
	if cd.Spec.PodInfoOnMount != nil && *cd.Spec.PodInfoOnMount {
		out[keyPodName] = pod.Name
		out[keyPodNamespace] = pod.Namespace
		out[keyPodUID] = string(pod.UID)
		out[keyServiceAccount] = pod.Spec.ServiceAccountName
		out[keyEphemeral] = fmt.Sprint(req.mode == modeEphemeral)
	}
	if len(cd.Spec.TokenRequests) > 0 {
		if p.opts.Tokens == nil {
			return nil, fmt.Errorf("CSI driver %q asks for service account tokens: %w", cd.Name, volume.ErrNoAPI)
		}
		type token struct {
			Token               string      `json:"token"`
			ExpirationTimestamp metav1.Time `json:"expirationTimestamp"`
		}
		tokens := map[string]token{}
		for _, tr := range cd.Spec.TokenRequests {
			treq := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
				Audiences:         []string{tr.Audience},
				ExpirationSeconds: tr.ExpirationSeconds,
				BoundObjectRef:    &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID},
			}}
			got, err := p.opts.Tokens.RequestToken(ctx, pod.Namespace, pod.Spec.ServiceAccountName, treq)
			if err != nil {
				return nil, fmt.Errorf("request token for CSI driver %q, audience %q: %w", cd.Name, tr.Audience, err)
			}
			tokens[tr.Audience] = token{Token: got.Status.Token, ExpirationTimestamp: got.Status.ExpirationTimestamp}
		}
		b, err := json.Marshal(tokens)
		if err != nil {
			return nil, fmt.Errorf("encode tokens: %w", err)
		}
		out[keyTokens] = string(b)
	}
	return out, nil
}

// secrets reads a secret's data for a driver call.
func (p *Publisher) secrets(ctx context.Context, ref *v1.SecretReference) (map[string]string, error) {
	if ref == nil || ref.Name == "" {
		return nil, nil
	}
	s, err := p.opts.Kube.CoreV1().Secrets(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get secret %s/%s for the CSI driver: %w", ref.Namespace, ref.Name, err)
	}
	out := make(map[string]string, len(s.Data))
	for k, v := range s.Data {
		out[k] = string(v)
	}
	return out, nil
}

func writeVolData(dir string, d volData) error {
	b, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("encode %s: %w", volDataFile, err)
	}
	tmp := filepath.Join(dir, "."+volDataFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", volDataFile, err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, volDataFile)); err != nil {
		return fmt.Errorf("write %s: %w", volDataFile, err)
	}
	return nil
}

func readVolData(dir string) (volData, error) {
	b, err := os.ReadFile(filepath.Join(dir, volDataFile))
	if err != nil {
		return volData{}, err
	}
	d, err := parseVolData(b)
	if err != nil {
		return d, fmt.Errorf("%s in %s: %w", volDataFile, dir, err)
	}
	return d, nil
}

// parseVolData decodes and checks a vol_data.json: it must name a volume
// and a driver whose name is valid (it becomes a directory name).
func parseVolData(b []byte) (volData, error) {
	var d volData
	if err := json.Unmarshal(b, &d); err != nil {
		return volData{}, err
	}
	if d.VolumeHandle == "" {
		return volData{}, errors.New("no volume handle")
	}
	if err := ValidDriverName(d.DriverName); err != nil {
		return volData{}, err
	}
	return d, nil
}

// podVolumes reads the vol_data.json of every CSI volume of a pod, by
// directory.
func (p *Publisher) podVolumes(uid types.UID) (map[string]volData, error) {
	base := filepath.Join(p.opts.RootDir, "pods", string(uid), "volumes", PluginDir)
	entries, err := os.ReadDir(base)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list CSI volumes of pod %s: %w", uid, err)
	}
	out := map[string]volData{}
	var errs []error
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		d, err := readVolData(filepath.Join(base, e.Name()))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out[e.Name()] = d
	}
	return out, errors.Join(errs...)
}

// Reconstruct implements volume.Plugin: it remembers the publications and
// stagings found on disk for the pod (raw block ones too, block.go), so
// that they are not made again.
func (p *Publisher) Reconstruct(ctx context.Context, pod *v1.Pod) error {
	vols, err := p.podVolumes(pod.UID)
	p.mu.Lock()
	defer p.mu.Unlock()
	for name, d := range vols {
		p.published[string(pod.UID)+"/"+name] = d
		if _, err := readVolData(p.StagingDir(d.DriverName, d.VolumeHandle)); err == nil {
			p.staged[d.DriverName+"/"+d.VolumeHandle] = true
		}
		klog.FromContext(ctx).V(2).Info("Reconstructed CSI volume", "pod", klog.KObj(pod), "podUID", pod.UID, "volume", name, "driver", d.DriverName)
	}
	return errors.Join(err, p.reconstructBlock(ctx, pod))
}

// TearDown implements volume.Plugin: it unpublishes every CSI volume of
// the pod found on disk, then unstages each one no other pod's directory
// still names; the same for its raw block volumes (block.go).
func (p *Publisher) TearDown(ctx context.Context, uid types.UID) error {
	vols, err := p.podVolumes(uid)
	if err != nil {
		return err
	}
	var errs []error
	for name, d := range vols {
		errs = append(errs, p.tearDownVolume(ctx, p.mountKind(), uid, name, d))
	}
	errs = append(errs, p.tearDownBlock(ctx, uid))
	return errors.Join(errs...)
}

// mountKind is the layout of filesystem volumes: published below the
// pod's volumes, staged in StagingDir with a vol_data.json.
func (p *Publisher) mountKind() volumeKind {
	return volumeKind{
		unpublish: p.unpublish,
		staging: func(_ string, d volData) (string, bool, []string) {
			dir := p.StagingDir(d.DriverName, d.VolumeHandle)
			if _, err := readVolData(dir); errors.Is(err, fs.ErrNotExist) {
				return "", false, nil // not staged (ephemeral, or a driver that does not stage)
			}
			staging := filepath.Join(dir, globalMount)
			return staging, true, []string{staging, filepath.Join(dir, volDataFile), dir}
		},
		uses: func(uid types.UID, _ string, d volData) (bool, error) {
			vols, err := p.podVolumes(uid)
			for _, o := range vols {
				if o.DriverName == d.DriverName && o.VolumeHandle == d.VolumeHandle {
					return true, nil
				}
			}
			return false, err
		},
	}
}

// unpublish unpublishes one volume of a pod and removes its record. The
// volume's lock is held.
func (p *Publisher) unpublish(ctx context.Context, uid types.UID, name string, d volData) error {
	drv, err := p.opts.Drivers.get(d.DriverName)
	if err != nil {
		return fmt.Errorf("unpublish volume %q: %w", name, err)
	}
	dir := p.PublishDir(uid, name)
	target := filepath.Join(dir, "mount")
	if _, err := drv.client.NodeUnpublishVolume(ctx, &csipb.NodeUnpublishVolumeRequest{VolumeId: d.VolumeHandle, TargetPath: target}); err != nil {
		return fmt.Errorf("NodeUnpublishVolume of volume %q (driver %s): %w", name, d.DriverName, err)
	}
	// What is left is removed only when the target is no longer a
	// directory with content (a driver that leaves a mount behind keeps it,
	// and Cleanup's unmount of what is left below the pod fails safely).
	if err := os.Remove(target); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove publish target %s: %w", target, err)
	}
	if err := os.Remove(filepath.Join(dir, volDataFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", volDataFile, err)
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	p.forgetPublished(string(uid) + "/" + name)
	klog.FromContext(ctx).V(2).Info("CSI volume unpublished", "podUID", uid, "volume", name, "driver", d.DriverName)
	return nil
}

// VolumesInUse lists the persistent CSI volumes published for pods, by
// upstream's unique volume name (kubernetes.io/csi/<driver>^<handle>), for
// the node's status.volumesInUse: the attach-detach controller does not
// detach a volume listed there.
func (p *Publisher) VolumesInUse() []v1.UniqueVolumeName {
	p.mu.Lock()
	defer p.mu.Unlock()
	seen := map[v1.UniqueVolumeName]bool{}
	var out []v1.UniqueVolumeName
	for _, d := range p.published {
		if d.VolumeLifecycleMode == modeEphemeral {
			continue
		}
		n := UniqueVolumeName(d.DriverName, d.VolumeHandle)
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}
