#!/usr/bin/env bash
# The project's test command: static checks, unit tests, then the end-to-end
# tests against a private containerd (hack/env.sh), which is always torn
# down and verified clean afterwards. Runs every stage and exits non-zero if
# any failed. Must run as root.
#
# Environment:
#   HEARTLET_E2E_RUN   passed to the e2e run as -run (select tests)
#   HEARTLET_E2E_SKIP  passed to the e2e run as -skip (default: none)
#   HEARTLET_FUZZTIME  how long each fuzz target runs (default 300x: 300
#                      executions)
#   HEARTLET_SKIP_E2E  set to 1 to stop after the unit and fuzz tests
#   HEARTLET_ONLY      e2e or integration: skip the static checks, unit and
#                      fuzz tests and run only that stage against the
#                      environment (with HEARTLET_E2E_RUN, one feature's
#                      e2e tests)
#   HEARTLET_SKIP_KUBE set to 1 to run the e2e tests without the control
#                      plane of hack/kube.sh (the cluster tests then skip)
#   HEARTLET_ARTIFACTS directory for the daemons' logs (default: a new
#                      directory under /tmp)
set -uo pipefail
# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

need_root
cd "$HEARTLET_REPO" || die "cannot cd to $HEARTLET_REPO"
failed=()
summary=()

# stage NAME CMD... runs one stage and records its result.
stage() {
	local name=$1 start rc=0
	shift
	log "==> $name"
	start=$(now_ms)
	"$@" || rc=$?
	if ((rc == 0)); then
		summary+=("ok      $name ($(elapsed "$start"))")
	else
		summary+=("FAILED  $name ($(elapsed "$start"), exit $rc)")
		failed+=("$name")
	fi
	return $rc
}

finish() {
	log "==> summary"
	printf '  %s\n' "${summary[@]}" >&2
	if ((${#failed[@]})); then
		log "FAILED: ${failed[*]}"
		exit 1
	fi
	log "all stages passed"
	exit 0
}

gofmt_check() {
	local out
	out=$(gofmt -l .) || return 1
	if [[ -n $out ]]; then
		echo "gofmt needed on:" >&2
		echo "$out" >&2
		return 1
	fi
}

stage setup hack/setup.sh test || finish
if [[ -z ${HEARTLET_ONLY:-} ]]; then
	stage gofmt gofmt_check
	# With the e2e tag the checks cover the end-to-end tests too.
	stage vet go vet -tags e2e,integration ./...
	stage staticcheck staticcheck -tags e2e,integration ./...
	# The setup installs systemd-analyze, so the unit files' check must not skip.
	stage unit env HEARTLET_REQUIRE_SYSTEMD_ANALYZE=1 go test -race ./...
	# Every fuzz target for 300 executions (mostly building: a few minutes); a
	# failing input lands in testdata/fuzz/ (docs/fuzzing.md).
	stage fuzz hack/fuzz.sh "${HEARTLET_FUZZTIME:-300x}"
fi

if [[ ${HEARTLET_SKIP_E2E:-} == 1 ]]; then
	finish
fi

artifacts=${HEARTLET_ARTIFACTS:-$(mktemp -d /tmp/heartlet-test.XXXXXX)}
mkdir -p "$artifacts"
env_stopped=false
stop_env() {
	$env_stopped && return 0
	env_stopped=true
	HEARTLET_ENV_LOGS=$artifacts stage env-stop hack/env.sh stop
	stage env-verify-clean hack/env.sh verify-clean
	log "daemon logs kept in $artifacts"
}
kube_started=false
kube_stopped=false
stop_kube() {
	$kube_started || return 0
	$kube_stopped && return 0
	kube_stopped=true
	HEARTLET_KUBE_LOGS=$artifacts/kube stage kube-stop hack/kube.sh stop
}
trap 'stop_kube; stop_env; finish' EXIT
trap 'log "interrupted"; failed+=(interrupted); exit 130' INT TERM

e2e() {
	# shellcheck source=/dev/null
	source "$HEARTLET_ENV_FILE"
	if $kube_started && [[ -f $HEARTLET_KUBE_ENV_FILE ]]; then
		# shellcheck source=/dev/null
		source "$HEARTLET_KUBE_ENV_FILE"
	fi
	local args=(-tags e2e -count=1 -v -timeout 50m)
	[[ -n ${HEARTLET_E2E_RUN:-} ]] && args+=(-run "$HEARTLET_E2E_RUN")
	[[ -n ${HEARTLET_E2E_SKIP:-} ]] && args+=(-skip "$HEARTLET_E2E_SKIP")
	HEARTLET_BIN=$HEARTLET_REPO/bin/heartlet \
		HEARTLET_CSI_DRIVER_BIN=$HEARTLET_CSI_DRIVER_BIN \
		HEARTLET_CSI_REGISTRAR_BIN=$HEARTLET_CSI_REGISTRAR_BIN \
		HEARTLET_CSIMOCK_BIN=$HEARTLET_CSIMOCK_BIN \
		go test "${args[@]}" ./test/e2e/...
}

# The integration tests of single packages against the real containerd,
# cgroups, tmpfs and control plane (build tag integration), and the storage
# tests' own CSI parts (csi-sanity against test/csi/driver).
integration() {
	# shellcheck source=/dev/null
	source "$HEARTLET_ENV_FILE"
	if $kube_started && [[ -f $HEARTLET_KUBE_ENV_FILE ]]; then
		# shellcheck source=/dev/null
		source "$HEARTLET_KUBE_ENV_FILE"
	fi
	go test -tags integration -count=1 ./internal/... ./test/csi/...
}

# A fresh environment: nothing left from earlier runs or other users.
env_start() {
	if hack/env.sh status >/dev/null 2>&1; then
		log "restarting the running test environment for a clean run"
		hack/env.sh stop || return 1
	fi
	hack/env.sh start
}

# A fresh control plane for the cluster-mode tests (an empty etcd).
kube_start() {
	kube_started=true
	if hack/kube.sh status >/dev/null 2>&1; then
		log "restarting the running control plane for a clean run"
		hack/kube.sh stop || return 1
	fi
	hack/kube.sh start
}

if stage env-start env_start &&
	stage build env CGO_ENABLED=0 go build -o bin/heartlet ./cmd/heartlet &&
	stage build-csi build_csi_binaries; then
	# Without a control plane the cluster tests skip; the failed stage is
	# reported either way.
	if [[ ${HEARTLET_SKIP_KUBE:-} != 1 ]]; then
		stage kube-start kube_start || true
	fi
	[[ ${HEARTLET_ONLY:-} == integration ]] || stage e2e e2e
	[[ ${HEARTLET_ONLY:-} == e2e ]] || stage integration integration
fi
# The EXIT trap stops the environment and prints the summary.
