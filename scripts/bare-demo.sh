#!/usr/bin/env bash
# bare-demo.sh: `make demo-bare`, issue 38's measurement of `make demo` on a
# bare Debian machine, made on this one: a container of ctrperf's own
# (ctrperf-bare-demo-PID, label ctrperf=bare-demo) from the local Debian
# base image (never pulled), with
#   - no Docker: `make demo` installs docker.io from Debian and starts
#     dockerd inside (a nested engine: the host's capabilities less module
#     loading, raw I/O and reboot, unconfined seccomp, AppArmor and system
#     paths, the host's cgroup hierarchy read-write, /var/lib/docker on a
#     volume of its own);
#   - this machine's apt sources, CA bundle and Go toolchain (GOROOT
#     bind-mounted read only, the go env file copied), empty GOCACHE and
#     GOMODCACHE, an empty apt index and package cache;
#   - git and make (installed before, untimed: what the clone itself needs)
#     and a fresh `git clone` of COMMIT (default HEAD: commit what you want
#     measured).
# The timed part, `make demo` in the clone, runs under the bench lock
# (exclusive) with uptime before and after; the phases are printed at the
# end, the whole log kept in $BARE_OUT (out/bare-demo)/log, the demo's
# results and report in $BARE_OUT/demo. Everything is removed afterwards
# (container, volume, cgroups), on failure and Ctrl-C too.
#
#   scripts/bare-demo.sh [COMMIT]
#
# What differs from a real bare machine: the kernel is this machine's, its
# modules (overlay, bridge, netfilter) already loaded; the base image is
# ctrperf's Debian base, with the benchmarks' servers and some of
# docker.io's libraries (libdevmapper, libseccomp) already there; the apt
# index is emptied after git and make are installed (a user who just
# installed them has a fresh one: apt-get update is then faster); apt and
# the module proxy are reached through this machine's NAT.
#
# Bash reads a script as it runs: run it from a clone you do not edit
# meanwhile.
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE=${BARE_IMAGE:-ctrperf/debian-base}
LOCK=${BARE_LOCK:-/tmp/ctrperf-bench.lock}
OUT=${BARE_OUT:-out/bare-demo}
ref=${1:-HEAD}
name=ctrperf-bare-demo-$$
cg=/ctrperf/$name # the container's and its inner containers' cgroup parent

say() { printf 'bare-demo: %s\n' "$*"; }
die() { printf 'bare-demo: %s\n' "$*" >&2; exit 1; }
now() { date +%s%N; }
secs() { local ms=$((($2 - $1) / 1000000)); printf '%d.%d s' $((ms / 1000)) $((ms % 1000 / 100)); }

command -v docker >/dev/null || die "needs a Docker engine on this machine (make engine)"
docker image inspect "$IMAGE" >/dev/null 2>&1 || die "no local image $IMAGE (never pulled): make images"
commit=$(git rev-parse --verify "$ref^{commit}") || die "$ref: no such commit"
gitdir=$(git rev-parse --path-format=absolute --git-common-dir)
goroot=$(go env GOROOT)
goenv=$(go env GOENV)
[[ $(id -u) == 0 ]] || die "run as root (the container gets the host's capabilities)"

# The capabilities of this process's bounding set as Docker names them, less
# those that reach the kernel itself (as internal/engine/daemon's nested
# engine): --privileged needs every capability, which the engine may lack.
capnames=(CHOWN DAC_OVERRIDE DAC_READ_SEARCH FOWNER FSETID KILL SETGID SETUID SETPCAP LINUX_IMMUTABLE
	NET_BIND_SERVICE NET_BROADCAST NET_ADMIN NET_RAW IPC_LOCK IPC_OWNER SYS_MODULE SYS_RAWIO SYS_CHROOT
	SYS_PTRACE SYS_PACCT SYS_ADMIN SYS_BOOT SYS_NICE SYS_RESOURCE SYS_TIME SYS_TTY_CONFIG MKNOD LEASE
	AUDIT_WRITE AUDIT_CONTROL SETFCAP MAC_OVERRIDE MAC_ADMIN SYSLOG WAKE_ALARM BLOCK_SUSPEND AUDIT_READ)
