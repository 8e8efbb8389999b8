#!/usr/bin/env bash
# A private Kubernetes control plane on loopback for heartlet's cluster-mode
# tests: etcd, kube-apiserver (Node,RBAC authorization and NodeRestriction),
# kube-controller-manager and kube-scheduler, each with its own certificates
# and kubeconfig, never the host's defaults.
#
# Usage: hack/kube.sh start|stop|status|stop-apiserver|start-apiserver
#   start   builds the binaries if they are not cached (hack/tools/kube),
#           creates the PKI under /var/lib/heartlet-kube/pki (kept across
#           runs), starts the daemons, waits for /readyz, the default
#           ServiceAccount and the kube-root-ca.crt ConfigMap, and writes
#           /run/heartlet-kube/env, which exports HEARTLET_KUBECONFIG (admin),
#           KUBECONFIG (admin, for kubectl), HEARTLET_NODE_KUBECONFIG
#           (system:node:heartlet-e2e in group system:nodes) and
#           HEARTLET_NODE_NAME. Idempotent.
#   stop    stops exactly the daemons it started (pid files) and removes the
#           cluster state (etcd data, kubeconfigs, /run/heartlet-kube); the
#           PKI is kept. Set HEARTLET_KUBE_LOGS=DIR to keep the daemons' logs.
#   status  prints the state; exits 0 only when the control plane is up.
#   stop-apiserver, start-apiserver
#           stop (TERM) and start again only kube-apiserver, with the same
#           flags, for failure drills; etcd, the controller manager and the
#           scheduler keep running. Use them only while no one else uses the
#           control plane.
#
# Endpoints (all on 127.0.0.1): etcd 23790 (peer 23800), kube-apiserver
# 6443, controller manager 10257, scheduler 10259. The controller manager
# runs with --node-monitor-grace-period=20s (HEARTLET_KUBE_NODE_GRACE), so a
# node that stops renewing its Lease turns NotReady (Ready=Unknown) within
# about 25 s instead of the upstream 50 s.
set -euo pipefail
# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RUN=$HEARTLET_KUBE_RUN
LIB=$HEARTLET_KUBE_LIB
PKI=$LIB/pki
LOGS=$LIB/logs
ETCD_DATA=$LIB/etcd
BIN=$HEARTLET_KUBE_BIN_DIR
NODE=$HEARTLET_KUBE_NODE
NODE_GRACE=${HEARTLET_KUBE_NODE_GRACE:-20s}

ETCD_PORT=23790
ETCD_PEER_PORT=23800
API_PORT=6443
CM_PORT=10257
SCHED_PORT=10259
API_URL=https://127.0.0.1:$API_PORT
SERVICE_CIDR=10.96.0.0/16
SERVICE_IP=10.96.0.1
CLUSTER_DOMAIN=cluster.local
SA_ISSUER=https://kubernetes.default.svc.$CLUSTER_DOMAIN

ADMIN_KUBECONFIG=$RUN/admin.kubeconfig
NODE_KUBECONFIG=$RUN/node.kubeconfig
CM_KUBECONFIG=$RUN/controller-manager.kubeconfig
SCHED_KUBECONFIG=$RUN/scheduler.kubeconfig

# DAEMONS in start order; each has $RUN/NAME.pid and $LOGS/NAME.log.
DAEMONS=(etcd kube-apiserver kube-controller-manager kube-scheduler)
PORTS=("$ETCD_PORT" "$ETCD_PEER_PORT" "$API_PORT" "$CM_PORT" "$SCHED_PORT")

# pid_of NAME prints the pid of daemon NAME if it is alive and runs NAME.
pid_of() {
	local f=$RUN/$1.pid pid
	[[ -f $f ]] || return 1
	pid=$(<"$f")
	[[ -n $pid && -r /proc/$pid/exe ]] || return 1
	[[ $(basename "$(readlink "/proc/$pid/exe" 2>/dev/null)") == "$1" ]] || return 1
	printf '%s\n' "$pid"
}

