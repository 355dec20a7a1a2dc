# scripts/lib.sh: what scripts/lab.sh and scripts/kube.sh share. Source it
# with ROOT (the source tree) and LIB_NAME (the prefix of messages) set; it
# sources the names and addresses of the project's test machines
# (internal/labnet/labnet.env, which the Go fixtures embed too).
# shellcheck shell=bash

# shellcheck source=../internal/labnet/labnet.env
. "$ROOT/internal/labnet/labnet.env"

# say and die write LIB_NAME: MESSAGE; say to LIB_SAY_FD (default 2).
say() { printf '%s: %s\n' "$LIB_NAME" "$*" >&"${LIB_SAY_FD:-2}"; }
die() { printf '%s: %s\n' "$LIB_NAME" "$*" >&2; exit 1; }

# alive PID: the process exists and is no zombie (which is gone already, its
# parent has not waited yet).
alive() {
	[[ -d /proc/$1 ]] && [[ $(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) != Z ]]
}

# detach DIR LOG CMD...: start CMD in the background, in a session of its
# own (make's Ctrl-C after up does not reach it), in DIR, with stdin from
# /dev/null, output appended to LOG, and every other file descriptor
# closed: a daemon must not keep a lock its starter held (the script's
# own, or that of a `flock … make kube-up` or `flock … go test`, held as
# long as the daemon lives). Every step execs, so $! is CMD's pid.
detach() {
	local dir=$1 log=$2
	shift 2
	(
		cd "$dir"
		for fd in /proc/$BASHPID/fd/*; do
			fd=${fd##*/}
			if ((fd > 2)); then eval "exec $fd>&-" 2>/dev/null; fi
		done
		exec setsid "$@" </dev/null >>"$log" 2>&1
	) &
}

# stop_pid PID WHAT SECONDS [LIVE]: SIGTERM, then SIGKILL after SECONDS
# (0: SIGKILL at once, for a process whose state goes anyway); LIVE is the
# test that the pid is still the process meant (default alive; kube.sh's
# ours also checks its command line, so that a recycled pid is never
# signalled). Returns once it is gone.
stop_pid() {
	local pid=$1 what=$2 secs=${3:-10} live=${4:-alive} i
	"$live" "$pid" || return 0
	if ((secs > 0)); then
		kill -TERM "$pid" 2>/dev/null || true
		for ((i = 0; i < secs * 10; i++)); do
			"$live" "$pid" || { say "stopped $what (pid $pid)"; return 0; }
			sleep 0.1
		done
		say "killed $what (pid $pid): it did not stop within ${secs}s"
	fi
	kill -KILL "$pid" 2>/dev/null || true
	while "$live" "$pid"; do sleep 0.1; done
}

# forward_accept CHAIN BRIDGE: bridged frames go through iptables
# (br_netfilter, which Docker loads) and Docker's FORWARD policy is DROP:
# a chain of ours accepts the bridge's own traffic, jumped to first from
# FORWARD, with a comment naming the chain. Safe to repeat.
forward_accept() {
	local chain=$1 bridge=$2
	iptables -w -N "$chain" 2>/dev/null || true
	iptables -w -C "$chain" -i "$bridge" -o "$bridge" -j ACCEPT 2>/dev/null ||
		iptables -w -A "$chain" -i "$bridge" -o "$bridge" -j ACCEPT
	iptables -w -C FORWARD -m comment --comment "${chain,,}" -j "$chain" 2>/dev/null ||
		iptables -w -I FORWARD 1 -m comment --comment "${chain,,}" -j "$chain"
}

# forward_remove CHAIN: the jumps to CHAIN (with the comment or, made by an
# older script, without) and the chain; says whether it removed one.
forward_remove() {
	local chain=$1
	while iptables -w -D FORWARD -m comment --comment "${chain,,}" -j "$chain" 2>/dev/null; do :; done
	while iptables -w -D FORWARD -j "$chain" 2>/dev/null; do :; done
	if iptables -w -F "$chain" 2>/dev/null; then
		iptables -w -X "$chain" && say "removed iptables chain $chain"
	fi
	return 0
}

# hierarchies: every cgroup v1 hierarchy and the v2 mount.
hierarchies() {
	awk '$3 == "cgroup" || $3 == "cgroup2" {print $2}' /proc/self/mounts
}

# remove_cgroups NAME: NAME (a path below each hierarchy) and everything
# below it, deepest first, in every hierarchy: a cgroup is removed with
# rmdir once it is empty, and the kernel may take a moment after its last
# process exits.
remove_cgroups() {
	local name=${1#/} h cg i
	for h in $(hierarchies); do
		cg=$h/$name
		[[ -d $cg ]] || continue
		for ((i = 0; i < 50; i++)); do
			find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null || true
			[[ -d $cg ]] || break
			sleep 0.1
		done
		if [[ -d $cg ]]; then say "cgroup $cg still exists (a process in it?)"; else say "removed cgroup $cg"; fi
	done
}

# take_lock FILE WHAT: one up, down or images at a time (two makes of
# lab-up or kube-up at once would start two of every daemon). fd 9 is the
# lock; the daemons close it (see detach), so it is released when the
# script ends.
take_lock() {
	mkdir -p "$(dirname "$1")"
	exec 9>"$1"
	flock -w 300 9 || die "another $2 holds $1"
}

# render TEMPLATE: the template file with the caller's variables expanded
# (as in an unquoted here-document: $VAR, ${ARR[$k]}, $(…)).
render() {
	local body
	body=$(<"$1")
	eval "cat <<__CTRPERF_TEMPLATE_END__
$body
__CTRPERF_TEMPLATE_END__"
}
