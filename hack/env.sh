#!/usr/bin/env bash
# A private test environment for heartlet, never the host's defaults:
#   - a registry (docker-registry) on 127.0.0.1:5000 with the test images,
#   - a containerd with its own root, state, socket, runc root and CNI
#     config (bridge hl0, 10.88.0.0/16, portmap, loopback).
#
# Usage: hack/env.sh start|stop|status|verify-clean|stop-containerd|start-containerd|restart-containerd
#   start         starts the environment (idempotent) and writes
#                 /run/heartlet-env/env, which exports HEARTLET_CRI_ENDPOINT.
#   stop          removes every pod through CRI, stops the daemons and removes
#                 everything the environment created (processes, mounts,
#                 cgroups under kubepods, the hl0 bridge, CNI iptables rules,
#                 its directories). Set HEARTLET_ENV_LOGS=DIR to keep the
#                 daemons' logs there.
#   status        prints the state; exits 0 only when the environment is up.
#   verify-clean  prints whatever the environment left behind; exits 1 if
#                 anything is left.
#   stop-containerd, start-containerd, restart-containerd [DOWN_SECONDS]
#                 stop (TERM) and start again only the environment's
#                 containerd, with the same config, for failure drills: the
#                 shims, and so the pods, survive. restart-containerd keeps it
#                 down DOWN_SECONDS (default 0). Nothing else is touched; use
#                 them only while no one else uses the environment.
set -euo pipefail
# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RUN=$HEARTLET_ENV_RUN
LIB=$HEARTLET_ENV_LIB
SOCK=$HEARTLET_ENV_SOCK
ENDPOINT=unix://$SOCK
CTRD_CONFIG=$RUN/containerd.toml
CTRD_STATE=$RUN/containerd
CTRD_ROOT=$LIB/containerd
CTRD_PID=$RUN/containerd.pid
CTRD_LOG=$LIB/containerd.log
RUNC_ROOT=$RUN/runc
CNI_CONF_DIR=$RUN/cni/net.d
CNI_DATA_DIR=$RUN/cni/ipam
REG_CONFIG=$RUN/registry.yml
REG_ROOT=$LIB/registry
REG_PID=$RUN/registry.pid
REG_LOG=$LIB/registry.log
REG_ADDR=127.0.0.1:5000
# hack/run.sh records the heartlet it starts here.
HEARTLET_PID=$RUN/heartlet.pid

CRICTL_CONFIG=$RUN/crictl.yaml

# envcri runs hack/envcri, the environment's CRI client (check, clean,
# count), built from this module into the repository's bin/ on first use.
ENVCRI=$HEARTLET_REPO/bin/envcri
envcri() {
	if [[ ! -x $ENVCRI ]]; then
		(cd "$HEARTLET_REPO" && go build -o "$ENVCRI" ./hack/envcri) || die "cannot build hack/envcri"
	fi
	"$ENVCRI" -endpoint "$ENDPOINT" "$@"
}

# pid_alive PIDFILE EXE succeeds when PIDFILE names a live process running EXE.
pid_alive() {
	local pid
	[[ -f $1 ]] || return 1
	pid=$(<"$1")
	[[ -n $pid && -r /proc/$pid/exe ]] || return 1
	[[ $(basename "$(readlink "/proc/$pid/exe" 2>/dev/null)") == "$2" ]]
}

# http_ok HOST PORT PATH succeeds when GET answers 200.
http_ok() {
	(
		exec 3<>"/dev/tcp/$1/$2" || exit 1
		printf 'GET %s HTTP/1.0\r\nHost: %s\r\n\r\n' "$3" "$1" >&3
		IFS= read -r -t 5 status <&3 || exit 1
		[[ $status == "HTTP/1."[01]" 200"* ]]
	) 2>/dev/null
}

registry_up() {
	pid_alive "$REG_PID" docker-registry && http_ok "${REG_ADDR%:*}" "${REG_ADDR##*:}" /v2/
}

containerd_up() {
	pid_alive "$CTRD_PID" containerd && [[ -S $SOCK ]] && envcri ready >/dev/null 2>&1
}

