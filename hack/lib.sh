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
HEARTLET_IMAGE_DIR=$HEARTLET_CACHE/images

# The private environment's locations. The socket path is part of the
# project's contract (hack/standalone-config.yaml and the e2e tests use it).
HEARTLET_ENV_RUN=/run/heartlet-env
HEARTLET_ENV_LIB=/var/lib/heartlet-env
HEARTLET_ENV_FILE=$HEARTLET_ENV_RUN/env
HEARTLET_ENV_SOCK=$HEARTLET_ENV_RUN/containerd.sock

HEARTLET_REGISTRY=localhost:5000
HEARTLET_BUSYBOX_IMAGE=$HEARTLET_REGISTRY/busybox:1.35
HEARTLET_PAUSE_IMAGE=$HEARTLET_REGISTRY/pause:3.10
HEARTLET_POD_SUBNET=10.88.0.0/16
HEARTLET_BRIDGE=hl0

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
