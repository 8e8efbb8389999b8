package volume

import (
	"errors"
	"fmt"
)

// Sentinel errors. Callers check them with errors.Is; the errors this
// package returns carry the names of the objects involved.
var (
	// ErrMissingObject reports that a ConfigMap or Secret a pod needs does
	// not exist (and is not optional). The caller reports it as FailedMount
	// for volumes, or CreateContainerConfigError for environment variables.
	ErrMissingObject = errors.New("object not found")
	// ErrMissingKey reports that a ConfigMap or Secret exists but lacks a
	// key a pod needs (and the reference is not optional).
	ErrMissingKey = errors.New("key not found")
	// ErrNoAPI reports that a pod without an API server behind it (a static
	// pod, or any pod in standalone mode) references an API object: a
	// ConfigMap, a Secret or a service account token.
	ErrNoAPI = errors.New("static pods cannot reference API objects")
	// ErrUnsupported reports a volume type or volume feature heartlet does
	// not implement.
	ErrUnsupported = errors.New("unsupported")
	// ErrInvalidSubPath reports a subPath (or expanded subPathExpr) that is
	// absolute, climbs out of its volume with "..", or resolves through a
	// symbolic link to a place outside the volume.
	ErrInvalidSubPath = errors.New("invalid subPath")
)

// MissingObjectError is the ErrMissingObject a lookup returns: it names the
// kind ("configmap" or "secret"), namespace and name of the missing object.
// Its message is the one the API reports, e.g. `configmap "x" not found`.
type MissingObjectError struct {
	Kind      string
	Namespace string
	Name      string
}

// Error implements error.
func (e *MissingObjectError) Error() string {
	return fmt.Sprintf("%s %q not found", e.Kind, e.Name)
}

// Is makes errors.Is(err, ErrMissingObject) true.
func (e *MissingObjectError) Is(target error) bool { return target == ErrMissingObject }

// MissingKeyError is the ErrMissingKey a lookup returns: it names the
// object and the key. Msg is the full message.
type MissingKeyError struct {
	Kind      string
	Namespace string
	Name      string
	Key       string
	msg       string
}

// Error implements error.
func (e *MissingKeyError) Error() string { return e.msg }

// Is makes errors.Is(err, ErrMissingKey) true.
func (e *MissingKeyError) Is(target error) bool { return target == ErrMissingKey }

// envKeyError is the error of a configMapKeyRef/secretKeyRef whose key is
// missing: `couldn't find key k in ConfigMap ns/name`.
func envKeyError(kind, display, ns, name, key string) error {
	return &MissingKeyError{
		Kind: kind, Namespace: ns, Name: name, Key: key,
		msg: fmt.Sprintf("couldn't find key %s in %s %s/%s", key, display, ns, name),
	}
}

// volumeKeyError is the error of a configMap or secret volume item whose
// key is missing.
func volumeKeyError(kind, ns, name, key string) error {
	msg := fmt.Sprintf("configmap references non-existent config key: %s", key)
	if kind == kindSecret {
		msg = fmt.Sprintf("references non-existent secret key: %s", key)
	}
	return &MissingKeyError{Kind: kind, Namespace: ns, Name: name, Key: key, msg: msg}
}

// VolumeError is the failure to set up one volume of a pod. Its message is
// the one upstream puts into the FailedMount event:
// `MountVolume.SetUp failed for volume "x" : <cause>`.
type VolumeError struct {
	// Volume is the name of the volume in the pod spec.
	Volume string
	// Err is the cause.
	Err error
}

// Error implements error.
func (e *VolumeError) Error() string {
	return fmt.Sprintf("MountVolume.SetUp failed for volume %q : %v", e.Volume, e.Err)
}

// Unwrap returns the cause.
func (e *VolumeError) Unwrap() error { return e.Err }