# env_pids prints the pids of processes whose command line refers to the
# environment (its socket or directories), except this script's own.
env_pids() {
	local f pid
	# Patterns come from a file so that grep does not match itself.
	# shellcheck disable=SC2013 # one /proc path per line, no spaces
	for f in $(grep -lsaF -f <(printf '%s\n' "$RUN" "$LIB") /proc/[0-9]*/cmdline); do
		pid=${f#/proc/}
		pid=${pid%/cmdline}
		[[ $pid == "$$" || $pid == "$BASHPID" || ! -e /proc/$pid ]] || printf '%s\n' "$pid"
	done
	return 0
}

# env_daemon_pids prints env_pids limited to the programs the environment
# runs: containerd, its shims, the registry and heartlet.
env_daemon_pids() {
	local pid exe
	for pid in $(env_pids); do
		exe=$(basename "$(readlink "/proc/$pid/exe" 2>/dev/null)" 2>/dev/null) || continue
		case $exe in
		containerd | containerd-shim* | docker-registry | heartlet) printf '%s\n' "$pid" ;;
		esac
	done
}

# stop_pid PID SECONDS sends TERM, waits, then KILL.
stop_pid() {
	local pid=$1 timeout=$2
	kill -TERM "$pid" 2>/dev/null || return 0
	if ! wait_for "$timeout" "pid $pid to exit" bash -c "! kill -0 $pid"; then
		kill -KILL "$pid" 2>/dev/null || true
		wait_for 5 "pid $pid to die" bash -c "! kill -0 $pid" || true
	fi
}