kubectl_admin() { kubectl --kubeconfig "$ADMIN_KUBECONFIG" --request-timeout 10s "$@"; }

# https_ok PORT PATH succeeds when the loopback endpoint answers 200 "ok".
https_ok() {
	[[ $(curl -ksf --max-time 5 "https://127.0.0.1:$1$2" 2>/dev/null) == ok ]]
}

etcd_up() { pid_of etcd >/dev/null && curl -sf --max-time 5 "http://127.0.0.1:$ETCD_PORT/health" | grep -q '"health":"true"'; }
apiserver_up() { pid_of kube-apiserver >/dev/null && [[ $(kubectl_admin get --raw /readyz 2>/dev/null) == ok ]]; }
cm_up() { pid_of kube-controller-manager >/dev/null && https_ok "$CM_PORT" /healthz; }
sched_up() { pid_of kube-scheduler >/dev/null && https_ok "$SCHED_PORT" /healthz; }
all_up() { etcd_up && apiserver_up && cm_up && sched_up; }

# ---- PKI ----------------------------------------------------------------

# new_ca NAME CN creates a self-signed CA NAME.crt/NAME.key.
new_ca() {
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout "$PKI/$1.key" -out "$PKI/$1.crt" -days 3650 -subj "/CN=$2" \
		-addext "basicConstraints=critical,CA:TRUE" \
		-addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null
}

# new_cert CA NAME SUBJECT USAGE [SANS] creates NAME.crt/NAME.key signed by
# CA, for USAGE (clientAuth or serverAuth), with optional subjectAltNames.
new_cert() {
	local ca=$1 name=$2 subj=$3 usage=$4 sans=${5:-} ext
	ext=$(mktemp)
	{
		echo "basicConstraints=critical,CA:FALSE"
		echo "keyUsage=critical,digitalSignature,keyEncipherment"
		echo "extendedKeyUsage=$usage"
		[[ -n $sans ]] && echo "subjectAltName=$sans"
	} >"$ext"
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout "$PKI/$name.key" -out "$PKI/$name.csr" -subj "$subj" 2>/dev/null
	openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/$ca.crt" -CAkey "$PKI/$ca.key" \
		-CAcreateserial -days 365 -extfile "$ext" -out "$PKI/$name.crt" 2>/dev/null
	rm -f "$ext" "$PKI/$name.csr"
}

PKI_FILES=(ca front-proxy-ca apiserver apiserver-kubelet-client front-proxy-client
	admin node controller-manager scheduler)

# pki_valid succeeds when every certificate exists and is valid for a day.
pki_valid() {
	local f
	for f in "${PKI_FILES[@]}"; do
		[[ -f $PKI/$f.key ]] && openssl x509 -noout -checkend 86400 -in "$PKI/$f.crt" >/dev/null 2>&1 || return 1
	done
	[[ -f $PKI/sa.key && -f $PKI/sa.pub ]]
}

make_pki() {
	if pki_valid; then
		return 0
	fi
	log "creating certificates in $PKI"
	rm -rf "$PKI"
	mkdir -p "$PKI"
	chmod 700 "$PKI"
	new_ca ca heartlet-kube-ca
	new_ca front-proxy-ca heartlet-kube-front-proxy-ca
	new_cert ca apiserver "/CN=kube-apiserver" serverAuth \
		"IP:127.0.0.1,IP:$SERVICE_IP,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.$CLUSTER_DOMAIN"
	new_cert ca apiserver-kubelet-client "/O=kube-apiserver-kubelet-client/CN=kube-apiserver-kubelet-client" clientAuth
	new_cert front-proxy-ca front-proxy-client "/CN=front-proxy-client" clientAuth
	new_cert ca admin "/O=system:masters/CN=heartlet-kube-admin" clientAuth
	new_cert ca node "/O=system:nodes/CN=system:node:$NODE" clientAuth
	new_cert ca controller-manager "/CN=system:kube-controller-manager" clientAuth
	new_cert ca scheduler "/CN=system:kube-scheduler" clientAuth
	openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
	openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
}