# (PERFMON, BPF and CHECKPOINT_RESTORE left out: Docker 20.10 knows none of
# them, and the engine needs none.)
bnd=$((16#$(awk '$1 == "CapBnd:" {print $2}' /proc/self/status)))
caps=()
for i in "${!capnames[@]}"; do
	case ${capnames[i]} in SYS_MODULE | SYS_RAWIO | SYS_BOOT) continue ;; esac
	((bnd >> i & 1)) && caps+=(--cap-add "${capnames[i]}")
done

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	docker rm -f -v "$name" >/dev/null 2>&1 || true
	docker volume rm -f "$name" >/dev/null 2>&1 || true
	# The cgroups of the container and of the engine's containers inside,
	# empty once the container is gone (its pid namespace with it).
	local h
	for h in /sys/fs/cgroup/*/; do
		[[ -d $h${cg#/} ]] && find "$h${cg#/}" -depth -type d -exec rmdir {} + 2>/dev/null
	done
	say "removed $name"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mkdir -p "$OUT"
say "$name: $IMAGE, commit $(git rev-parse --short "$commit"), Go $(go env GOVERSION) from $goroot"
docker volume create --label ctrperf=bare-demo "$name" >/dev/null
docker run -d --init --name "$name" --hostname bare-demo --label ctrperf=bare-demo --cgroup-parent "$cg" \
	"${caps[@]}" --security-opt seccomp=unconfined --security-opt apparmor=unconfined \
	--security-opt systempaths=unconfined \
	-v /sys/fs/cgroup:/sys/fs/cgroup:rw -v "$goroot:/usr/local/go:ro" -v "$gitdir:/src.git:ro" \
	--mount "type=volume,src=$name,dst=/var/lib/docker" \
	-e PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	--entrypoint sleep "$IMAGE" infinity >/dev/null
inside() { docker exec "$name" bash -c "$1"; }

# This machine's apt sources (not the image's), its trusted CAs (its
# network may reach the Go module proxy through a proxy of its own), its go
# env file, and the
# inner engine's cgroup parent (beside the container, not under the host
# engine's /docker).
docker cp /etc/apt/sources.list.d/. "$name:/etc/apt/sources.list.d/"
docker cp -L /etc/ssl/certs/ca-certificates.crt "$name:/etc/ssl/certs/ca-certificates.crt"
inside 'rm -f /etc/apt/sources.list /etc/apt/sources.list.d/*.disabled* && mkdir -p /root/.config/go /etc/docker'
[[ -r $goenv ]] && docker cp "$goenv" "$name:/root/.config/go/env"
printf '{"cgroup-parent": "%s"}\n' "$cg" | docker exec -i "$name" tee /etc/docker/daemon.json >/dev/null
diff <(cat /etc/apt/sources.list.d/*.sources) <(inside 'cat /etc/apt/sources.list.d/*.sources') >/dev/null ||
	die "the container's apt sources differ from this machine's"

t=$(now)
inside 'export DEBIAN_FRONTEND=noninteractive; apt-get update -qq && apt-get install -y -qq --no-install-recommends git make >/dev/null &&
	apt-get clean && rm -rf /var/lib/apt/lists/*'
say "git and make installed (untimed: the clone needs them) in $(secs "$t" "$(now)"); apt index and package cache emptied again"
inside "git clone -q --no-local /src.git /root/ctrperf && git -C /root/ctrperf checkout -q $commit"

# What makes it bare, checked.
inside '! command -v docker && ! command -v dockerd && ! command -v containerd' >/dev/null ||
	die "Docker is installed in $IMAGE: not a bare machine"
inside 'for d in "$(go env GOCACHE)" "$(go env GOMODCACHE)"; do [[ ! -e $d ]] || { echo "$d exists"; exit 1; }; done' ||
	die "the Go caches are not empty"
inside '[[ -z $(ls -A /var/lib/apt/lists 2>/dev/null) ]]' || die "the apt index is not empty"
say "bare: no docker, dockerd or containerd; no GOCACHE, no GOMODCACHE, no apt index; $(inside 'go version')"

# flock -o: what the timed part starts does not hold the lock after it.
say "make demo in /root/ctrperf, under $LOCK (exclusive; waits for the lock)"
export name OUT
: >"$OUT/times"
rc=0
flock -o "$LOCK" bash -c '
	t() { printf "bare-demo: %s\n" "$*" | tee -a "$OUT/times"; }
	t "before: $(uptime)"
	start=$(date +%s%N)
	set +e
	docker exec -w /root/ctrperf "$name" make demo 2>&1 | tee "$OUT/log"
	rc=${PIPESTATUS[0]}
	end=$(date +%s%N)
	t "after: $(uptime)"
	ms=$(((end - start) / 1000000))
	t "make demo exited $rc after $((ms / 1000)).$((ms % 1000 / 100)) s"
	exit "$rc"
' || rc=$?
# The demo's results and report, to look at after the container is gone.
rm -rf "$OUT/demo"
docker cp "$name:/root/ctrperf/out/demo" "$OUT/demo" 2>/dev/null || true
# The phases again, together: apt's steps (bootstrap), the build, then
# demo.sh's list of them all.
{
	echo "bare-demo: phases (commit $(git rev-parse --short "$commit"), log $OUT/log):"
	grep -E '^bootstrap:   |^build: bin/ctrperf \(' "$OUT/log" | sed 's/^/  /'
	awk '/^demo: the report after/ {on = 1} /^demo: open/ {on = 0} on' "$OUT/log" | sed 's/^/  /'
	cat "$OUT/times"
} | tee "$OUT/summary"
exit "$rc"
