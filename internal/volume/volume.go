// Package volume sets up the volumes of the pods on this node and tells the
// runtime what to mount into each container.
//
// Every volume lives below <RootDir>/pods/<uid>/volumes/<plugin>/<name>
// with upstream's plugin directory names, except hostPath volumes, which
// are the host path itself. The directories above a volume, up to the root
// directory, are DataDirMode (0750), so other local users reach no volume
// (see MakePodDir):
//
//   - emptyDir: a directory (mode 0777) on disk, or a tmpfs mount for
//     medium Memory;
//   - configMap, secret, downwardAPI and projected: files written by the
//     atomic writer (see writeAtomic), re-read and rewritten by Run when
//     their source changes; secret and projected volumes sit on tmpfs so
//     their content never reaches the disk;
//   - hostPath: the type check of the volume.
//
// Prepare is idempotent and meant to run before every container start;
// Cleanup undoes everything and is safe without Prepare. With a pod
// fsGroup, these volumes belong to that group (see ownership): emptyDir
// when it is set up, the content volumes whenever they are written, both
// honouring fsGroupChangePolicy.
package volume

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/heartlet/heartlet/internal/podconfig"
)

// Plugin directory names below <RootDir>/pods/<uid>/volumes, as upstream.
const (
	PluginEmptyDir    = "kubernetes.io~empty-dir"
	PluginConfigMap   = "kubernetes.io~configmap"
	PluginSecret      = "kubernetes.io~secret"
	PluginProjected   = "kubernetes.io~projected"
	PluginDownwardAPI = "kubernetes.io~downward-api"
)

// Defaults of Options.
const (
	// DefaultRootDir is the RootDir when Options leaves it empty.
	DefaultRootDir = "/var/lib/kubelet"
	// DefaultRefreshPeriod is how often Run re-reads ConfigMaps and Secrets
	// (upstream's syncFrequency).
	DefaultRefreshPeriod = time.Minute
	// defaultMode is the file mode of configMap, secret, downwardAPI and
	// projected files when the pod does not set one.
	defaultMode = 0o644
	// emptyDirMode is the mode of emptyDir and content volume directories.
	emptyDirMode = 0o777
)

// Kinds in error messages.
const (
	kindConfigMap = "configmap"
	kindSecret    = "secret"
)

// contentRewriteGap is how long after a Prepare wrote a pod's content
// volumes another Prepare of the same pod object leaves them: the syncs of
// a starting pod come within it, its periodic syncs (syncFrequency) after.
const contentRewriteGap = 5 * time.Second

// Getter reads the API objects volumes and environment variables need.
// NewClientGetter adapts a clientset. Implementations return an error for
// which apierrors.IsNotFound or errors.Is(err, ErrMissingObject) holds when
// the object does not exist.
type Getter interface {
	GetConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error)
	GetSecret(ctx context.Context, namespace, name string) (*v1.Secret, error)
	RequestToken(ctx context.Context, namespace, serviceAccount string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error)
}

// Options configures a Manager.
type Options struct {
	// RootDir holds the pod directories: <RootDir>/pods/<uid>. Default
	// DefaultRootDir.
	RootDir string
	// Getter reads ConfigMaps and Secrets and requests tokens. Nil in
	// standalone mode: configMap, secret and service account token volumes
	// then fail with ErrNoAPI; emptyDir, hostPath and downwardAPI work.
	Getter Getter
	// Clock drives Run and token renewal. Default the real clock.
	Clock clock.WithTicker
	// NodeName is the node's name (spec.nodeName in subPathExpr).
	NodeName string
	// NodeIPs are the node's addresses (status.hostIP and status.hostIPs in
	// subPathExpr).
	NodeIPs []string
	// RefreshPeriod is how often Run re-reads ConfigMaps and Secrets and
	// checks tokens. Default DefaultRefreshPeriod.
	RefreshPeriod time.Duration
	// Mounter mounts tmpfs. Default NewSystemMounter().
	Mounter Mounter
	// Allocatable returns the node's allocatable resources, used for
	// downward API limits a container does not set and for the size of
	// memory-backed volumes. Optional.
	Allocatable func() v1.ResourceList
	// Plugins set up the volume kinds the Manager does not own (see
	// Plugin); a volume no plugin handles is refused with ErrUnsupported.
	Plugins []Plugin
}

