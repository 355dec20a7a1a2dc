#!/usr/bin/env bash
# gobuild.sh NAME -- GO BUILD ARGS...: run `go build -v ARGS` and show its
# progress: a line every 10 s with how many packages of the build are
# compiled (with an empty build cache, ctrperf's ~760 take minutes on 2
# cores), then the time it took. The compiler's own messages pass through.
#
#   scripts/gobuild.sh bin/ctrperf -- -trimpath -o bin/ctrperf ./cmd/ctrperf
set -euo pipefail

name=$1
shift
[[ ${1:-} == -- ]] && shift
GO=${GO:-go}
pkg=${!#} # the last argument: the package built
tags=()   # the build's -tags, for go list
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
	[[ ${args[i]} == -tags ]] && tags=(-tags "${args[i + 1]}")
done
total=$($GO list "${tags[@]}" -deps "$pkg" 2>/dev/null | wc -l) || total=0
start=$(date +%s%N)
since() { local ms=$((($(date +%s%N) - start) / 1000000)); printf '%d.%d s' $((ms / 1000)) $((ms % 1000 / 100)); }

# go build -v names each package as it compiles it, on stderr; a package
# path has no space and no colon, a message has.
set +e
{ $GO build -v "$@" 2>&1 1>&3 3>&- | {
	n=0 last=$SECONDS
	while IFS= read -r line; do
		if [[ $line =~ ^[^\ :#]+$ ]]; then
			n=$((n + 1))
			if ((SECONDS - last >= 10)); then
				last=$SECONDS
				printf 'build: %s: %d of %d packages compiled (%s)\n' "$name" "$n" "$total" "$(since)"
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
