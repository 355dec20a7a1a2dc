#!/usr/bin/env bash
# gobuild.sh NAME [--first PKG...] -- GO BUILD ARGS...: run `go build -v
# ARGS` and show its progress: a line every 10 s with how many packages of
# the build are compiled (with an empty build cache, ctrperf's ~400 (-tags
# nokube) to ~760 take minutes on 2 cores), then the time it took. The
# compiler's own messages pass through.
#
#   scripts/gobuild.sh bin/ctrperf -- -trimpath -o bin/ctrperf ./cmd/ctrperf
#   scripts/gobuild.sh bin/ctrperf --first modernc.org/sqlite/lib -- -trimpath -o bin/ctrperf ./cmd/ctrperf
#
# --first PKG: compile PKG and its dependencies before the rest. go build
# works through its packages in the depth-first order of their imports, so
# a long chain reached late (modernc.org/libc then modernc.org/sqlite/lib:
# 30 s of one core, imported by ticketd's store) is compiled at the end
# with the other core idle. Named first, it is compiled beside everything
# else: one `go build ARGS-without-o PKG... MAIN` (which compiles and links
# all, in that order), then `go build ARGS`, which finds it all in the
# build cache and only writes the binary. With a warm cache both only look.
set -euo pipefail

name=$1
shift
first=()
if [[ ${1:-} == --first ]]; then
	shift
	while (($#)) && [[ $1 != -- ]]; do
		first+=("$1")
		shift
	done
fi
[[ ${1:-} == -- ]] && shift
GO=${GO:-go}
pkg=${!#} # the last argument: the package built
tags=()   # the build's -tags, for go list
args=("$@")
unwritten=() # args without -o FILE: the build that compiles first
for ((i = 0; i < ${#args[@]}; i++)); do
	[[ ${args[i]} == -tags ]] && tags=(-tags "${args[i + 1]}")
	if [[ ${args[i]} == -o ]]; then
		i=$((i + 1))
		continue
	fi
	((i == ${#args[@]} - 1)) || unwritten+=("${args[i]}")
done
start=$(date +%s%N)
# The number of packages, for the progress lines: go list, beside the build
# (2.6 s with an empty build cache, as long again before the first compile).
count=$(mktemp)
{ $GO list "${tags[@]}" -deps "$pkg" 2>/dev/null | wc -l >"$count.tmp" && mv "$count.tmp" "$count"; } &
lister=$!
trap 'wait "$lister"; rm -f "$count" "$count.tmp"' EXIT
total() { local n; n=$(<"$count"); printf '%s' "${n:-?}"; }
since() { local ms=$((($(date +%s%N) - start) / 1000000)); printf '%d.%d s' $((ms / 1000)) $((ms % 1000 / 100)); }

# The build, in one or two go commands (--first), with -v on stderr.
build() {
	if ((${#first[@]})); then
		$GO build -v "${unwritten[@]}" "${first[@]}" "$pkg" || return
	fi
	$GO build -v "$@"
}

# go build -v names each package as it compiles it, on stderr; a package
# path has no space and no colon, a message has.
set +e
{ build "$@" 2>&1 1>&3 3>&- | {
	n=0 last=$SECONDS
	while IFS= read -r line; do
		if [[ $line =~ ^[^\ :#]+$ ]]; then
			n=$((n + 1))
			if ((SECONDS - last >= 10)); then
				last=$SECONDS
				printf 'build: %s: %d of %s packages compiled (%s)\n' "$name" "$n" "$(total)" "$(since)"
			fi
		else
			printf '%s\n' "$line" >&2
		fi
	done
}; } 3>&1
rc=${PIPESTATUS[0]}
set -e
if ((rc != 0)); then
	printf 'build: %s failed after %s\n' "$name" "$(since)" >&2
	exit "$rc"
fi
printf 'build: %s (%s)\n' "$name" "$(since)"