// Manager sets up and tears down pod volumes. Its methods are safe for
// concurrent use; calls for one pod are serialized.
type Manager struct {
	opts    Options
	clk     clock.WithTicker
	mounter Mounter
	tokens  *tokenCache

	mu   sync.Mutex
	pods map[types.UID]*podState

	// afterRefresh, when set (tests), runs after each refresh pass of Run,
	// once the next tick is armed.
	afterRefresh func()
}

// podState is what the manager remembers of a prepared pod.
type podState struct {
	mu      sync.Mutex
	pod     *v1.Pod
	removed bool
	// mounted is where the plugins' volumes were set up, by volume name.
	mounted map[string]Mounted
	// contentPod is the pod object all of whose content volumes
	// (configMap, secret, downwardAPI, projected) Prepare wrote at
	// contentAt: for contentRewriteGap, a Prepare of the same object, such
	// as the next syncs of a starting pod, does not write them again; the
	// pod's periodic syncs do, as upstream's.
	contentPod *v1.Pod
	contentAt  time.Time
}

// New returns a Manager. It has no side effects.
func New(opts Options) *Manager {
	if opts.RootDir == "" {
		opts.RootDir = DefaultRootDir
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.RefreshPeriod <= 0 {
		opts.RefreshPeriod = DefaultRefreshPeriod
	}
	if opts.Mounter == nil {
		opts.Mounter = NewSystemMounter()
	}
	return &Manager{
		opts:    opts,
		clk:     opts.Clock,
		mounter: opts.Mounter,
		tokens:  newTokenCache(opts.Clock),
		pods:    map[types.UID]*podState{},
	}
}

// PodDir is the directory of a pod's volumes and other files:
// <RootDir>/pods/<uid>.
func (m *Manager) PodDir(uid types.UID) string {
	return filepath.Join(m.opts.RootDir, "pods", string(uid))
}

// PodDirs lists the UIDs that have a pod directory under <RootDir>/pods,
// whether or not the pod still exists anywhere.
func (m *Manager) PodDirs() ([]types.UID, error) {
	entries, err := os.ReadDir(filepath.Join(m.opts.RootDir, "pods"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list pod directories: %w", err)
	}
	var uids []types.UID
	for _, e := range entries {
		if e.IsDir() {
			uids = append(uids, types.UID(e.Name()))
		}
	}
	return uids, nil
}

// volumeDir is the directory of a volume of a plugin.
func (m *Manager) volumeDir(uid types.UID, plugin, name string) string {
	return filepath.Join(m.PodDir(uid), "volumes", plugin, name)
}

// acquire returns the locked state of a pod, creating it.
func (m *Manager) acquire(uid types.UID) *podState {
	for {
		m.mu.Lock()
		st := m.pods[uid]
		if st == nil {
			st = &podState{}
			m.pods[uid] = st
		}
		m.mu.Unlock()
		st.mu.Lock()
		if !st.removed {
			return st
		}
		st.mu.Unlock()
	}
}

// release drops a locked state from the manager.
func (m *Manager) release(uid types.UID, st *podState) {
	st.removed = true
	m.mu.Lock()
	if m.pods[uid] == st {
		delete(m.pods, uid)
	}
	m.mu.Unlock()
}

// Prepare sets up every volume of the pod. It is idempotent: it can run
// before every container start, creates what is missing, rewrites content
// only when it changed, and records the pod (its latest version) for Run.
// Each volume that fails contributes a *VolumeError; the result joins them
// (errors.Is finds ErrMissingObject, ErrNoAPI, ... through it).
func (m *Manager) Prepare(ctx context.Context, pod *v1.Pod) error {
	if pod == nil {
		return errors.New("prepare volumes: nil pod")
	}
	st := m.acquire(pod.UID)
	defer st.mu.Unlock()
	st.pod = pod

	logger := klog.FromContext(ctx)
	now := m.clk.Now()
	fresh := st.contentPod == pod && now.Sub(st.contentAt) < contentRewriteGap
	contentOK := true
	var errs []error
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		content, _ := contentPlugin(v)
		var err error
		switch p := m.pluginFor(v); {
		case p != nil:
			err = m.setUpPlugin(ctx, st, pod, p, v)
		case content != "" && fresh:
			continue
		default:
			err = m.setUp(ctx, pod, v)
		}
		if err != nil {
			if content != "" {
				contentOK = false
			}
			errs = append(errs, &VolumeError{Volume: v.Name, Err: err})
			logger.V(2).Info("Volume set-up failed", "pod", klog.KObj(pod), "podUID", pod.UID, "volume", v.Name, "err", err)
		}
	}
	if !fresh {
		st.contentPod, st.contentAt = nil, time.Time{}
		if contentOK {
			st.contentPod, st.contentAt = pod, now
		}
	}
	return errors.Join(errs...)
}

// setUp sets up one volume.
func (m *Manager) setUp(ctx context.Context, pod *v1.Pod, v *v1.Volume) error {
	switch {
	case v.HostPath != nil:
		return checkHostPath(v.HostPath)
	case v.EmptyDir != nil:
		return m.setUpEmptyDir(pod, v)
	case v.ConfigMap != nil, v.Secret != nil, v.DownwardAPI != nil, v.Projected != nil:
		_, err := m.setUpContent(ctx, pod, v)
		return err
	case v.Image != nil:
		// The runtime mounts the image (see imageMount); admission has
		// refused the pod when the runtime cannot.
		if v.Image.Reference == "" {
			return errors.New("image volume without a reference")
		}
		return nil
	}
	return fmt.Errorf("volume type %s: %w", sourceName(&v.VolumeSource), ErrUnsupported)
}

// contentPlugin returns the plugin directory and whether the volume sits on
// tmpfs, for the volume types whose files heartlet writes.
func contentPlugin(v *v1.Volume) (plugin string, memory bool) {
	switch {
	case v.ConfigMap != nil:
		return PluginConfigMap, false
	case v.Secret != nil:
		return PluginSecret, true
	case v.DownwardAPI != nil:
		return PluginDownwardAPI, false
	case v.Projected != nil:
		return PluginProjected, true
	}
	return "", false
}

// setUpContent computes the files of a configMap, secret, downwardAPI or
// projected volume and writes them atomically. It reports whether the
// content on disk changed.
func (m *Manager) setUpContent(ctx context.Context, pod *v1.Pod, v *v1.Volume) (bool, error) {
	files, err := m.contentPayload(ctx, pod, v)
	if err != nil {
		return false, err
	}
	plugin, memory := contentPlugin(v)
	dir := m.volumeDir(pod.UID, plugin, v.Name)
	if err := m.setUpDir(pod, dir, memory, 0); err != nil {
		return false, err
	}
	own := podOwnership(pod)
	for p, f := range files {
		f.mode = own.fileMode(f.mode)
		files[p] = f
	}
	changed, err := writeAtomic(dir, files, m.clk.Now())
	if err != nil {
		return changed, fmt.Errorf("write volume files: %w", err)
	}
	// These volumes are mounted read-only: fsGroup gets read access.
	if err := own.apply(dir, true, true); err != nil {
		return changed, err
	}
	return changed, nil
}

// isMountPoint reports whether path is a mount point of the given type
// (any type when fstype is empty).
func (m *Manager) isMountPoint(path, fstype string) (bool, error) {
	if mc, ok := m.mounter.(mountChecker); ok {
		if mounted, ok, err := mc.IsMountPoint(path, fstype); ok || err != nil {
			return mounted, err
		}
	}
	mps, err := m.mounter.List()
	if err != nil {
		return false, err
	}
	candidates := []string{filepath.Clean(path)}
	if real, err := filepath.EvalSymlinks(path); err == nil && real != candidates[0] {
		candidates = append(candidates, real)
	}
	for _, mp := range mps {
		for _, c := range candidates {
			if mp.Path == c && (fstype == "" || mp.FSType == fstype) {
				return true, nil
			}
		}
	}
	return false, nil
}

// Adopt remembers pod, whose containers survived a restart of heartlet,
// so that Run refreshes its volumes, when its pod directory exists. It
// creates, writes and removes nothing; a pod already prepared keeps its
// state. It is idempotent.
func (m *Manager) Adopt(ctx context.Context, pod *v1.Pod) error {
	if pod == nil {
		return errors.New("adopt volumes: nil pod")
	}
	if _, err := os.Stat(m.PodDir(pod.UID)); errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("adopt volumes: %w", err)
	}
	st := m.acquire(pod.UID)
	defer st.mu.Unlock()
	if st.pod == nil {
		st.pod = pod
		klog.FromContext(ctx).V(2).Info("Adopted pod volumes", "pod", klog.KObj(pod), "podUID", pod.UID)
	}
	return m.reconstructPlugins(ctx, pod)
}

