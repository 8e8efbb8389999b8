#!/usr/bin/env bash
# Runs heartlet in standalone mode on the private test environment: the
# static pods of examples/static-pods, the read-only port on 10255. Ctrl-C
# (or SIGTERM) stops heartlet, then the environment. Extra arguments go to
# heartlet. Set HEARTLET_KEEP_ENV=1 to leave the environment running.
set -euo pipefail
# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

need_root
cd "$HEARTLET_REPO"
hack/setup.sh run
hack/env.sh start
CGO_ENABLED=0 go build -o bin/heartlet ./cmd/heartlet

root_dir=$HEARTLET_ENV_LIB/heartlet
mkdir -p "$root_dir"
# Run from hack/ so that the config's relative staticPodPath resolves the
# same whether it is taken relative to the config file (as the upstream
# kubelet does) or to the working directory.
(cd hack && exec ../bin/heartlet --config standalone-config.yaml --root-dir "$root_dir" "$@") &
pid=$!
echo "$pid" >"$HEARTLET_ENV_RUN/heartlet.pid"
log "heartlet running (pid $pid); pods: curl -s http://127.0.0.1:10255/pods ; Ctrl-C stops"

trap 'kill -TERM "$pid" 2>/dev/null || true' INT TERM
rc=0
while kill -0 "$pid" 2>/dev/null; do
	wait "$pid" && rc=0 || rc=$?
done
trap - INT TERM
rm -f "$HEARTLET_ENV_RUN/heartlet.pid"
log "heartlet exited with status $rc"
if [[ ${HEARTLET_KEEP_ENV:-} != 1 ]]; then
	hack/env.sh stop
fi
exit "$rc"