# write_kubeconfig FILE CERT_NAME USER writes a kubeconfig with the
# certificates embedded, so that it can be copied anywhere.
write_kubeconfig() {
	local file=$1 cert=$2 user=$3
	cat >"$file.tmp" <<-EOF
		apiVersion: v1
		kind: Config
		clusters:
		- name: heartlet-kube
		  cluster:
		    server: $API_URL
		    certificate-authority-data: $(base64 -w0 "$PKI/ca.crt")
		users:
		- name: $user
		  user:
		    client-certificate-data: $(base64 -w0 "$PKI/$cert.crt")
		    client-key-data: $(base64 -w0 "$PKI/$cert.key")
		contexts:
		- name: $user@heartlet-kube
		  context:
		    cluster: heartlet-kube
		    user: $user
		current-context: $user@heartlet-kube
	EOF
	chmod 600 "$file.tmp"
	mv "$file.tmp" "$file"
}

write_env_file() {
	cat >"$HEARTLET_KUBE_ENV_FILE.tmp" <<-EOF
		# Written by hack/kube.sh start. Source it to use the test control plane.
		export HEARTLET_KUBECONFIG=$ADMIN_KUBECONFIG
		export HEARTLET_NODE_KUBECONFIG=$NODE_KUBECONFIG
		export HEARTLET_NODE_NAME=$NODE
		export HEARTLET_KUBE_RUN=$RUN
		export HEARTLET_KUBE_LIB=$LIB
		export KUBECONFIG=$ADMIN_KUBECONFIG
	EOF
	mv "$HEARTLET_KUBE_ENV_FILE.tmp" "$HEARTLET_KUBE_ENV_FILE"
}

# ---- daemons --------------------------------------------------------------

# run_daemon NAME ARGS... starts BIN/NAME (or etcd from PATH) in its own
# session, logging to LOGS/NAME.log.
run_daemon() {
	local name=$1 exe
	shift
	if [[ $name == etcd ]]; then
		exe=$(command -v etcd) || die "etcd missing; run hack/setup.sh"
	else
		exe=$BIN/$name
	fi
	spawn_daemon "$LOGS/$name.log" "$exe" "$@"
	echo $! >"$RUN/$name.pid"
}

# await SECONDS NAME CHECK waits for CHECK, printing NAME's log on failure.
await() {
	local timeout=$1 name=$2 check=$3
	wait_for "$timeout" "$name" "$check" && return 0
	tail -n 40 "$LOGS/$name.log" >&2 || true
	return 1
}

start_etcd() {
	mkdir -p "$ETCD_DATA"
	chmod 700 "$ETCD_DATA"
	run_daemon etcd --name heartlet-kube --data-dir "$ETCD_DATA" \
		--listen-client-urls "http://127.0.0.1:$ETCD_PORT" \
		--advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
		--listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
		--initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
		--initial-cluster "heartlet-kube=http://127.0.0.1:$ETCD_PEER_PORT" \
		--listen-metrics-urls "" --log-level warn
	await 30 etcd etcd_up
}