# kubepods_dirs prints the kubepods cgroup directories of every hierarchy.
kubepods_dirs() {
	local d
	for d in /sys/fs/cgroup/* /sys/fs/cgroup; do
		[[ -d $d && ! -L $d ]] || continue
		[[ -d $d/kubepods ]] && printf '%s\n' "$d/kubepods"
	done
	return 0
}

# env_mounts prints mount points under the environment's directories,
# deepest first.
env_mounts() {
	awk -v run="$RUN" -v lib="$LIB" '
		function unescape(s) { gsub(/\\040/, " ", s); return s }
		{ mp = unescape($5); if (mp == run || index(mp, run "/") == 1 || mp == lib || index(mp, lib "/") == 1) print length(mp) " " mp }
	' /proc/self/mountinfo | sort -rn | cut -d' ' -f2-
}

# iptables_plan TABLE prints what the environment left in TABLE: "rule
# <rule>" for rules outside its chains that mention the pod subnet or the
# CNI network name (or jump to its chains), and "chain <name>" for the
# per-pod CNI-* chains (those holding such rules, jumped to by them, or left
# empty by a partial cleanup). portmap's shared chains are handled apart.
subnet_prefix=${HEARTLET_POD_SUBNET%.0.0/16}.
CNI_NETWORK=heartlet-env
iptables_plan() {
	iptables -t "$1" -S 2>/dev/null | awk -v p="$subnet_prefix" -v net="\"$CNI_NETWORK\"" '
		function shared(c) { return c ~ /^CNI-HOSTPORT-(DNAT|SETMARK|MASQ)$/ }
		$1 == "-N" { declared[$2] = 1; nrules[$2] += 0; next }
		$1 == "-A" {
			n++; rule[n] = $0; owner[n] = $2; nrules[$2]++
			mine[n] = index($0, p) || index($0, net)
			tgt[n] = ""
			for (i = 3; i < NF; i++) if ($i == "-j" || $i == "-g") tgt[n] = $(i + 1)
			if (mine[n] && tgt[n] ~ /^CNI-/ && !shared(tgt[n])) ours[tgt[n]] = 1
			if (mine[n] && owner[n] ~ /^CNI-/ && !shared(owner[n])) ours[owner[n]] = 1
		}
		END {
			for (c in declared) if (c ~ /^CNI-/ && !shared(c) && nrules[c] == 0) ours[c] = 1
			for (i = 1; i <= n; i++) if (!(owner[i] in ours) && (mine[i] || (tgt[i] in ours))) print "rule " rule[i]
			for (c in ours) print "chain " c
		}'
}

write_configs() {
	mkdir -p "$RUN" "$LIB" "$CTRD_STATE" "$CTRD_ROOT" "$RUNC_ROOT" "$CNI_CONF_DIR" "$CNI_DATA_DIR" "$REG_ROOT"
	cat >"$REG_CONFIG" <<-YAML
		version: 0.1
		log:
		  level: warn
		storage:
		  filesystem:
		    rootdirectory: $REG_ROOT
		  delete:
		    enabled: true
		http:
		  addr: $REG_ADDR
	YAML
	cat >"$CRICTL_CONFIG" <<-YAML
		runtime-endpoint: $ENDPOINT
		image-endpoint: $ENDPOINT
		timeout: 30
	YAML
	cat >"$CTRD_CONFIG" <<-TOML
		version = 2
		root = "$CTRD_ROOT"
		state = "$CTRD_STATE"
		oom_score = 0

		[grpc]
		  address = "$SOCK"

		[ttrpc]
		  address = "$SOCK.ttrpc"

		[debug]
		  address = ""

		[metrics]
		  address = ""

		[plugins]
		  [plugins."io.containerd.internal.v1.opt"]
		    path = "$LIB/opt"
		  [plugins."io.containerd.grpc.v1.cri"]
		    sandbox_image = "$HEARTLET_PAUSE_IMAGE"
		    restrict_oom_score_adj = true
		    disable_apparmor = true
		    enable_selinux = false
		    netns_mounts_under_state_dir = true
		    stream_server_address = "127.0.0.1"
		    stream_server_port = "0"
		    [plugins."io.containerd.grpc.v1.cri".containerd]
		      snapshotter = "overlayfs"
		      default_runtime_name = "runc"
		      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
		        runtime_type = "io.containerd.runc.v2"
		        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
		          BinaryName = "/usr/sbin/runc"
		          Root = "$RUNC_ROOT"
		          SystemdCgroup = false
		      # A second handler for RuntimeClass tests: the same runc under
		      # another name (TestClusterRuntimeClass).
		      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.heartlet-test]
		        runtime_type = "io.containerd.runc.v2"
		        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.heartlet-test.options]
		          BinaryName = "/usr/sbin/runc"
		          Root = "$RUNC_ROOT"
		          SystemdCgroup = false
		    [plugins."io.containerd.grpc.v1.cri".cni]
		      bin_dir = "/usr/lib/cni"
		      conf_dir = "$CNI_CONF_DIR"
		      max_conf_num = 1
	TOML
	cat >"$CNI_CONF_DIR/10-heartlet-env.conflist" <<-JSON
		{
		  "cniVersion": "1.0.0",
		  "name": "heartlet-env",
		  "plugins": [
		    {
		      "type": "bridge",
		      "bridge": "$HEARTLET_BRIDGE",
		      "isGateway": true,
		      "ipMasq": true,
		      "hairpinMode": true,
		      "ipam": {
		        "type": "host-local",
		        "dataDir": "$CNI_DATA_DIR",
		        "ranges": [[{"subnet": "$HEARTLET_POD_SUBNET"}]],
		        "routes": [{"dst": "0.0.0.0/0"}]
		      }
		    },
		    {"type": "portmap", "capabilities": {"portMappings": true}},
		    {"type": "loopback"}
		  ]
		}
	JSON
}

write_env_file() {
	cat >"$HEARTLET_ENV_FILE.tmp" <<-EOF2
		# Written by hack/env.sh start. Source it to use the test environment.
		export HEARTLET_CRI_ENDPOINT=$ENDPOINT
		export HEARTLET_ENV_RUN=$RUN
		export HEARTLET_ENV_LIB=$LIB
		export HEARTLET_REGISTRY=$HEARTLET_REGISTRY
		export HEARTLET_BUSYBOX_IMAGE=$HEARTLET_BUSYBOX_IMAGE
		export HEARTLET_PAUSE_IMAGE=$HEARTLET_PAUSE_IMAGE
		export HEARTLET_TESTSERVER_IMAGE=$HEARTLET_TESTSERVER_IMAGE
		export CONTAINER_RUNTIME_ENDPOINT=$ENDPOINT
		export IMAGE_SERVICE_ENDPOINT=$ENDPOINT
		export CRI_CONFIG_FILE=$CRICTL_CONFIG
	EOF2
	mv "$HEARTLET_ENV_FILE.tmp" "$HEARTLET_ENV_FILE"
}

# run_containerd starts the environment's containerd and waits until it
# answers CRI.
run_containerd() {
	spawn_daemon "$CTRD_LOG" containerd --config "$CTRD_CONFIG"
	echo $! >"$CTRD_PID"
	wait_for 30 "containerd on $SOCK" containerd_up || {
		tail -n 30 "$CTRD_LOG" >&2
		die "containerd did not start"
	}
}

cmd_start() {
	need_root
	local start
	start=$(now_ms)
	if registry_up && containerd_up; then
		write_env_file
		log "environment already running; endpoint $ENDPOINT"
		return 0
	fi
	if [[ -e $RUN || -e $LIB ]] || [[ -n $(env_daemon_pids) ]]; then
		log "cleaning up a partial environment first"
		cmd_stop
	fi
	for f in busybox/index.json pause/index.json pause.tar; do
		[[ -e $HEARTLET_IMAGE_DIR/$f ]] || die "missing test image $HEARTLET_IMAGE_DIR/$f; run hack/setup.sh"
	done
	# Built now, with the current sources, so that a stale binary is never used.
	(cd "$HEARTLET_REPO" && go build -o "$ENVCRI" ./hack/envcri) || die "cannot build hack/envcri"
	if ss -Hltn "sport = :${REG_ADDR##*:}" | grep -q .; then
		die "port ${REG_ADDR##*:} is in use; the test registry needs it"
	fi
	[[ $(cat /proc/sys/net/ipv4/ip_forward) == 1 ]] || sysctl -qw net.ipv4.ip_forward=1
	[[ -e /proc/sys/net/bridge ]] || modprobe br_netfilter 2>/dev/null || warn "br_netfilter unavailable"

	write_configs

	spawn_daemon "$REG_LOG" docker-registry serve "$REG_CONFIG"
	echo $! >"$REG_PID"
	wait_for 20 "the registry on $REG_ADDR" registry_up || {
		tail -n 20 "$REG_LOG" >&2
		die "registry did not start"
	}
	# The testserver image is built for the tests only (hack/setup.sh test).
	local img images=(busybox:1.35 pause:3.10)
	[[ -e $HEARTLET_IMAGE_DIR/testserver/index.json ]] && images+=(testserver:1.0)
	for img in "${images[@]}"; do
		skopeo copy --quiet --dest-tls-verify=false \
			"oci:$HEARTLET_IMAGE_DIR/${img%%:*}:${img#*:}" "docker://$HEARTLET_REGISTRY/$img"
	done

	run_containerd
	ctr --address "$SOCK" --namespace k8s.io images import --no-unpack=false \
		"$HEARTLET_IMAGE_DIR/pause.tar" >/dev/null
	write_env_file
	log "environment up in $(elapsed "$start"); endpoint $ENDPOINT (source $HEARTLET_ENV_FILE)"
}

# remove_pods stops and removes every pod sandbox through CRI so that CNI DEL
# runs and releases addresses and iptables rules.
remove_pods() {
	envcri clean || warn "removing the pods through $ENDPOINT failed"
}

# foreign_heartlets prints the pids of running heartlet processes other than
# the one hack/run.sh started.
foreign_heartlets() {
	local d exe own=""
	[[ -f $HEARTLET_PID ]] && own=$(<"$HEARTLET_PID")
	for d in /proc/[0-9]*; do
		exe=$(readlink "$d/exe" 2>/dev/null) || continue
		[[ ${exe##*/} == heartlet && ${d#/proc/} != "$own" ]] && printf '%s\n' "${d#/proc/}"
	done
	return 0
}

