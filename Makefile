# heartlet's builds.
#
#   make build     bin/heartlet, as hack/run.sh and hack/test.sh build it,
#                  with the git commit and tree state linked in
#   make release   bin/release/heartlet-VERSION-GOOS-GOARCH and its .sha256:
#                  -trimpath, stripped (-s -w), with VERSION, the commit, its
#                  tree state and the build date linked in
#   make clean     removes bin/
#
# VERSION defaults to the git tag of HEAD (v*), else v0.0.0-dev; set it for a
# release: make release VERSION=v0.1.0. The build date is now, or
# SOURCE_DATE_EPOCH when set (reproducible builds). Both build a static
# binary (CGO_ENABLED=0): nothing in heartlet needs C, and a binary that does
# not map the C library and its loader keeps fewer pages resident. Set
# CGO_ENABLED=1 to link glibc (then the C resolver and NSS user lookups are
# used instead of Go's own).

GO ?= go
GOOS ?= $(shell $(GO) env GOOS)
GOARCH ?= $(shell $(GO) env GOARCH)
CGO_ENABLED ?= 0
export CGO_ENABLED

VERSION ?= $(shell git describe --tags --match 'v*' --exact-match 2>/dev/null || echo v0.0.0-dev)
GIT_COMMIT := $(shell git rev-parse HEAD 2>/dev/null)
GIT_TREE_STATE := $(shell if [ -z "$(GIT_COMMIT)" ]; then :; elif [ -z "$$(git status --porcelain 2>/dev/null)" ]; then echo clean; else echo dirty; fi)
ifdef SOURCE_DATE_EPOCH
BUILD_DATE := $(shell date -u -d "@$(SOURCE_DATE_EPOCH)" +%Y-%m-%dT%H:%M:%SZ)
else
BUILD_DATE := $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
endif

pkg := github.com/heartlet/heartlet/internal/version
vcs_ldflags := -X $(pkg).GitCommit=$(GIT_COMMIT) -X $(pkg).GitTreeState=$(GIT_TREE_STATE)
release_ldflags := -s -w -X $(pkg).Version=$(VERSION) -X $(pkg).BuildDate=$(BUILD_DATE) $(vcs_ldflags)
release_bin := bin/release/heartlet-$(VERSION)-$(GOOS)-$(GOARCH)

.PHONY: build release clean
build:
	$(GO) build -ldflags "$(vcs_ldflags)" -o bin/heartlet ./cmd/heartlet

release:
	@mkdir -p bin/release
	GOOS=$(GOOS) GOARCH=$(GOARCH) $(GO) build -trimpath -ldflags "$(release_ldflags)" -o $(release_bin) ./cmd/heartlet
	cd bin/release && sha256sum $(notdir $(release_bin)) >$(notdir $(release_bin)).sha256
	@echo $(release_bin)

clean:
	rm -rf bin
