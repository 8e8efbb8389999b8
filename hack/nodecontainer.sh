#!/usr/bin/env bash
# A node container whose init is a real systemd, for the tests of the
# systemd cgroup driver on a machine without systemd as PID 1.
#
# Usage: hack/nodecontainer.sh build
#        hack/nodecontainer.sh start NAME [systemd|cgroupfs]
#        hack/nodecontainer.sh exec NAME CMD...
#        hack/nodecontainer.sh containerd NAME systemd|cgroupfs
#        hack/nodecontainer.sh info NAME
#        hack/nodecontainer.sh stop NAME
#
# build   a Debian bookworm root (debootstrap, minbase) with systemd, dbus,
#         containerd, runc and the CNI plugins, cached in
#         $HEARTLET_CACHE/nodecontainer/rootfs; skipped when cached (about
#         80 s the first time with the Debian mirror close by).
# start   boots systemd in it with systemd-nspawn on a copy-on-write overlay
#         of the cached root, then starts containerd with SystemdCgroup =
#         true (or false with cgroupfs). The container shares the host's
#         network (pods are hostNetwork) and reaches the registry on
#         localhost:5000; its containerd keeps its state under
#         $HEARTLET_NODE_LIB/NAME until stop. HEARTLET_BIN, when set, is bound at
#         /usr/local/bin/heartlet; the host paths in HEARTLET_NODE_BINDS
#         (separated by spaces) are bound at the same paths.
# exec    runs CMD in the container's namespaces.
# containerd  rewrites containerd's cgroup driver and restarts it.
# info    prints pid=, root= (the container's / seen from the host) and
#         cgroup=, the container's cgroup (its cgroup namespace root) in
#         every hierarchy, as CONTROLLER=HOSTDIR lines.
# stop    shuts systemd down, unmounts and removes the container's state
#         and cgroups.
#
# What makes systemd work here (cgroup v1 hybrid host, no systemd on it;
# measured: boot to "running" in about 5 s):
#   - the container gets a cgroup of its own in every hierarchy
#     (heartlet-node-NAME below the starter's), so systemd-nspawn's cgroup
#     namespace roots it there and nothing lands in the host's root;
#   - systemd-nspawn --register=no --keep-unit (no machined, no unit on the
#     host), SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=0 (the host's controllers are
#     all on v1), --capability=all for runc;
#   - systemd-nspawn mounts the controller hierarchies read-only in legacy
#     mode (only name=systemd is writable), so after boot they are
#     remounted read-write and systemd re-executed, after which it realizes
#     the memory, cpu and pids properties of its units (systemd-run -p
#     MemoryLimit=100M lands in memory.limit_in_bytes);
#   - containerd starts only then, with restrict_oom_score_adj (the
#     machine withholds CAP_SYS_RESOURCE), its root on a bind mount (no
#     overlayfs snapshotter on the overlay root).
set -euo pipefail
# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