# kill_cgroup_procs kills processes still inside kubepods cgroups: the
# containers of this environment that survived their shims.
kill_cgroup_procs() {
	local dir pids
	for dir in $(kubepods_dirs); do
		pids=$(find "$dir" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u)
		[[ -n $pids ]] || continue
		warn "killing container processes left in $dir: ${pids//$'\n'/ }"
		# shellcheck disable=SC2086
		kill -KILL $pids 2>/dev/null || true
	done
}

remove_cgroups() {
	local dir
	for dir in $(kubepods_dirs); do
		find "$dir" -depth -type d -exec rmdir {} + 2>/dev/null ||
			find "$dir" -depth -type d -exec rmdir {} \; 2>/dev/null || true
		[[ -d $dir ]] && warn "could not remove $dir"
	done
	return 0
}

# PORTMAP_CHAINS are portmap's shared nat chains; they go once no pod uses
# them (CNI-HOSTPORT-DNAT has no rules left).
PORTMAP_CHAINS=(CNI-HOSTPORT-DNAT CNI-HOSTPORT-SETMARK CNI-HOSTPORT-MASQ)

# idle_portmap_chains prints portmap's shared chains when no pod uses them.
idle_portmap_chains() {
	local c
	iptables -t nat -S CNI-HOSTPORT-DNAT >/dev/null 2>&1 || return 0
	iptables -t nat -S CNI-HOSTPORT-DNAT | grep -q '^-A' && return 0
	for c in "${PORTMAP_CHAINS[@]}"; do
		iptables -t nat -S "$c" >/dev/null 2>&1 && printf '%s\n' "$c"
	done
	return 0
}

