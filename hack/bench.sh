#!/usr/bin/env bash
# The side-by-side benchmark: starts a fresh private containerd
# (hack/env.sh) and control plane (hack/kube.sh), builds heartlet and the
# upstream kubelet (cached, hack/tools/kube), runs `bench -compare` (heartlet,
# the kubelet and the in-process CRI floor one after the other) with the
# arguments given, and stops both environments again. Must run as root, and
# alone: take the shared lock (flock /tmp/heartlet-e2e.lock hack/bench.sh).
#
#   hack/bench.sh                       # N = 30 and 100, every agent
#   hack/bench.sh -n 5 -idle 10s -idle-with-pods 0   # a short smoke run
#   HEARTLET_BENCH_BASE=main hack/bench.sh -agents heartlet-base,heartlet,kubelet,floor
#                                       # also heartlet as of a git revision
set -uo pipefail
# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

need_root
cd "$HEARTLET_REPO" || die "cannot cd to $HEARTLET_REPO"

cleanup() {
	hack/kube.sh stop >/dev/null || log "kube.sh stop failed"
	hack/env.sh stop >/dev/null || log "env.sh stop failed"
}
if hack/env.sh status >/dev/null 2>&1; then
	hack/env.sh stop || die "cannot stop the running test environment"
fi
if hack/kube.sh status >/dev/null 2>&1; then
	hack/kube.sh stop || die "cannot stop the running control plane"
fi
trap cleanup EXIT
build_kube_binaries || die "cannot build the upstream binaries"
hack/env.sh start || die "cannot start the test environment"
hack/kube.sh start || die "cannot start the control plane"
CGO_ENABLED=0 go build -o bin/heartlet ./cmd/heartlet || die "cannot build heartlet"
go build -o bin/bench ./bench || die "cannot build the benchmark"
base=()
if [[ -n ${HEARTLET_BENCH_BASE:-} ]]; then
	src=$(mktemp -d /tmp/heartlet-bench-base.XXXXXX)
	git archive "$HEARTLET_BENCH_BASE" | tar -x -C "$src" || die "cannot export $HEARTLET_BENCH_BASE"
	(cd "$src" && CGO_ENABLED=0 go build -o "$HEARTLET_REPO/bin/heartlet-base" ./cmd/heartlet) || die "cannot build heartlet at $HEARTLET_BENCH_BASE"
	rm -rf "$src"
	base=(-heartlet-base bin/heartlet-base)
fi
# shellcheck source=/dev/null
source "$HEARTLET_ENV_FILE"
# shellcheck source=/dev/null
source "$HEARTLET_KUBE_ENV_FILE"
bin/bench -compare -heartlet bin/heartlet "${base[@]}" -kubelet "$HEARTLET_KUBE_BIN_DIR/kubelet" "$@"