NODE_CACHE=$HEARTLET_CACHE/nodecontainer
NODE_ROOTFS=$NODE_CACHE/rootfs
# Bump when the root's contents change: a cached root without this stamp
# is built again.
NODE_STAMP=heartlet-node-1
NODE_PACKAGES=systemd,systemd-sysv,dbus,containerd,runc,containernetworking-plugins,iptables,iproute2,kmod,ca-certificates
NODE_MIRROR=${HEARTLET_NODE_MIRROR:-http://deb.debian.org/debian}
HEARTLET_NODE_RUN=${HEARTLET_NODE_RUN:-/run/heartlet-node}
HEARTLET_NODE_LIB=${HEARTLET_NODE_LIB:-/var/lib/heartlet-node}

usage() {
	sed -n '5,10p' "$0" | sed 's/^# //' >&2
	exit 2
}

build() {
	if [[ -f $NODE_ROOTFS/.$NODE_STAMP ]]; then
		return 0
	fi
	command -v debootstrap >/dev/null || die "debootstrap is not installed (hack/setup.sh test installs it)"
	local start tmp
	start=$(now_ms)
	tmp=$NODE_CACHE/rootfs.tmp
	rm -rf "$tmp"
	mkdir -p "$NODE_CACHE"
	log "building the node container root in $NODE_ROOTFS (debootstrap bookworm)"
	debootstrap --variant=minbase --include="$NODE_PACKAGES" bookworm "$tmp" "$NODE_MIRROR" >"$NODE_CACHE/debootstrap.log" 2>&1 ||
		die "debootstrap failed, see $NODE_CACHE/debootstrap.log"
	echo heartlet-node >"$tmp/etc/hostname"
	: >"$tmp/etc/machine-id"
	# No login prompt on the console; containerd starts once the cgroup
	# hierarchies are writable (start).
	chroot "$tmp" systemctl mask console-getty.service getty.target >/dev/null 2>&1
	chroot "$tmp" systemctl disable containerd.service >/dev/null 2>&1
	mkdir -p "$tmp/etc/cni/net.d" "$tmp/etc/heartlet/manifests"
	# containerd reports the network ready with a configuration; the test
	# pods use the host's network and never call it.
	cat >"$tmp/etc/cni/net.d/10-node.conflist" <<-'JSON'
		{"cniVersion": "1.0.0", "name": "node", "plugins": [
		  {"type": "bridge", "bridge": "hlnode0", "isGateway": true, "ipMasq": true,
		   "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.89.0.0/24"}]]}},
		  {"type": "loopback"}]}
	JSON
	touch "$tmp/.$NODE_STAMP"
	rm -rf "$NODE_ROOTFS"
	mv "$tmp" "$NODE_ROOTFS"
	log "node container root built in $(elapsed "$start")"
}

state_dir() { echo "$HEARTLET_NODE_RUN/$1"; }

# node_pid NAME prints the pid (on the host) of the container's systemd.
node_pid() {
	local dir nspawn child
	dir=$(state_dir "$1")
	[[ -f $dir/nspawn.pid ]] || return 1
	nspawn=$(cat "$dir/nspawn.pid")
	local p
	# The container's init is systemd-nspawn's child or, when it forks
	# once more, grandchild, once it has executed systemd.
	for child in $(pgrep -P "$nspawn" 2>/dev/null); do
		for p in "$child" $(pgrep -P "$child" 2>/dev/null); do
			if [[ $(cat "/proc/$p/comm" 2>/dev/null) == systemd ]]; then
				echo "$p"
				return 0
			fi
		done
	done
	return 1
}

# booted NAME succeeds once the container's systemd has finished booting.
booted() {
	local state
	state=$(in_node "$1" systemctl is-system-running 2>/dev/null) || true
	[[ $state == running || $state == degraded ]]
}

in_node() {
	local pid
	pid=$(node_pid "$1") || die "node container $1 is not running"
	shift
	nsenter -t "$pid" -m -u -i -n -p -C -- "$@"
}