remove_portmap_chains() {
	local chains rule c
	chains=$(idle_portmap_chains | paste -sd'|')
	[[ -n $chains ]] || return 0
	while IFS= read -r rule; do
		[[ -n $rule ]] || continue
		eval "iptables -t nat ${rule/-A /-D }" 2>/dev/null || warn "cannot delete: iptables -t nat $rule"
	done < <(iptables -t nat -S | awk -v chains="^($chains)\$" '
		$1 == "-A" && $2 !~ chains { for (i = 3; i < NF; i++) if ($i == "-j" && $(i+1) ~ chains) { print; next } }')
	for c in $(idle_portmap_chains); do
		iptables -t nat -F "$c" 2>/dev/null || true
	done
	for c in $(idle_portmap_chains); do
		iptables -t nat -X "$c" 2>/dev/null || warn "cannot delete chain nat/$c"
	done
}

remove_iptables() {
	local table kind rest chains
	for table in nat filter mangle; do
		chains=()
		while read -r kind rest; do
			case $kind in
			rule)
				eval "iptables -t $table ${rest/-A /-D }" 2>/dev/null ||
					warn "cannot delete: iptables -t $table $rest"
				;;
			chain) chains+=("$rest") ;;
			esac
		done < <(iptables_plan "$table")
		for rest in "${chains[@]}"; do
			iptables -t "$table" -F "$rest" 2>/dev/null || true
		done
		for rest in "${chains[@]}"; do
			iptables -t "$table" -X "$rest" 2>/dev/null || warn "cannot delete chain $table/$rest"
		done
	done
}

cmd_stop() {
	need_root
	local start pid
	start=$(now_ms)
	if pid_alive "$HEARTLET_PID" heartlet; then
		log "stopping heartlet (pid $(<"$HEARTLET_PID"))"
		stop_pid "$(<"$HEARTLET_PID")" 30
	fi
	local others
	others=$(foreign_heartlets)
	if [[ -n $others ]]; then
		warn "heartlet processes still running (pids ${others//$'\n'/ }): any of them using this environment recreates pods while it is stopped"
	fi
	if containerd_up; then
		remove_pods
	fi
	if pid_alive "$CTRD_PID" containerd; then
		stop_pid "$(<"$CTRD_PID")" 20
	fi
	if pid_alive "$REG_PID" docker-registry; then
		stop_pid "$(<"$REG_PID")" 10
	fi
	# Containers whose shims outlived containerd.
	if [[ -d $RUNC_ROOT ]]; then
		local id
		for id in $(runc --root "$RUNC_ROOT" list -q 2>/dev/null); do
			warn "force-deleting leftover container $id"
			runc --root "$RUNC_ROOT" delete --force "$id" 2>/dev/null || true
		done
	fi
	for pid in $(env_daemon_pids); do
		warn "stopping leftover $(basename "$(readlink "/proc/$pid/exe")") (pid $pid)"
		stop_pid "$pid" 5
	done
	kill_cgroup_procs

	local mp
	for mp in $(env_mounts); do
		umount "$mp" 2>/dev/null || umount -l "$mp" 2>/dev/null || warn "cannot unmount $mp"
	done
	remove_cgroups
	if ip link show "$HEARTLET_BRIDGE" >/dev/null 2>&1; then
		ip link delete "$HEARTLET_BRIDGE" || warn "cannot delete link $HEARTLET_BRIDGE"
	fi
	remove_iptables
	remove_portmap_chains

	if [[ -n ${HEARTLET_ENV_LOGS:-} ]]; then
		mkdir -p "$HEARTLET_ENV_LOGS"
		for f in "$CTRD_LOG" "$REG_LOG"; do
			[[ -f $f ]] && cp "$f" "$HEARTLET_ENV_LOGS/"
		done
	fi
	if [[ -z $(env_mounts) ]]; then
		rm -rf --one-file-system "$RUN" "$LIB"
	else
		warn "mounts remain; not removing $RUN and $LIB"
	fi
	log "environment stopped in $(elapsed "$start")"
}

