package volume

import (
	"context"
	"errors"
	"fmt"
	"os"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// contentPayload computes the files of a configMap, secret, downwardAPI or
// projected volume.
func (m *Manager) contentPayload(ctx context.Context, pod *v1.Pod, v *v1.Volume) (payload, error) {
	switch {
	case v.ConfigMap != nil:
		src := v.ConfigMap
		return m.configMapFiles(ctx, pod, src.Name, src.Items, modeOr(src.DefaultMode, defaultMode), isTrue(src.Optional))
	case v.Secret != nil:
		src := v.Secret
		return m.secretFiles(ctx, pod, src.SecretName, src.Items, modeOr(src.DefaultMode, defaultMode), isTrue(src.Optional))
	case v.DownwardAPI != nil:
		src := v.DownwardAPI
		return m.downwardAPIFiles(pod, src.Items, modeOr(src.DefaultMode, defaultMode))
	case v.Projected != nil:
		return m.projectedFiles(ctx, pod, v.Projected)
	}
	return nil, fmt.Errorf("volume type %s: %w", sourceName(&v.VolumeSource), ErrUnsupported)
}

// configMapFiles returns the files of a ConfigMap: every key of data and
// binaryData, or only the listed items. A missing optional ConfigMap gives
// no files; a missing optional item key is skipped.
func (m *Manager) configMapFiles(ctx context.Context, pod *v1.Pod, name string, items []v1.KeyToPath, mode os.FileMode, optional bool) (payload, error) {
	cm, err := m.configMap(ctx, pod, name, optional)
	if err != nil || cm == nil {
		return payload{}, err
	}
	data := make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return keyFiles(kindConfigMap, pod.Namespace, name, data, items, mode, optional)
}

// secretFiles returns the files of a Secret, like configMapFiles.
func (m *Manager) secretFiles(ctx context.Context, pod *v1.Pod, name string, items []v1.KeyToPath, mode os.FileMode, optional bool) (payload, error) {
	s, err := m.secret(ctx, pod, name, optional)
	if err != nil || s == nil {
		return payload{}, err
	}
	return keyFiles(kindSecret, pod.Namespace, name, s.Data, items, mode, optional)
}

// keyFiles maps the keys of an object to files: all keys at their own name
// when items is empty, else each item's key at its path with its mode.
func keyFiles(kind, ns, name string, data map[string][]byte, items []v1.KeyToPath, mode os.FileMode, optional bool) (payload, error) {
	out := payload{}
	if len(items) == 0 {
		for k, v := range data {
			out[k] = fileProjection{data: v, mode: mode}
		}
		return out, nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if optional {
				continue
			}
			return nil, volumeKeyError(kind, ns, name, it.Key)
		}
		out[it.Path] = fileProjection{data: v, mode: modeOr(it.Mode, mode)}
	}
	return out, nil
}