// Forget stops refreshing the pod's volumes and drops its tokens. The files
// stay until Cleanup.
func (m *Manager) Forget(uid types.UID) {
	st := m.acquire(uid)
	m.release(uid, st)
	st.mu.Unlock()
	m.tokens.forget(uid)
}

// Cleanup unmounts the pod's subPath mounts and removes their directory,
// tears down the plugins' volumes, then removes <RootDir>/pods/<uid>,
// unmounting every other mount below it, and forgets the pod. No content
// of a still-mounted filesystem is deleted: when an unmount fails the call
// fails, having removed at most what lies outside every mount, and can be
// retried. It is idempotent and safe without Prepare, and after a restart
// of heartlet (everything is found on disk and in the mount table).
func (m *Manager) Cleanup(ctx context.Context, uid types.UID) error {
	st := m.acquire(uid)
	defer st.mu.Unlock()
	defer m.release(uid, st)
	m.tokens.forget(uid)

	podDir := m.PodDir(uid)
	// SubPath mounts first: they point into the volumes.
	if err := m.cleanSubPaths(ctx, podDir); err != nil {
		return err
	}
	// Then the plugins' volumes, through their drivers.
	if err := m.tearDownPlugins(ctx, uid); err != nil {
		return err
	}
	return m.removePodDir(ctx, podDir)
}

