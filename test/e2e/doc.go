// Package e2e holds heartlet's end-to-end tests. They drive the built binary
// (bin/heartlet) the way a user does, against the private containerd of
// hack/env.sh, and need root. hack/test.sh runs them; by hand:
//
//	hack/env.sh start && . /run/heartlet-env/env
//	go build -o bin/heartlet ./cmd/heartlet
//	go test -tags e2e -count=1 -v ./test/e2e/...
//
// HEARTLET_BIN overrides the binary's path. Without the e2e build tag only
// the checks of the example manifests in examples/static-pods run.
package e2e