# cmd_stop_containerd stops only containerd (TERM; its shims and their
# containers keep running).
cmd_stop_containerd() {
	need_root
	local start
	start=$(now_ms)
	pid_alive "$CTRD_PID" containerd || die "containerd is not running"
	stop_pid "$(<"$CTRD_PID")" 20
	log "containerd stopped in $(elapsed "$start")"
}

# cmd_start_containerd starts containerd again with the environment's config.
cmd_start_containerd() {
	need_root
	local start
	start=$(now_ms)
	[[ -f $CTRD_CONFIG ]] || die "no environment config at $CTRD_CONFIG; run hack/env.sh start"
	if containerd_up; then
		log "containerd already running"
		return 0
	fi
	pid_alive "$CTRD_PID" containerd && die "containerd (pid $(<"$CTRD_PID")) runs but does not answer on $SOCK"
	run_containerd
	log "containerd started in $(elapsed "$start")"
}

cmd_status() {
	local ok=0
	if registry_up; then
		echo "registry:   running (pid $(<"$REG_PID")) on $REG_ADDR"
	else
		echo "registry:   not running"
		ok=1
	fi
	if containerd_up; then
		echo "containerd: running (pid $(<"$CTRD_PID")) on $ENDPOINT"
		echo "pods:       $(envcri count)"
	else
		echo "containerd: not running"
		ok=1
	fi
	if pid_alive "$HEARTLET_PID" heartlet; then
		echo "heartlet:   running (pid $(<"$HEARTLET_PID"))"
	fi
	[[ -f $HEARTLET_ENV_FILE ]] && echo "env file:   $HEARTLET_ENV_FILE"
	return $ok
}

cmd_verify_clean() {
	local left=() pid line table
	for pid in $(env_pids); do
		left+=("process $pid: $(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline")")
	done
	# Shims are matched by their -address argument above; runc containers of
	# the environment by their root.
	while IFS= read -r line; do
		[[ -n $line ]] && left+=("mount $line")
	done < <(env_mounts)
	for line in $(kubepods_dirs); do
		left+=("cgroup $line")
	done
	ip link show "$HEARTLET_BRIDGE" >/dev/null 2>&1 && left+=("link $HEARTLET_BRIDGE")
	for table in nat filter mangle; do
		while IFS= read -r line; do
			[[ -n $line ]] && left+=("iptables -t $table: $line")
		done < <(iptables_plan "$table")
	done
	for line in $(idle_portmap_chains); do
		left+=("iptables -t nat: unused portmap chain $line")
	done
	while IFS= read -r line; do
		[[ -n $line ]] && left+=("route $line")
	done < <(ip route show to match "${HEARTLET_POD_SUBNET%/*}/24" 2>/dev/null | grep -v '^default' || true)
	[[ -e $RUN ]] && left+=("directory $RUN")
	[[ -e $LIB ]] && left+=("directory $LIB")
	if ss -Hltn "sport = :${REG_ADDR##*:}" | grep -q .; then
		left+=("listener on port ${REG_ADDR##*:}")
	fi
	if ((${#left[@]})); then
		echo "the test environment left behind:"
		printf '  %s\n' "${left[@]}"
		return 1
	fi
	echo "clean: nothing of the test environment is left"
}

# One start or stop at a time (the lock is on this script, so nothing is
# left behind). The daemons are started with every fd above 2 closed so
# that they inherit neither this lock nor their starter's.
lock() {
	exec 9<"${BASH_SOURCE[0]}"
	flock -w 300 9 || die "another hack/env.sh start/stop is still running"
}

case ${1:-} in
start) lock && cmd_start ;;
stop) lock && cmd_stop ;;
status) cmd_status ;;
verify-clean) cmd_verify_clean ;;
stop-containerd) lock && cmd_stop_containerd ;;
start-containerd) lock && cmd_start_containerd ;;
restart-containerd)
	[[ ${2:-0} =~ ^[0-9]+$ ]] || die "restart-containerd: DOWN_SECONDS must be a whole number"
	lock && cmd_stop_containerd && sleep "${2:-0}" && cmd_start_containerd
	;;
*)
	echo "usage: $0 start|stop|status|verify-clean|stop-containerd|start-containerd|restart-containerd [DOWN_SECONDS]" >&2
	exit 2
	;;
esac
