#!/usr/bin/env bash
# Runs every Go fuzz target of the repository (func FuzzXxx in a _test.go
# file), one target per go test invocation, each for FUZZTIME (a duration
# such as 4s, or a count of executions such as 20000x). Stops at nothing:
# every target runs, and the script fails if any found a failing input
# (go test writes it to the package's testdata/fuzz/FuzzXxx/, where it
# stays as a regression seed once committed).
#
#   hack/fuzz.sh [FUZZTIME] [TARGET-REGEXP]
#
# The CI stage (hack/test.sh) runs hack/fuzz.sh 300x; docs/fuzzing.md
# records the longer runs. A count is the safer budget: with a duration,
# Go 1.26's fuzzing coordinator can fail a target with "context deadline
# exceeded" when the time runs out while a worker is busy (golang/go#75804,
# fixed in Go 1.27), which a loaded machine hits.
set -uo pipefail
# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

fuzztime=${1:-300x}
only=${2:-.}
cd "$HEARTLET_REPO" || die "cannot cd to $HEARTLET_REPO"

failed=()
count=0
while IFS=: read -r file name; do
	[[ $name =~ $only ]] || continue
	pkg=./$(dirname "$file")
	count=$((count + 1))
	log "fuzz $pkg $name for $fuzztime"
	if ! go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$pkg"; then
		failed+=("$pkg $name")
	fi
done < <(grep -rHoE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]+' internal cmd 2>/dev/null |
	sed 's/func //' | sort)

((count > 0)) || die "no fuzz target matched $only"
if ((${#failed[@]})); then
	log "fuzz targets that failed: ${failed[*]}"
	exit 1
fi
log "$count fuzz targets ran for $fuzztime each"