// removePodDir unmounts whatever is mounted at or below dir and removes
// it. With a Mounter that unmounts and removes a tree itself, the mount
// table is read only when that meets a mount it cannot unmount on its own.
func (m *Manager) removePodDir(ctx context.Context, dir string) error {
	remove := os.RemoveAll
	if r, ok := m.mounter.(treeRemover); ok {
		err := r.RemoveTree(dir)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, errMountBelow):
			klog.FromContext(ctx).V(3).Info("Unmounting volumes through the mount table", "path", dir, "reason", err)
			remove = r.RemoveTree
		case !errors.Is(err, errNoMountID):
			return fmt.Errorf("remove pod directory %s: %w", dir, err)
		}
	}
	if err := m.unmountBelow(ctx, dir); err != nil {
		return err
	}
	if err := remove(dir); err != nil {
		return fmt.Errorf("remove pod directory %s: %w", dir, err)
	}
	return nil
}

// unmountBelow unmounts every mount point at or below dir. Reading the
// mount table costs the kernel time in proportion to every mount on the
// node, so it is read only when something can be mounted there: a
// directory that does not exist has no mount below it (a mount point
// cannot be removed), and a table that shows none needs no second look.
func (m *Manager) unmountBelow(ctx context.Context, dir string) error {
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	roots := []string{filepath.Clean(dir)}
	if real, err := filepath.EvalSymlinks(dir); err == nil && real != roots[0] {
		roots = append(roots, real)
	}
	below := func() ([]string, error) {
		mps, err := m.mounter.List()
		if err != nil {
			return nil, fmt.Errorf("list mounts below %s: %w", dir, err)
		}
		var out []string
		for _, mp := range mps {
			for _, r := range roots {
				if mp.Path == r || strings.HasPrefix(mp.Path, r+"/") {
					out = append(out, mp.Path)
					break
				}
			}
		}
		// Deepest first; a path mounted twice is unmounted twice.
		sort.SliceStable(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
		return out, nil
	}
	mounts, err := below()
	if err != nil {
		return err
	}
	if len(mounts) == 0 {
		return nil
	}
	var errs []error
	for _, p := range mounts {
		klog.FromContext(ctx).V(3).Info("Unmounting volume", "path", p)
		if err := m.mounter.Unmount(p); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("unmount volumes below %s: %w", dir, errors.Join(errs...))
	}
	if left, err := below(); err != nil {
		return err
	} else if len(left) > 0 {
		return fmt.Errorf("unmount volumes below %s: still mounted: %s", dir, strings.Join(left, ", "))
	}
	return nil
}

// Run re-reads the ConfigMaps and Secrets of every prepared pod each
// RefreshPeriod, renews the tokens that are due and rewrites the volumes
// whose content changed. It returns nil when ctx ends.
func (m *Manager) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	logger.V(2).Info("Starting volume refresh", "period", m.opts.RefreshPeriod)
	t := m.clk.NewTicker(m.opts.RefreshPeriod)
	defer t.Stop()
	if m.afterRefresh != nil {
		m.afterRefresh()
	}
	for {
		select {
		case <-ctx.Done():
			logger.V(2).Info("Volume refresh stopped")
			return nil
		case <-t.C():
		}
		m.Refresh(ctx)
		if m.afterRefresh != nil {
			m.afterRefresh()
		}
	}
}