# hierarchies prints CONTROLLER=RELPATH for every cgroup v1 hierarchy and
# the unified one ("unified"), RELPATH being the current process's cgroup.
hierarchies() {
	local line id ctrls rel
	while IFS= read -r line; do
		id=${line%%:*}
		line=${line#*:}
		ctrls=${line%%:*}
		rel=${line#*:}
		if [[ $id == 0 ]]; then
			echo "unified=$rel"
		else
			echo "${ctrls#name=}=$rel"
		fi
	done </proc/self/cgroup
}

# node_cgroups NAME prints CONTROLLER=HOSTDIR for the container's cgroup
# in every hierarchy: heartlet-node-NAME below the current process's.
node_cgroups() {
	local line ctrl rel hd
	while IFS= read -r line; do
		ctrl=${line%%=*}
		rel=${line#*=}
		hd=$(host_dir "$ctrl")
		[[ -d $hd ]] || continue
		echo "$ctrl=$hd${rel%/}/heartlet-node-$1"
	done < <(hierarchies)
}

# host_dir CONTROLLER prints the host directory of a hierarchy.
host_dir() {
	local d=/sys/fs/cgroup/$1
	[[ -d $d ]] || d=/sys/fs/cgroup/${1%%,*}
	echo "$d"
}

containerd_config() {
	local systemd=$1
	cat <<-TOML
		version = 2
		root = "/var/lib/containerd"
		state = "/run/containerd"
		oom_score = 0

		[grpc]
		  address = "/run/containerd/containerd.sock"

		[plugins]
		  [plugins."io.containerd.grpc.v1.cri"]
		    sandbox_image = "$HEARTLET_PAUSE_IMAGE"
		    restrict_oom_score_adj = true
		    disable_apparmor = true
		    enable_selinux = false
		    stream_server_address = "127.0.0.1"
		    stream_server_port = "0"
		    [plugins."io.containerd.grpc.v1.cri".containerd]
		      snapshotter = "overlayfs"
		      default_runtime_name = "runc"
		      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
		        runtime_type = "io.containerd.runc.v2"
		        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
		          BinaryName = "/usr/sbin/runc"
		          SystemdCgroup = $systemd
		    [plugins."io.containerd.grpc.v1.cri".cni]
		      bin_dir = "/usr/lib/cni"
		      conf_dir = "/etc/cni/net.d"
	TOML
}

set_containerd() {
	local name=$1 driver=$2 systemd dir
	case $driver in
	systemd) systemd=true ;;
	cgroupfs) systemd=false ;;
	*) die "cgroup driver $driver: systemd or cgroupfs" ;;
	esac
	dir=$(state_dir "$name")
	mkdir -p "$dir/merged/etc/containerd"
	containerd_config "$systemd" >"$dir/merged/etc/containerd/config.toml"
	in_node "$name" systemctl restart containerd.service
	wait_for 30 "containerd in node container $name" in_node "$name" test -S /run/containerd/containerd.sock ||
		die "containerd did not start in node container $name: $(in_node "$name" journalctl -u containerd --no-pager -n 20 2>&1)"
}

start() {
	local name=$1 driver=${2:-systemd} dir lib start pid line ctrl rel hd
	[[ $name =~ ^[a-z0-9-]+$ ]] || die "node container name $name: lower-case letters, digits and -"
	[[ $driver == systemd || $driver == cgroupfs ]] || die "cgroup driver $driver: systemd or cgroupfs"
	command -v systemd-nspawn >/dev/null || die "systemd-nspawn is not installed (package systemd-container; hack/setup.sh test installs it)"
	build
	dir=$(state_dir "$name")
	lib=$HEARTLET_NODE_LIB/$name
	if node_pid "$name" >/dev/null; then
		die "node container $name is already running"
	fi
	start=$(now_ms)
	mkdir -p "$dir/upper" "$dir/work" "$dir/merged" "$lib/containerd"
	mountpoint -q "$dir/merged" ||
		mount -t overlay overlay -o "lowerdir=$NODE_ROOTFS,upperdir=$dir/upper,workdir=$dir/work" "$dir/merged"
	mkdir -p "$dir/merged/etc/containerd"
	containerd_config "$([[ $driver == systemd ]] && echo true || echo false)" >"$dir/merged/etc/containerd/config.toml"

	# The container's own cgroup in every hierarchy, below the starter's.
	node_cgroups "$name" >"$dir/cgroups"
	while IFS= read -r line; do
		hd=${line#*=}
		mkdir -p "$hd"
		if [[ -f $(dirname "$hd")/cpuset.cpus ]]; then
			cat "$(dirname "$hd")/cpuset.cpus" >"$hd/cpuset.cpus"
			cat "$(dirname "$hd")/cpuset.mems" >"$hd/cpuset.mems"
		fi
	done <"$dir/cgroups"
	# systemd stops what is left of the pods quickly when powered off.
	mkdir -p "$dir/merged/etc/systemd/system.conf.d"
	printf '[Manager]\nDefaultTimeoutStopSec=5s\n' >"$dir/merged/etc/systemd/system.conf.d/heartlet-node.conf"

	local binds=(--bind="$lib/containerd:/var/lib/containerd")
	if [[ -n ${HEARTLET_BIN:-} ]]; then
		binds+=(--bind-ro="$HEARTLET_BIN:/usr/local/bin/heartlet")
	fi
	local b
	for b in ${HEARTLET_NODE_BINDS:-}; do
		binds+=(--bind="$b")
	done
	(
		# Enter the container's cgroups, then boot it there.
		while IFS= read -r line; do
			echo "$BASHPID" >"${line#*=}/cgroup.procs"
		done <"$dir/cgroups"
		for fd in /proc/$BASHPID/fd/*; do
			fd=${fd##*/}
			((fd > 2)) && eval "exec $fd>&-" 2>/dev/null
		done
		SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=0 exec setsid systemd-nspawn -q -D "$dir/merged" -M "heartlet-node-$name" \
			--register=no --keep-unit --capability=all --system-call-filter=@keyring "${binds[@]}" -b
	) >"$dir/console.log" 2>&1 </dev/null &
	echo $! >"$dir/nspawn.pid"

	wait_for 30 "systemd to start in node container $name" node_pid "$name" ||
		die "node container $name did not start: $(tail -20 "$dir/console.log")"
	wait_for 60 "systemd to finish booting in node container $name" booted "$name" ||
		die "systemd did not boot in node container $name: $(tail -20 "$dir/console.log")"
	# systemd-nspawn mounts the controllers read-only; systemd manages them
	# once they are writable and it has re-executed.
	for hd in $(in_node "$name" sh -c 'ls -d /sys/fs/cgroup/*/'); do
		in_node "$name" mount -o remount,bind,rw "$hd"
	done
	in_node "$name" systemctl daemon-reexec
	wait_for 30 "systemd to re-execute in node container $name" booted "$name" ||
		die "systemd did not come back after re-executing in node container $name"
	in_node "$name" systemctl start containerd.service
	wait_for 30 "containerd in node container $name" in_node "$name" test -S /run/containerd/containerd.sock ||
		die "containerd did not start in node container $name: $(in_node "$name" journalctl -u containerd --no-pager -n 20 2>&1)"
	pid=$(node_pid "$name")
	log "node container $name running (systemd pid $pid on the host, cgroup driver $driver) after $(elapsed "$start")"
}

