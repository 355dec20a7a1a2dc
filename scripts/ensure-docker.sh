#!/usr/bin/env bash
# ensure-docker.sh: make sure a Docker engine answers on the default socket.
# If none does, start Debian's dockerd in the background (on these machines
# systemd is not PID 1, so installing docker.io does not start it) and wait
# until it answers. An engine that already answers is left alone.
set -euo pipefail

PIDFILE=${CTRPERF_DOCKERD_PIDFILE:-/run/ctrperf-dockerd.pid}
LOG=${CTRPERF_DOCKERD_LOG:-/var/log/ctrperf-dockerd.log}
SOCKET=/var/run/docker.sock
WAIT_SECONDS=${WAIT_SECONDS:-60}

say() { printf 'ensure-docker: %s\n' "$*"; }
die() { printf 'ensure-docker: %s\n' "$*" >&2; exit 1; }

command -v docker >/dev/null && command -v dockerd >/dev/null ||
	die "docker.io is not installed: run scripts/bootstrap.sh (or make bootstrap)"

answers() { timeout 5 docker -H "unix://$SOCKET" version --format '{{.Server.Version}}' 2>/dev/null; }

if v=$(answers); then
	say "Docker engine $v answers on $SOCKET"
	exit 0
fi

[[ $(id -u) == 0 ]] || die "no engine answers on $SOCKET and starting one needs root (sudo $0)"

# A dockerd we started earlier may still be coming up.
if [[ -s $PIDFILE ]] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
	pid=$(cat "$PIDFILE")
	say "dockerd (pid $pid) is running but not answering yet; waiting"
else
	say "no engine answers on $SOCKET: starting dockerd (log $LOG)"
	# setsid: the engine outlives this script and the make that ran it.
	setsid nohup dockerd --pidfile "$PIDFILE" -H "unix://$SOCKET" >>"$LOG" 2>&1 </dev/null &
	pid=$!
fi

for ((i = 0; i < WAIT_SECONDS * 2; i++)); do
	if v=$(answers); then
		say "Docker engine $v answers on $SOCKET (dockerd pid $pid)"
		say "to stop it: kill \$(cat $PIDFILE)"
		exit 0
	fi
	if ! kill -0 "$pid" 2>/dev/null; then
		tail -n 20 "$LOG" >&2 || true
		die "dockerd exited; see $LOG"
	fi
	sleep 0.5
done
tail -n 20 "$LOG" >&2 || true
die "dockerd did not answer on $SOCKET within ${WAIT_SECONDS}s; see $LOG"
