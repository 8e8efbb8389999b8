# shellcheck shell=bash
# shellcheck disable=SC2034 # the variables are for the scripts that source this
# Common settings for the scripts under hack/. Source it; do not run it.
#
# Everything the test environment creates lives under two fixed directories
# (HEARTLET_ENV_RUN and HEARTLET_ENV_LIB), never in the host's default
# containerd or CNI locations. Tools and images built once are cached under
# HEARTLET_CACHE, outside the repository.

HEARTLET_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
HEARTLET_CACHE=${HEARTLET_CACHE:-/var/cache/heartlet}
HEARTLET_BIN_DIR=$HEARTLET_CACHE/bin
# The test images (hack/images.sh); a variable so that a cold build can be
# tried without touching the shared cache.
HEARTLET_IMAGE_DIR=${HEARTLET_IMAGE_DIR:-$HEARTLET_CACHE/images}

# The private environment's locations. The socket path is part of the
# project's contract (hack/standalone-config.yaml and the e2e tests use it).
HEARTLET_ENV_RUN=/run/heartlet-env
HEARTLET_ENV_LIB=/var/lib/heartlet-env
HEARTLET_ENV_FILE=$HEARTLET_ENV_RUN/env
HEARTLET_ENV_SOCK=$HEARTLET_ENV_RUN/containerd.sock

HEARTLET_REGISTRY=localhost:5000
HEARTLET_BUSYBOX_IMAGE=$HEARTLET_REGISTRY/busybox:1.35
HEARTLET_PAUSE_IMAGE=$HEARTLET_REGISTRY/pause:3.10
HEARTLET_TESTSERVER_IMAGE=$HEARTLET_REGISTRY/testserver:1.0
HEARTLET_POD_SUBNET=10.88.0.0/16
HEARTLET_BRIDGE=hl0

# The private control plane of hack/kube.sh (cluster-mode tests): binaries
# built once from hack/tools/kube into a cache keyed by version, state under
# two fixed directories, and the node identity heartlet runs with.
HEARTLET_KUBE_VERSION=v1.37.2
HEARTLET_KUBE_BIN_DIR=$HEARTLET_CACHE/kube/$HEARTLET_KUBE_VERSION/bin
HEARTLET_KUBE_RUN=/run/heartlet-kube
HEARTLET_KUBE_LIB=/var/lib/heartlet-kube
HEARTLET_KUBE_ENV_FILE=$HEARTLET_KUBE_RUN/env
HEARTLET_KUBE_NODE=heartlet-e2e

# metrics-server, which the stats e2e test runs against the control plane
# (kubectl top), built once from hack/tools/metrics-server.
HEARTLET_METRICS_SERVER_VERSION=v0.8.0
HEARTLET_METRICS_SERVER_BIN=$HEARTLET_CACHE/metrics-server/$HEARTLET_METRICS_SERVER_VERSION/bin/metrics-server

STATICCHECK_VERSION=v0.8.2
CRICTL_VERSION=v1.37.0

# Go may not be on PATH in a fresh root shell.
if ! command -v go >/dev/null 2>&1 && [[ -x /usr/local/go/bin/go ]]; then
	PATH=/usr/local/go/bin:$PATH
fi
PATH=$HEARTLET_BIN_DIR:$PATH:/usr/sbin:/sbin
export PATH

log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
warn() { log "warning: $*"; }
die() {
	log "error: $*"
	exit 1
}

need_root() {
	[[ $(id -u) -eq 0 ]] || die "$(basename "$0") must run as root"
}

# now_ms prints a monotonic-enough wall clock in milliseconds.
now_ms() { date +%s%3N; }

# elapsed START_MS prints the seconds since START_MS with one decimal.
elapsed() {
	local d=$(($(now_ms) - $1))
	printf '%d.%01ds' $((d / 1000)) $((d % 1000 / 100))
}

# wait_for SECONDS DESCRIPTION CMD... polls CMD every 0.2 s until it
# succeeds or SECONDS pass.
wait_for() {
	local timeout=$1 what=$2
	shift 2
	local deadline=$(($(now_ms) + timeout * 1000))
	until "$@" >/dev/null 2>&1; do
		if (($(now_ms) > deadline)); then
			log "timed out after ${timeout}s waiting for $what"
			return 1
		fi
		sleep 0.2
	done
}

# spawn_daemon LOG CMD... starts CMD in its own session in the background,
# appending its output to LOG, with every file descriptor above 2 closed:
# a daemon must not inherit a lock its starter holds (such as the e2e lock
# taken with "flock FILE cmd", which passes it as fd 3), or the lock stays
# held for as long as the daemon runs. $! is the daemon's pid.
spawn_daemon() {
	local log=$1
	shift
	(
		for fd in /proc/$BASHPID/fd/*; do
			fd=${fd##*/}
			((fd > 2)) && eval "exec $fd>&-" 2>/dev/null
		done
		exec setsid "$@"
	) >>"$log" 2>&1 </dev/null &
}

