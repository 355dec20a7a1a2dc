#!/usr/bin/env bash
# demo.sh: `make demo`, the end-to-end tour on a fresh Debian machine, each
# phase timed and the times listed at the end:
#   1. the engine's Debian packages when missing (docker.io, iptables:
#      scripts/bootstrap.sh --for engine) and a running engine, beside the
#      Go build of bin/ctrperf (the one waits on the network and dpkg, the
#      other on the CPUs) without runtime kubernetes (-tags nokube: the
#      smoke plan needs no cluster, and client-go is half of an empty
#      build cache's compile time; make build links it again);
#   2. ctrperf doctor for the smoke plan;
#   3. the smoke plan's images alone (ctrperf images build --for smoke:
#      ticketd, FROM scratch; no Debian base, no debootstrap);
#   4. bench run plans/smoke.yaml --quick (3 rounds of the 3
#      configurations, 0.5 s + 1.5 s each), then the HTML report.
# On a bare 2-core Debian machine (no Docker, empty Go caches: make
# demo-bare, scripts/bare-demo.sh) 97-108 s to the report on 2026-11-29
# with nothing else running (111-141 s with other work beside it), most of
# it the build (72-82 s; apt, 14-18 s, and dockerd's start, 1 s, beside it)
# and the bench run (24 s); see README.md for the measurement.
# Run by make (MAKE, BIN and DEMO_OUT from the Makefile).
set -euo pipefail
cd "$(dirname "$0")/.."
MAKE=${MAKE:-make}
BIN=${BIN:-bin/ctrperf}
DEMO_OUT=${DEMO_OUT:-out/demo}

now() { date +%s%N; }
secs() { local ms=$((($2 - $1) / 1000000)); printf '%d.%d s' $((ms / 1000)) $((ms % 1000 / 100)); }
t0=$(now)
phases=()
phase() { # phase NAME START END
	phases+=("$(printf '  %-34s %s' "$1" "$(secs "$2" "$3")")")
}

echo "demo: the engine's packages and engine, beside the Go build"
ts=$(now)
# The ends of the engine's two steps, for their lines: they usually end
# long before the build. (apt and dpkg niced made it worse, on a bare
# machine 2026-11-29: dpkg took 45 s instead of 9, the build 94 s instead
# of 75; it still slows the build while it unpacks, niced or not.)
marks=$(mktemp -d)
trap 'rm -rf "$marks"' EXIT
{
	scripts/bootstrap.sh --for engine >&2 && now >"$marks/packages" &&
		scripts/ensure-docker.sh >&2 && now >"$marks/engine"
} &
engine=$!
if ! $MAKE --no-print-directory build BUILD_TAGS=nokube; then
	wait "$engine" || true
	exit 1
fi
tb=$(now)
wait "$engine"
phase "engine packages (beside build)" "$ts" "$(<"$marks/packages")"
phase "engine start (beside build)" "$(<"$marks/packages")" "$(<"$marks/engine")"
phase "go build" "$ts" "$tb"

t=$(now)
"$BIN" doctor --plan smoke
phase "doctor" "$t" "$(now)"

t=$(now)
"$BIN" images build --for smoke
phase "images (smoke's)" "$t" "$(now)"

rm -rf "$DEMO_OUT"
t=$(now)
"$BIN" bench run plans/smoke.yaml --quick --out "$DEMO_OUT"
phase "bench run smoke --quick" "$t" "$(now)"

t=$(now)
"$BIN" report "$DEMO_OUT" --format html
phase "report" "$t" "$(now)"

echo "demo: the report after $(secs "$t0" "$(now)"):"
printf '%s\n' "${phases[@]}"
echo "demo: open $DEMO_OUT/report.html in a browser; ctrperf report $DEMO_OUT --format md for markdown"