start_apiserver() {
	run_daemon kube-apiserver \
		--etcd-servers "http://127.0.0.1:$ETCD_PORT" \
		--bind-address 127.0.0.1 --secure-port "$API_PORT" \
		--advertise-address 127.0.0.1 --endpoint-reconciler-type none \
		--authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
		--enable-bootstrap-token-auth \
		--allow-privileged=true \
		--client-ca-file "$PKI/ca.crt" \
		--tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
		--service-cluster-ip-range "$SERVICE_CIDR" \
		--service-account-issuer "$SA_ISSUER" \
		--service-account-key-file "$PKI/sa.pub" \
		--service-account-signing-key-file "$PKI/sa.key" \
		--kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" \
		--kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
		--kubelet-preferred-address-types InternalIP,Hostname \
		--requestheader-client-ca-file "$PKI/front-proxy-ca.crt" \
		--requestheader-allowed-names front-proxy-client \
		--requestheader-username-headers X-Remote-User \
		--requestheader-group-headers X-Remote-Group \
		--requestheader-extra-headers-prefix X-Remote-Extra- \
		--proxy-client-cert-file "$PKI/front-proxy-client.crt" \
		--proxy-client-key-file "$PKI/front-proxy-client.key" \
		--profiling=false
	await 90 kube-apiserver apiserver_up
}

start_controller_manager() {
	run_daemon kube-controller-manager \
		--kubeconfig "$CM_KUBECONFIG" \
		--authentication-kubeconfig "$CM_KUBECONFIG" \
		--authorization-kubeconfig "$CM_KUBECONFIG" \
		--bind-address 127.0.0.1 --secure-port "$CM_PORT" --leader-elect=false \
		--service-account-private-key-file "$PKI/sa.key" \
		--root-ca-file "$PKI/ca.crt" \
		--use-service-account-credentials \
		--cluster-signing-cert-file "$PKI/ca.crt" \
		--cluster-signing-key-file "$PKI/ca.key" \
		--service-cluster-ip-range "$SERVICE_CIDR" \
		--node-monitor-grace-period "$NODE_GRACE" \
		--profiling=false
	await 60 kube-controller-manager cm_up
}

start_scheduler() {
	run_daemon kube-scheduler \
		--kubeconfig "$SCHED_KUBECONFIG" \
		--authentication-kubeconfig "$SCHED_KUBECONFIG" \
		--authorization-kubeconfig "$SCHED_KUBECONFIG" \
		--bind-address 127.0.0.1 --secure-port "$SCHED_PORT" --leader-elect=false \
		--profiling=false
	await 60 kube-scheduler sched_up
}

# bootstrap creates what a kubeadm cluster would have: the apiserver's
# kubelet-client identity may use every kubelet API (kubectl logs, exec, ...
# go through it to the node's webhook-authorized port). The node itself
# needs nothing more: it creates TokenReviews and SubjectAccessReviews for
# its kubelet API under the Node authorizer, whose node rules
# (bootstrappolicy NodeRules, the system:node role) allow both.
bootstrap() {
	kubectl_admin get clusterrolebinding heartlet-kube-apiserver-kubelet-client >/dev/null 2>&1 ||
		kubectl_admin create clusterrolebinding heartlet-kube-apiserver-kubelet-client \
			--clusterrole system:kubelet-api-admin --user kube-apiserver-kubelet-client >/dev/null
}

default_sa_ready() {
	kubectl_admin -n default get serviceaccount default &&
		kubectl_admin -n default get configmap kube-root-ca.crt
}

# busy_ports prints the control plane's ports that something listens on.
busy_ports() {
	local p
	for p in "${PORTS[@]}"; do
		ss -Hltn "sport = :$p" | grep -q . && printf '%s\n' "$p"
	done
	return 0
}