# kube_binaries_present succeeds when the cached control-plane binaries and
# the upstream kubelet exist.
kube_binaries_present() {
	local b
	for b in kube-apiserver kube-controller-manager kube-scheduler kubelet; do
		[[ -x $HEARTLET_KUBE_BIN_DIR/$b ]] || return 1
	done
}

# build_kube_binaries builds kube-apiserver, kube-controller-manager,
# kube-scheduler and the upstream kubelet from hack/tools/kube into HEARTLET_KUBE_BIN_DIR in one go
# build (one shared build cache; ~20 min cold on 2 cores, a relink when
# warm). Does nothing when the binaries are already cached.
build_kube_binaries() {
	kube_binaries_present && return 0
	local minor=${HEARTLET_KUBE_VERSION#v1.} start
	minor=${minor%%.*}
	start=$(now_ms)
	log "building the $HEARTLET_KUBE_VERSION control plane into $HEARTLET_KUBE_BIN_DIR (slow the first time)"
	mkdir -p "$HEARTLET_KUBE_BIN_DIR"
	(cd "$HEARTLET_REPO/hack/tools/kube" && go build -trimpath \
		-ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$HEARTLET_KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor" \
		-o "$HEARTLET_KUBE_BIN_DIR/" \
		k8s.io/kubernetes/cmd/kube-apiserver \
		k8s.io/kubernetes/cmd/kube-controller-manager \
		k8s.io/kubernetes/cmd/kube-scheduler \
		k8s.io/kubernetes/cmd/kubelet) || return 1
	log "control plane built in $(elapsed "$start")"
}

# HEARTLET_CSIMOCK_BIN is upstream's CSI mock driver service as a command
# (hack/tools/kube/csimock), which the CSI e2e tests run to check heartlet's
# call sequence against the one upstream expects.
HEARTLET_CSIMOCK_BIN=$HEARTLET_KUBE_BIN_DIR/csimock

# build_csimock builds hack/tools/kube/csimock into HEARTLET_CSIMOCK_BIN
# (a few minutes cold, seconds with the control plane's build cache). Does
# nothing when it is already cached.
build_csimock() {
	[[ -x $HEARTLET_CSIMOCK_BIN ]] && return 0
	local start
	start=$(now_ms)
	log "building the CSI mock driver into $HEARTLET_CSIMOCK_BIN"
	mkdir -p "$HEARTLET_KUBE_BIN_DIR"
	(cd "$HEARTLET_REPO/hack/tools/kube" && go build -trimpath -ldflags "-s -w" \
		-o "$HEARTLET_CSIMOCK_BIN.tmp" ./csimock) || return 1
	mv "$HEARTLET_CSIMOCK_BIN.tmp" "$HEARTLET_CSIMOCK_BIN"
	log "CSI mock driver built in $(elapsed "$start")"
}

# build_metrics_server builds metrics-server from hack/tools/metrics-server
# into HEARTLET_METRICS_SERVER_BIN. Does nothing when it is already cached.
build_metrics_server() {
	[[ -x $HEARTLET_METRICS_SERVER_BIN ]] && return 0
	local start
	start=$(now_ms)
	log "building metrics-server $HEARTLET_METRICS_SERVER_VERSION into $HEARTLET_METRICS_SERVER_BIN"
	mkdir -p "$(dirname "$HEARTLET_METRICS_SERVER_BIN")"
	(cd "$HEARTLET_REPO/hack/tools/metrics-server" && go build -trimpath -ldflags "-s -w" \
		-o "$HEARTLET_METRICS_SERVER_BIN.tmp" sigs.k8s.io/metrics-server/cmd/metrics-server) || return 1
	mv "$HEARTLET_METRICS_SERVER_BIN.tmp" "$HEARTLET_METRICS_SERVER_BIN"
	log "metrics-server built in $(elapsed "$start")"
}

# The storage tests' CSI driver and registrar (test/csi), built from the
# main module into bin/ next to heartlet; the e2e run finds them through
# these variables.
HEARTLET_CSI_DRIVER_BIN=$HEARTLET_REPO/bin/csi-driver
HEARTLET_CSI_REGISTRAR_BIN=$HEARTLET_REPO/bin/csi-registrar

# build_csi_binaries builds test/csi/driver and the csi-registrar command
# (seconds when the build cache is warm).
build_csi_binaries() {
	(cd "$HEARTLET_REPO" &&
		go build -o "$HEARTLET_CSI_DRIVER_BIN" ./test/csi/driver &&
		go build -o "$HEARTLET_CSI_REGISTRAR_BIN" ./test/csi/registrar/cmd/csi-registrar)
}
