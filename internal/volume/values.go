package volume

import (
	"context"
	"fmt"
)

// ConfigMapValue returns the value of key in the ConfigMap namespace/name
// (data only, as environment variables take it) for a configMapKeyRef.
// found is false, with no error, when the reference is optional and the
// ConfigMap or the key is missing. Otherwise a missing ConfigMap is an
// ErrMissingObject (`configmap "x" not found`) and a missing key an
// ErrMissingKey (`couldn't find key k in ConfigMap ns/x`); the sync code
// reports both as CreateContainerConfigError. Without a Getter it returns
// ErrNoAPI.
func (m *Manager) ConfigMapValue(ctx context.Context, namespace, name, key string, optional bool) (value string, found bool, err error) {
	data, err := m.ConfigMapData(ctx, namespace, name, optional)
	return keyValue(data, err, key, optional, func() error {
		return envKeyError(kindConfigMap, "ConfigMap", namespace, name, key)
	})
}

// SecretValue is ConfigMapValue for a secretKeyRef.
func (m *Manager) SecretValue(ctx context.Context, namespace, name, key string, optional bool) (value string, found bool, err error) {
	data, err := m.SecretData(ctx, namespace, name, optional)
	return keyValue(data, err, key, optional, func() error {
		return envKeyError(kindSecret, "Secret", namespace, name, key)
	})
}

// keyValue picks key out of an object's data as ConfigMapValue describes;
// missing makes the error for a required key that is absent.
func keyValue(data map[string]string, err error, key string, optional bool, missing func() error) (string, bool, error) {
	if err != nil || data == nil {
		return "", false, err
	}
	v, ok := data[key]
	if !ok {
		if optional {
			return "", false, nil
		}
		return "", false, missing()
	}
	return v, true, nil
}

// ConfigMapData returns the data of the ConfigMap namespace/name for
// envFrom; nil with no error when it is missing and optional. The errors
// are those of ConfigMapValue. The map is a copy.
func (m *Manager) ConfigMapData(ctx context.Context, namespace, name string, optional bool) (map[string]string, error) {
	if m.opts.Getter == nil {
		return nil, fmt.Errorf("%s %q: %w", kindConfigMap, name, ErrNoAPI)
	}
	cm, err := m.opts.Getter.GetConfigMap(ctx, namespace, name)
	if err == nil && cm == nil {
		err = ErrMissingObject
	}
	if err != nil {
		return nil, lookupError(kindConfigMap, namespace, name, optional, err)
	}
	out := make(map[string]string, len(cm.Data))
	for k, v := range cm.Data {
		out[k] = v
	}
	return out, nil
}

// SecretData is ConfigMapData for a Secret; values are the decoded bytes
// as strings.
func (m *Manager) SecretData(ctx context.Context, namespace, name string, optional bool) (map[string]string, error) {
	if m.opts.Getter == nil {
		return nil, fmt.Errorf("%s %q: %w", kindSecret, name, ErrNoAPI)
	}
	s, err := m.opts.Getter.GetSecret(ctx, namespace, name)
	if err == nil && s == nil {
		err = ErrMissingObject
	}
	if err != nil {
		return nil, lookupError(kindSecret, namespace, name, optional, err)
	}
	out := make(map[string]string, len(s.Data))
	for k, v := range s.Data {
		out[k] = string(v)
	}
	return out, nil
}