cmd_start() {
	need_root
	local start busy
	start=$(now_ms)
	if all_up; then
		write_env_file
		log "control plane already running at $API_URL"
		return 0
	fi
	if [[ -e $RUN || -e $ETCD_DATA ]]; then
		log "cleaning up a partial control plane first"
		cmd_stop
	fi
	command -v openssl >/dev/null || die "openssl missing; run hack/setup.sh"
	command -v etcd >/dev/null || die "etcd missing; run hack/setup.sh"
	command -v kubectl >/dev/null || die "kubectl missing"
	busy=$(busy_ports | paste -sd' ')
	[[ -z $busy ]] || die "ports in use: $busy; the control plane needs them"
	build_kube_binaries || die "cannot build the control plane"

	mkdir -p "$RUN" "$LIB" "$LOGS"
	make_pki
	write_kubeconfig "$ADMIN_KUBECONFIG" admin admin
	write_kubeconfig "$NODE_KUBECONFIG" node "system:node:$NODE"
	write_kubeconfig "$CM_KUBECONFIG" controller-manager system:kube-controller-manager
	write_kubeconfig "$SCHED_KUBECONFIG" scheduler system:kube-scheduler

	start_etcd || die "etcd did not start"
	start_apiserver || die "kube-apiserver did not become ready"
	bootstrap || die "cannot create the bootstrap RBAC objects"
	start_controller_manager || die "kube-controller-manager did not start"
	start_scheduler || die "kube-scheduler did not start"
	wait_for 60 "the default ServiceAccount and kube-root-ca.crt" default_sa_ready ||
		die "the controller manager did not create the default ServiceAccount"
	write_env_file
	log "control plane up in $(elapsed "$start") at $API_URL (source $HEARTLET_KUBE_ENV_FILE)"
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

cmd_stop() {
	need_root
	local i name pid busy rc=0
	# Reverse start order: clients first, etcd last.
	for ((i = ${#DAEMONS[@]} - 1; i >= 0; i--)); do
		name=${DAEMONS[i]}
		if pid=$(pid_of "$name"); then
			stop_pid "$pid" 20
		fi
		rm -f "$RUN/$name.pid"
	done
	if [[ -n ${HEARTLET_KUBE_LOGS:-} && -d $LOGS ]]; then
		mkdir -p "$HEARTLET_KUBE_LOGS"
		for name in "${DAEMONS[@]}"; do
			[[ -f $LOGS/$name.log ]] && cp "$LOGS/$name.log" "$HEARTLET_KUBE_LOGS/"
		done
	fi
	rm -rf "$RUN" "$ETCD_DATA" "$LOGS"
	busy=$(busy_ports | paste -sd' ')
	if [[ -n $busy ]]; then
		warn "ports still in use after stop: $busy"
		rc=1
	fi
	log "control plane stopped"
	return $rc
}

cmd_stop_apiserver() {
	need_root
	local pid start
	start=$(now_ms)
	pid=$(pid_of kube-apiserver) || die "kube-apiserver is not running"
	stop_pid "$pid" 20
	log "kube-apiserver stopped in $(elapsed "$start")"
}

cmd_start_apiserver() {
	need_root
	local start
	start=$(now_ms)
	if apiserver_up; then
		log "kube-apiserver already running"
		return 0
	fi
	pid_of kube-apiserver >/dev/null && die "kube-apiserver runs but is not ready"
	if [[ ! -f $ADMIN_KUBECONFIG ]] || ! pki_valid; then
		die "no control plane state; run hack/kube.sh start"
	fi
	etcd_up || die "etcd is not running; run hack/kube.sh start"
	start_apiserver || die "kube-apiserver did not become ready"
	log "kube-apiserver ready in $(elapsed "$start")"
}

cmd_status() {
	local name pid up=0
	for name in "${DAEMONS[@]}"; do
		if pid=$(pid_of "$name"); then
			printf '%-24s running (pid %s)\n' "$name" "$pid"
		else
			printf '%-24s not running\n' "$name"
			up=1
		fi
	done
	if ((up == 0)) && all_up; then
		echo "control plane ready at $API_URL (env: $HEARTLET_KUBE_ENV_FILE)"
		return 0
	fi
	echo "control plane not ready"
	return 1
}

case ${1:-} in
start) cmd_start ;;
stop) cmd_stop ;;
status) cmd_status ;;
stop-apiserver) cmd_stop_apiserver ;;
start-apiserver) cmd_start_apiserver ;;
*)
	echo "usage: $0 start|stop|status|stop-apiserver|start-apiserver" >&2
	exit 2
	;;
esac
