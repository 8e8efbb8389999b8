// Package errdefs holds the error sentinels that cross package lines. A
// package puts one in the chain of its errors (fmt.Errorf with %w) and its
// callers test for it with errors.Is, whoever produced the error.
package errdefs

import "errors"

// ErrNotFound is in the chain of every error that says a pod, container,
// sandbox or image does not exist: the runtime answered gRPC NotFound, or
// heartlet knows no such pod or container. The kubelet API answers it
// with 404.
var ErrNotFound = errors.New("not found")