// Refresh runs one refresh pass over every prepared pod now.
func (m *Manager) Refresh(ctx context.Context) {
	m.mu.Lock()
	uids := make([]types.UID, 0, len(m.pods))
	for uid := range m.pods {
		uids = append(uids, uid)
	}
	m.mu.Unlock()
	sort.Slice(uids, func(i, j int) bool { return uids[i] < uids[j] })
	for _, uid := range uids {
		if ctx.Err() != nil {
			return
		}
		m.refreshPod(ctx, uid)
	}
}

// refreshPod rewrites the content volumes of one prepared pod.
func (m *Manager) refreshPod(ctx context.Context, uid types.UID) {
	m.mu.Lock()
	st := m.pods[uid]
	m.mu.Unlock()
	if st == nil {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.removed || st.pod == nil {
		return
	}
	pod := st.pod
	logger := klog.FromContext(ctx)
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if plugin, _ := contentPlugin(v); plugin == "" {
			continue
		}
		changed, err := m.setUpContent(ctx, pod, v)
		if err != nil {
			logger.Error(err, "Couldn't refresh volume", "pod", klog.KObj(pod), "podUID", pod.UID, "volume", v.Name)
			continue
		}
		if changed {
			logger.V(2).Info("Volume content updated", "pod", klog.KObj(pod), "podUID", pod.UID, "volume", v.Name)
		}
	}
}

// staticPod reports whether pod has no API object behind it.
func staticPod(pod *v1.Pod) bool { return podconfig.IsStatic(pod) }

// sourceName names the volume source that is set, for error messages.
func sourceName(vs *v1.VolumeSource) string {
	switch {
	case vs.HostPath != nil:
		return "hostPath"
	case vs.EmptyDir != nil:
		return "emptyDir"
	case vs.ConfigMap != nil:
		return "configMap"
	case vs.Secret != nil:
		return "secret"
	case vs.DownwardAPI != nil:
		return "downwardAPI"
	case vs.Projected != nil:
		return "projected"
	case vs.PersistentVolumeClaim != nil:
		return "persistentVolumeClaim"
	case vs.Ephemeral != nil:
		return "ephemeral"
	case vs.CSI != nil:
		return "csi"
	case vs.Image != nil:
		return "image"
	case vs.NFS != nil:
		return "nfs"
	case vs.ISCSI != nil:
		return "iscsi"
	case vs.GitRepo != nil:
		return "gitRepo"
	case vs.FlexVolume != nil:
		return "flexVolume"
	case vs.FC != nil:
		return "fc"
	case vs.RBD != nil:
		return "rbd"
	case vs.CephFS != nil:
		return "cephfs"
	}
	return "unknown"
}