info() {
	local name=$1 dir pid
	dir=$(state_dir "$name")
	pid=$(node_pid "$name") || die "node container $name is not running"
	echo "pid=$pid"
	echo "root=$dir/merged"
	sed 's/^/cgroup./' "$dir/cgroups"
}

# remove_cgroup DIR removes a cgroup and everything below it, children
# first.
remove_cgroup() {
	[[ -d $1 ]] || return 0
	find "$1" -depth -type d -exec rmdir {} \; 2>/dev/null || true
	[[ ! -d $1 ]] || warn "cgroup $1 is left: $(find "$1" -name cgroup.procs -exec cat {} + 2>/dev/null | head -5 | tr '\n' ' ')"
}

stop() {
	local name=$1 dir nspawn line pid
	dir=$(state_dir "$name")
	if [[ -f $dir/nspawn.pid ]]; then
		nspawn=$(cat "$dir/nspawn.pid")
		if kill -0 "$nspawn" 2>/dev/null; then
			pid=$(node_pid "$name") || true
			# systemd-nspawn asks the container's systemd to power off;
			# killing the container's init ends every process in it.
			kill -TERM "$nspawn"
			if ! wait_for 30 "node container $name to shut down" sh -c "! kill -0 $nspawn"; then
				[[ -z $pid ]] || kill -KILL "$pid" 2>/dev/null || true
				wait_for 10 "node container $name to die" sh -c "! kill -0 $nspawn" ||
					kill -KILL "$nspawn" 2>/dev/null || true
			fi
		fi
	fi
	while IFS= read -r line; do
		remove_cgroup "${line#*=}"
	done < <(node_cgroups "$name")
	if mountpoint -q "$dir/merged"; then
		umount "$dir/merged" || umount -l "$dir/merged"
	fi
	rm -rf "$dir"
	# containerd's state with it: the next start pulls again (from the
	# local registry, in well under a second).
	rm -rf "${HEARTLET_NODE_LIB:?}/$name"
}

need_root
cmd=${1:-}
shift || true
case $cmd in
build) build ;;
start) [[ $# -ge 1 ]] || usage; start "$@" ;;
exec) [[ $# -ge 2 ]] || usage; name=$1; shift; in_node "$name" "$@" ;;
containerd) [[ $# -eq 2 ]] || usage; set_containerd "$@" ;;
info) [[ $# -eq 1 ]] || usage; info "$1" ;;
stop) [[ $# -eq 1 ]] || usage; stop "$1" ;;
*) usage ;;
esac
