#!/usr/bin/env bash
# Runs the fuzz targets given as PKG:TARGET:BUDGET, two at a time with one
# fuzz worker each (2 cores: one target builds or links while the other
# executes), and prints each target's log whole when it ends. FUZZTIME
# overrides every budget. Exits 1 when any target failed; a crasher lands in
# PKG/testdata/fuzz/TARGET and stays a regression case of go test.
set -u
GO=${GO:-go}
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
run() {
	local t=$1 pkg rest fn budget
	pkg=${t%%:*}; rest=${t#*:}; fn=${rest%%:*}; budget=${rest#*:}
	[ -n "${FUZZTIME:-}" ] && budget=$FUZZTIME
	local log="$logs/$fn.log" start=$SECONDS
	"$GO" test -run '^$' -fuzz "^$fn\$" -fuzztime "$budget" -parallel 1 "$pkg" > "$log" 2>&1
	local rc=$?
	{ echo "fuzz $fn ($pkg, $budget): $([ $rc = 0 ] && echo ok || echo FAILED) in $((SECONDS - start)) s"; [ $rc = 0 ] || cat "$log"; } 
	return $rc
}
export -f run
export GO logs
printf '%s\n' "$@" | xargs -P 2 -I{} bash -c 'run "$1"' _ {}