// downwardAPIFiles returns the files of downward API items.
func (m *Manager) downwardAPIFiles(pod *v1.Pod, items []v1.DownwardAPIVolumeFile, mode os.FileMode) (payload, error) {
	out := payload{}
	var errs []error
	for _, it := range items {
		var (
			val string
			err error
		)
		switch {
		case it.FieldRef != nil:
			val, err = podFieldValue(pod, it.FieldRef.FieldPath)
		case it.ResourceFieldRef != nil:
			val, err = ContainerResourceValue(pod, "", it.ResourceFieldRef, m.allocatable())
		default:
			err = errors.New("neither fieldRef nor resourceFieldRef is set")
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("downward API item %s: %w", it.Path, err))
			continue
		}
		out[it.Path] = fileProjection{data: []byte(val), mode: modeOr(it.Mode, mode)}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// projectedFiles merges the files of every source of a projected volume;
// a later source overwrites an earlier one at the same path.
func (m *Manager) projectedFiles(ctx context.Context, pod *v1.Pod, src *v1.ProjectedVolumeSource) (payload, error) {
	mode := modeOr(src.DefaultMode, defaultMode)
	out := payload{}
	var errs []error
	merge := func(p payload, err error) {
		if err != nil {
			errs = append(errs, err)
			return
		}
		for k, v := range p {
			out[k] = v
		}
	}
	for i := range src.Sources {
		s := &src.Sources[i]
		switch {
		case s.ConfigMap != nil:
			merge(m.configMapFiles(ctx, pod, s.ConfigMap.Name, s.ConfigMap.Items, mode, isTrue(s.ConfigMap.Optional)))
		case s.Secret != nil:
			merge(m.secretFiles(ctx, pod, s.Secret.Name, s.Secret.Items, mode, isTrue(s.Secret.Optional)))
		case s.DownwardAPI != nil:
			merge(m.downwardAPIFiles(pod, s.DownwardAPI.Items, mode))
		case s.ServiceAccountToken != nil:
			merge(m.tokenFiles(ctx, pod, s.ServiceAccountToken, mode))
		case s.ClusterTrustBundle != nil:
			errs = append(errs, fmt.Errorf("projected source clusterTrustBundle: %w", ErrUnsupported))
		default:
			errs = append(errs, fmt.Errorf("projected source %d: %w", i, ErrUnsupported))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// tokenFiles returns the file of a serviceAccountToken projection.
func (m *Manager) tokenFiles(ctx context.Context, pod *v1.Pod, tp *v1.ServiceAccountTokenProjection, mode os.FileMode) (payload, error) {
	if err := m.apiAllowed(pod, "service account token"); err != nil {
		return nil, err
	}
	tok, err := m.tokens.get(ctx, m.opts.Getter, pod, tp)
	if err != nil {
		return nil, err
	}
	// As upstream's projected volume: the token belongs to the one user
	// every container runs as, if there is one, and is then, or under
	// fsGroup, readable by its owner only (fsGroup ownership then adds
	// group read: 0640).
	uid := fsUser(pod)
	if uid != nil || podOwnership(pod).fsGroup != nil {
		mode = tokenOwnerMode
	}
	return payload{tp.Path: {data: []byte(tok), mode: mode, uid: uid}}, nil
}

// tokenOwnerMode is the mode of a projected token with an owning user or
// an fsGroup, before fsGroup ownership adds group read.
const tokenOwnerMode os.FileMode = 0o600

// fsUser is the user every container of the pod runs as (its own
// runAsUser, else the pod's), as upstream's FsUserFrom; nil when one has
// none or two differ. Init, app and ephemeral containers count.
func fsUser(pod *v1.Pod) *int64 {
	var uid *int64
	var psc *int64
	if pod.Spec.SecurityContext != nil {
		psc = pod.Spec.SecurityContext.RunAsUser
	}
	same := func(sc *v1.SecurityContext) bool {
		u := psc
		if sc != nil && sc.RunAsUser != nil {
			u = sc.RunAsUser
		}
		if u == nil || (uid != nil && *uid != *u) {
			return false
		}
		uid = u
		return true
	}
	for i := range pod.Spec.InitContainers {
		if !same(pod.Spec.InitContainers[i].SecurityContext) {
			return nil
		}
	}
	for i := range pod.Spec.Containers {
		if !same(pod.Spec.Containers[i].SecurityContext) {
			return nil
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		if !same(pod.Spec.EphemeralContainers[i].SecurityContext) {
			return nil
		}
	}
	if uid == nil {
		return nil
	}
	v := *uid
	return &v
}

// apiAllowed refuses API objects to pods that have none behind them.
func (m *Manager) apiAllowed(pod *v1.Pod, what string) error {
	if m.opts.Getter == nil || staticPod(pod) {
		return fmt.Errorf("%s: %w", what, ErrNoAPI)
	}
	return nil
}

// configMap reads a ConfigMap of the pod's namespace; nil, nil when it is
// missing and optional.
func (m *Manager) configMap(ctx context.Context, pod *v1.Pod, name string, optional bool) (*v1.ConfigMap, error) {
	if err := m.apiAllowed(pod, fmt.Sprintf("%s %q", kindConfigMap, name)); err != nil {
		return nil, err
	}
	cm, err := m.opts.Getter.GetConfigMap(ctx, pod.Namespace, name)
	if err == nil && cm == nil {
		err = ErrMissingObject
	}
	if err != nil {
		return nil, lookupError(kindConfigMap, pod.Namespace, name, optional, err)
	}
	return cm, nil
}

// secret reads a Secret of the pod's namespace; nil, nil when it is
// missing and optional.
func (m *Manager) secret(ctx context.Context, pod *v1.Pod, name string, optional bool) (*v1.Secret, error) {
	if err := m.apiAllowed(pod, fmt.Sprintf("%s %q", kindSecret, name)); err != nil {
		return nil, err
	}
	s, err := m.opts.Getter.GetSecret(ctx, pod.Namespace, name)
	if err == nil && s == nil {
		err = ErrMissingObject
	}
	if err != nil {
		return nil, lookupError(kindSecret, pod.Namespace, name, optional, err)
	}
	return s, nil
}

// lookupError turns a Getter error into nil (missing and optional), a
// *MissingObjectError, or a wrapped error naming the object.
func lookupError(kind, ns, name string, optional bool, err error) error {
	if isNotFound(err) {
		if optional {
			return nil
		}
		return &MissingObjectError{Kind: kind, Namespace: ns, Name: name}
	}
	return fmt.Errorf("couldn't get %s %s/%s: %w", kind, ns, name, err)
}

func isNotFound(err error) bool {
	return apierrors.IsNotFound(err) || errors.Is(err, ErrMissingObject)
}

func (m *Manager) allocatable() v1.ResourceList {
	if m.opts.Allocatable == nil {
		return nil
	}
	return m.opts.Allocatable()
}

// modeOr returns *p as a file mode, else def.
func modeOr(p *int32, def os.FileMode) os.FileMode {
	if p == nil {
		return def
	}
	return os.FileMode(*p) & os.ModePerm
}

func isTrue(b *bool) bool { return b != nil && *b }
