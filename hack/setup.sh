#!/usr/bin/env bash
# Prepares a Debian bookworm machine (as root) for heartlet. Idempotent;
# fast when everything is already in place.
#
# Usage: hack/setup.sh [run|test]
#   run   what hack/run.sh needs to run heartlet standalone on the private
#         environment of hack/env.sh: containerd, runc, the CNI plugins, the
#         registry and the images of examples/static-pods (busybox,
#         pause). hack/env.sh drives containerd with hack/envcri, which is
#         built from this module.
#   test  (the default) everything of run, plus what hack/test.sh needs:
#         the testserver image, gcc for the race detector, crictl, staticcheck,
#         systemd-analyze, containerd 2.x with a newer runc (user namespaces), and the control plane of hack/kube.sh (etcd and
#         kube-apiserver, kube-controller-manager, kube-scheduler built from
#         source, about 22 minutes the first time) and metrics-server.
set -euo pipefail
# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

mode=${1:-test}
case $mode in
run | test) ;;
*) die "usage: $(basename "$0") [run|test]" ;;
esac
need_root
start=$(now_ms)

packages=(containerd runc containernetworking-plugins busybox-static umoci skopeo
	iptables iproute2 procps docker-registry kmod)
if [[ $mode == test ]]; then
	# The race detector needs cgo.
	packages+=(gcc libc6-dev)
	# The control plane of hack/kube.sh: its store, certificates, readiness probes.
	packages+=(etcd-server openssl curl)
	# systemd-analyze, which checks the unit files of deploy/systemd.
	packages+=(systemd)
	# The headless browser of the node page's test (TestNodePage).
	packages+=(chromium)
	# mkfs.ext4 and losetup, for the small image filesystems of the GC and
	# eviction tests.
	packages+=(e2fsprogs mount)
	# runc's seccomp support, for the runc of the user namespace tests.
	packages+=(libseccomp-dev pkg-config)
	# The node container of the systemd cgroup driver's test
	# (hack/nodecontainer.sh): its root and the container manager.
	packages+=(debootstrap systemd-container)
fi

missing=()
for p in "${packages[@]}"; do
	if [[ $(dpkg-query -W -f='${Status}' "$p" 2>/dev/null) != "install ok installed" ]]; then
		missing+=("$p")
	fi
done
if ((${#missing[@]})); then
	log "installing packages: ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Debian starts the packaged daemons; the test environment runs its own.
# They are left alone if they were already running before.
for svc in containerd docker-registry etcd; do
	if printf '%s\n' "${missing[@]:-}" | grep -qx "$svc" && command -v service >/dev/null; then
		service "$svc" stop >/dev/null 2>&1 || true
	fi
done

# Load the modules unless their features are there already (built in or
# loaded); modprobe may fail in a container.
if [[ ! -e /proc/sys/net/bridge/bridge-nf-call-iptables ]]; then
	modprobe br_netfilter 2>/dev/null || true
	[[ -e /proc/sys/net/bridge/bridge-nf-call-iptables ]] || warn "br_netfilter is not available"
fi
if ! grep -qw overlay /proc/filesystems; then
	modprobe overlay 2>/dev/null || true
	grep -qw overlay /proc/filesystems || die "the kernel has no overlay filesystem"
fi
if [[ $(cat /proc/sys/net/ipv4/ip_forward) != 1 ]]; then
	sysctl -qw net.ipv4.ip_forward=1
fi

command -v go >/dev/null || die "go is not installed (expected /usr/local/go/bin/go)"

# go_tool BINARY MODULE_PATH PACKAGE@VERSION [DIR [TAGS]] installs a Go tool
# into DIR (the cache's bin directory by default), built with the build
# tags TAGS, unless the binary there was built from that module version.
go_tool() {
	local bin=$1 mod=$2 pkg=$3 version=${3##*@} dir=${4:-$HEARTLET_BIN_DIR} tags=${5:-}
	if [[ -x $dir/$bin ]] &&
		go version -m "$dir/$bin" 2>/dev/null | grep -qE "^\s+mod\s+$mod\s+$version\s"; then
		return 0
	fi
	log "installing $pkg into $dir"
	mkdir -p "$dir"
	# Outside the repository so that the project's go.mod is not consulted.
	(cd / && GOBIN=$dir GOFLAGS=-buildvcs=false CGO_ENABLED=1 go install -tags "$tags" "$pkg")
}
"$HEARTLET_REPO/hack/images.sh" "$mode"

if [[ $mode == test ]]; then
	# crictl, for the tests that look at the runtime as an operator would
	# (hack/env.sh itself uses hack/envcri, built with heartlet).
	go_tool crictl sigs.k8s.io/cri-tools "sigs.k8s.io/cri-tools/cmd/crictl@$CRICTL_VERSION"
	go_tool staticcheck honnef.co/go/tools "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION"
	# containerd 2.x, its shim and runc for the user namespace tests
	# (TestUserNamespaces); about 5 minutes the first time.
	go_tool containerd github.com/containerd/containerd/v2 "github.com/containerd/containerd/v2/cmd/containerd@$CONTAINERD2_VERSION" "$HEARTLET_CONTAINERD2_DIR"
	go_tool containerd-shim-runc-v2 github.com/containerd/containerd/v2 "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@$CONTAINERD2_VERSION" "$HEARTLET_CONTAINERD2_DIR"
	go_tool runc github.com/opencontainers/runc "github.com/opencontainers/runc@$RUNC2_VERSION" "$HEARTLET_CONTAINERD2_DIR" seccomp

	# The cluster-mode tests' control plane (hack/kube.sh); a one-time cold
	# build of about 22 minutes, then cached under $HEARTLET_KUBE_BIN_DIR.
	build_kube_binaries
	# Upstream's CSI mock driver for the CSI e2e tests, from the same module.
	build_csimock

	# metrics-server for the kubectl top e2e test (hack/tools/metrics-server).
	build_metrics_server

	# The node container's root, whose init is systemd
	# (TestSystemdCgroupDriver); about a minute the first time.
	"$HEARTLET_REPO/hack/nodecontainer.sh" build
fi

log "setup ($mode) done in $(elapsed "$start")"
