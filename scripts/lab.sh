#!/usr/bin/env bash
# lab.sh: two SSH hosts on this machine, lab-sut and lab-load, for the tests
# of ctrperf's `hosts:` (issue 27). One kernel: they prove the mechanism, not
# cross-machine performance.
#
#   scripts/lab.sh up          # make the lab (idempotent; fast when it is up)
#   scripts/lab.sh down        # remove everything up made (a no-op when none)
#   scripts/lab.sh status      # what runs, exit 1 when the lab is not up
#   scripts/lab.sh leftovers   # list anything of the lab that exists; exit 1 if any
#   scripts/lab.sh exec HOST CMD...   # run CMD inside HOST's namespaces
#   scripts/lab.sh images [IMAGE...]  # docker save ctrperf/* (or IMAGE...) | ssh lab-sut docker load
#
# A host is a namespace holder process (`sleep infinity` under unshare) with a
# network, a mount and a UTS namespace of its own:
#
# - network: a veth from the bridge ctrperf-lab0 (198.19.200.1/24 on this
#   machine); lab-sut is 198.19.200.2, lab-load 198.19.200.3; a route to
#   198.18.0.0/15 through 198.19.200.1 (this machine and the project's other
#   namespaces), no default route, so nothing leaves the machine. The netns
#   has a name (`ip netns exec lab-sut …` works for network commands).
# - UTS: its hostname is lab-sut / lab-load.
# - mounts: the host's tree, with these paths its own:
#     /run, /tmp                      fresh tmpfs (sockets, pid files, /run/ctrperf)
#     /root                           /var/lib/ctrperf/lab/HOST/root (~/.ssh, ~/.cache)
#     /etc/ssh                        /var/lib/ctrperf/lab/HOST/etc-ssh (sshd_config, host keys)
#     /var/lib/ctrperf                /var/lib/ctrperf/lab/HOST/var-lib-ctrperf
#     /etc/docker, /var/lib/docker    lab-sut only: .../lab-sut/etc-docker, .../lab-sut/docker
#     /sys                            a sysfs of the host's netns (its own /sys/class/net),
#                                     with the machine's /sys/fs/cgroup moved under it
#   Copies of this machine's mounts under /var, /run and /tmp and loop-backed
#   ones are detached in the host's namespace at creation, so a lab host never
#   keeps another engine's filesystem or loop device busy. Everything else
#   (/usr, /etc, /proc, /dev …) is the machine's own: the same binaries.
#
# Each host runs Debian's sshd (root, public key only); lab-sut also runs a
# Docker engine of its own inside its namespaces: the standard paths
# (/var/run/docker.sock, /var/lib/docker, /etc/docker/daemon.json) are its
# private mounts, its iptables rules live in its netns, its bridge and pools
# are 198.19.201.0/24 (docker0) and 198.19.202.0/23 + 198.19.204.0/22
# (networks of /24), its cgroups are under /ctrperf-lab-sut. lab-load has no
# Docker. ctrperf's images are not preloaded there (`images` loads them).
#
# Made on this machine, all removed by `down`:
#   /var/lib/ctrperf/lab/          keys, ssh_config, known_hosts, hosts' private dirs, logs
#   /run/ctrperf/lab/              pid files: HOST.holder.pid, HOST.sshd.pid, lab-sut.dockerd.pid
#   netns lab-sut, lab-load; veths lab-sut-veth, lab-load-veth (not ctrperf-*:
#   `ctrperf clean` takes every veth of that name for a client namespace's);
#   bridge ctrperf-lab0
#   iptables (filter) chain CTRPERF-LAB and its jump from FORWARD (bridged
#   traffic between the hosts, which Docker's FORWARD policy DROP would drop)
#   cgroups /sys/fs/cgroup/*/ctrperf-lab-sut
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LIB_NAME=lab LIB_SAY_FD=1
# shellcheck source=lib.sh
. "$ROOT/scripts/lib.sh" # and the names and addresses: internal/labnet/labnet.env

LAB=$LAB_DIR
RUN=$LAB_RUN
LOCK=$LAB_LOCK
BRIDGE=$LAB_BRIDGE
BRIDGE_ADDR=$LAB_BRIDGE_ADDR
PREFIX_LEN=$LAB_PREFIX_LEN
CHAIN=$LAB_CHAIN
SSH_CONFIG=$LAB/ssh_config
KNOWN_HOSTS=$LAB/known_hosts
CLIENT_KEY=$LAB/id_ed25519
CGROUP_PARENT=/$LAB_CGROUP
HOSTS=("$LAB_SUT" "$LAB_LOAD")
declare -A ADDR=(["$LAB_SUT"]=$LAB_SUT_ADDR ["$LAB_LOAD"]=$LAB_LOAD_ADDR)
declare -A VETH=(["$LAB_SUT"]=$LAB_SUT_VETH ["$LAB_LOAD"]=$LAB_LOAD_VETH)
WAIT_SECONDS=${WAIT_SECONDS:-60}

# --- pids ----------------------------------------------------------------------

# pidof_file FILE: the pid in FILE if that process is alive, else nothing.
# (awk on /proc/PID/stat: comm may hold spaces, but not before field 3 for
# the programs the lab starts: sleep, sshd, dockerd, containerd.)
pidof_file() {
	local p
	[[ -s $1 ]] || return 1
	p=$(<"$1")
	[[ $p =~ ^[0-9]+$ ]] && alive "$p" || return 1
	echo "$p"
}

# holder HOST: the pid of HOST's namespace holder, if it runs and still holds
# the netns that carries HOST's name (a reused pid never passes).
holder() {
	local p
	p=$(pidof_file "$RUN/$1.holder.pid") || return 1
	[[ -e /run/netns/$1 ]] || return 1
	[[ $(stat -L -c %i "/proc/$p/ns/net" 2>/dev/null) == "$(stat -L -c %i "/run/netns/$1" 2>/dev/null)" ]] || return 1
	echo "$p"
}

# in_host HOST PID: PID runs in HOST's mount namespace.
in_host() {
	local h
	h=$(holder "$1") || return 1
	[[ $(readlink "/proc/$2/ns/mnt" 2>/dev/null) == "$(readlink "/proc/$h/ns/mnt")" ]]
}

# lab_exec HOST CMD...: run CMD in HOST's mount, network and UTS namespaces.
lab_exec() {
	local h
	h=$(holder "$1") || die "$1 is not up (scripts/lab.sh up)"
	shift
	nsenter -t "$h" -m -n -u -w -- "$@"
}

# ns_pids HOST: every process in HOST's mount namespace but its holder.
ns_pids() {
	local h mnt p
	h=$(holder "$1") || return 0
	mnt=$(readlink "/proc/$h/ns/mnt")
	for p in /proc/[0-9]*; do
		p=${p#/proc/}
		[[ $p != "$h" ]] || continue
		[[ $(readlink "/proc/$p/ns/mnt" 2>/dev/null) == "$mnt" ]] && echo "$p"
	done
	return 0
}

# cmdline PID: the command line of PID, with spaces (bash builtins only, so
# that a scan of /proc never finds its own helper processes).
cmdline() {
	local args=()
	mapfile -d '' args 2>/dev/null <"/proc/$1/cmdline" || return 0
	echo "${args[*]}"
}

# --- up ------------------------------------------------------------------------

# daemon LOG CMD...: CMD detached (lib.sh), in /; $! is its pid.
daemon() { detach / "$@"; }

make_bridge() {
	if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
		ip link add "$BRIDGE" type bridge
		ip addr add "$BRIDGE_ADDR/$PREFIX_LEN" dev "$BRIDGE"
		say "bridge $BRIDGE $BRIDGE_ADDR/$PREFIX_LEN"
	fi
	ip link set "$BRIDGE" up
	# Docker's FORWARD policy is DROP: let the lab's own traffic pass.
	forward_accept "$CHAIN" "$BRIDGE"
}

# make_files: the client key pair and each host's private directories and
# host key, once; the known_hosts and ssh_config from them, every time.
make_files() {
	local h
	mkdir -p "$LAB" "$RUN"
	chmod 700 "$LAB"
	[[ -s $CLIENT_KEY ]] || ssh-keygen -q -t ed25519 -N '' -C ctrperf-lab -f "$CLIENT_KEY"
	: >"$KNOWN_HOSTS.new"
	for h in "${HOSTS[@]}"; do
		local d=$LAB/$h
		mkdir -p "$d/root/.ssh" "$d/etc-ssh" "$d/var-lib-ctrperf"
		chmod 700 "$d/root" "$d/root/.ssh"
		[[ -s $d/etc-ssh/ssh_host_ed25519_key ]] ||
			ssh-keygen -q -t ed25519 -N '' -C "$h" -f "$d/etc-ssh/ssh_host_ed25519_key"
		cp "$CLIENT_KEY.pub" "$d/root/.ssh/authorized_keys"
		render "$ROOT/scripts/templates/lab-sshd_config" >"$d/etc-ssh/sshd_config"
		if [[ $h == "$LAB_SUT" ]]; then
			mkdir -p "$d/etc-docker" "$d/docker"
			render "$ROOT/scripts/templates/lab-daemon.json" >"$d/etc-docker/daemon.json"
		fi
		printf '%s,%s %s\n' "$h" "${ADDR[$h]}" "$(cut -d' ' -f1,2 "$d/etc-ssh/ssh_host_ed25519_key.pub")" >>"$KNOWN_HOSTS.new"
	done
	mv "$KNOWN_HOSTS.new" "$KNOWN_HOSTS"
	{
		echo "# The ctrperf lab (scripts/lab.sh): ssh -F $SSH_CONFIG ${LAB_SUT}"
		for h in "${HOSTS[@]}"; do
			cat <<-EOF
				Host $h
				  HostName ${ADDR[$h]}
				  Port 22
				  User root
				  IdentityFile $CLIENT_KEY
				  IdentitiesOnly yes
				  UserKnownHostsFile $KNOWN_HOSTS
				  GlobalKnownHostsFile /dev/null
				  StrictHostKeyChecking yes
				  BatchMode yes
				  ConnectTimeout 5
			EOF
		done
	} >"$SSH_CONFIG"
}

# mount_script HOST: the shell script, run inside HOST's fresh mount
# namespace, that makes the paths of the header its own.
mount_script() {
	local h=$1 d=$LAB/$1
	cat <<-EOF
		set -eu
		# Detach the copies of this machine's volatile and loop-backed mounts.
		awk '{ for (i = 7; i <= NF; i++) if (\$i == "-") break; src = \$(i + 2) }
			\$5 ~ "^/(var|run|tmp)(/|\$)" || src ~ "^/dev/loop" { print \$5 }' /proc/self/mountinfo |
			sort -r | while read -r m; do umount -l "\$m" 2>/dev/null || true; done
		mount -t tmpfs -o mode=755,size=256m ctrperf-lab-run /run
		mkdir -p /run/sshd /run/lock /run/.cgroup
		# A sysfs of this netns, keeping the machine's cgroup hierarchy.
		mount --rbind /sys/fs/cgroup /run/.cgroup
		umount -l /sys
		mount -t sysfs sysfs /sys
		mount --move /run/.cgroup /sys/fs/cgroup
		rmdir /run/.cgroup
		mount -t tmpfs -o mode=1777,size=512m ctrperf-lab-tmp /tmp
		mount --bind $d/root /root
		mount --bind $d/etc-ssh /etc/ssh
	EOF
	if [[ $h == "$LAB_SUT" ]]; then
		cat <<-EOF
			mount --bind $d/etc-docker /etc/docker
			mount --bind $d/docker /var/lib/docker
		EOF
	fi
	echo "mount --bind $d/var-lib-ctrperf /var/lib/ctrperf"
}

# make_host HOST: its namespaces, mounts and veth, unless they exist.
make_host() {
	local h=$1 pid
	if pid=$(holder "$h"); then
		# Up already; its veth back on the bridge in case the bridge was
		# remade (a deleted bridge lets go of its ports).
		ip link set "${VETH[$h]}" master "$BRIDGE" up 2>/dev/null || true
		return 0
	fi
	# A half-made host (holder gone, name left) is removed first, with the
	# daemons its pid files name if they still run in its old namespaces
	# (a pid of ours in the namespaces of this script is a reused one).
	local f p
	for f in "$RUN/$h".*.pid; do
		p=$(pidof_file "$f") || continue
		[[ $(readlink "/proc/$p/ns/mnt") != "$(readlink /proc/self/ns/mnt)" ]] || continue
		stop_pid "$p" "$h's $(basename "$f" .pid | cut -d. -f2) of a lost holder" 10
	done
	ip netns delete "$h" 2>/dev/null || true
	ip link del "${VETH[$h]}" 2>/dev/null || true
	daemon /dev/null unshare --mount --net --uts --propagation private -- sleep infinity
	pid=$!
	echo "$pid" >"$RUN/$h.holder.pid"
	local self_net i
	self_net=$(readlink /proc/self/ns/net)
	for ((i = 0; i < 100; i++)); do
		[[ $(readlink "/proc/$pid/exe" 2>/dev/null) == */sleep ]] &&
			[[ $(readlink "/proc/$pid/ns/net") != "$self_net" ]] && break
		sleep 0.05
	done
	[[ $(readlink "/proc/$pid/ns/net" 2>/dev/null) != "$self_net" ]] || die "$h: the namespace holder (pid $pid) did not start"
	ip netns attach "$h" "$pid"
	nsenter -t "$pid" -u -- hostname "$h"
	nsenter -t "$pid" -m -n -- sh -c "$(mount_script "$h")"
	ip link add "${VETH[$h]}" type veth peer name eth0 netns "$h"
	ip link set "${VETH[$h]}" master "$BRIDGE" up
	ip -n "$h" link set lo up
	ip -n "$h" addr add "${ADDR[$h]}/$PREFIX_LEN" dev eth0
	ip -n "$h" link set eth0 up
	ip -n "$h" route add 198.18.0.0/15 via "$BRIDGE_ADDR"
	say "$h: namespaces (holder pid $pid), ${ADDR[$h]} on ${VETH[$h]}"
}

# start_sshd HOST: Debian's sshd in the foreground (-D) inside HOST; nsenter
# execs it, so $! is sshd's pid.
start_sshd() {
	local h=$1 pid
	if pid=$(pidof_file "$RUN/$h.sshd.pid") && in_host "$h" "$pid"; then
		return 0
	fi
	local hp
	hp=$(holder "$h")
	daemon "$LAB/$h/sshd.log" nsenter -t "$hp" -m -n -u -w -- /usr/sbin/sshd -D -e -f /etc/ssh/sshd_config
	echo $! >"$RUN/$h.sshd.pid"
	say "$h: sshd pid $!"
}

# start_dockerd: lab-sut's engine, inside its namespaces, on the standard
# paths there (they are its private mounts).
start_dockerd() {
	local h=${LAB_SUT} pid hp
	if pid=$(pidof_file "$RUN/$h.dockerd.pid") && in_host "$h" "$pid"; then
		return 0
	fi
	hp=$(holder "$h")
	daemon "$LAB/$h/dockerd.log" nsenter -t "$hp" -m -n -u -w -- dockerd \
		--host unix:///var/run/docker.sock \
		--data-root /var/lib/docker \
		--exec-root /var/run/docker \
		--pidfile /var/run/docker.pid \
		--config-file /etc/docker/daemon.json \
		--cgroup-parent "$CGROUP_PARENT" \
		--ip6tables=false
	echo $! >"$RUN/$h.dockerd.pid"
	say "$h: dockerd pid $!"
}

wait_ready() {
	local h i
	for h in "${HOSTS[@]}"; do
		for ((i = 0; ; i++)); do
			ssh -F "$SSH_CONFIG" "$h" true 2>/dev/null && break
			((i < WAIT_SECONDS * 10)) || { tail -n 20 "$LAB/$h/sshd.log" >&2 || true; die "$h: ssh does not answer within ${WAIT_SECONDS}s"; }
			pidof_file "$RUN/$h.sshd.pid" >/dev/null || { tail -n 20 "$LAB/$h/sshd.log" >&2 || true; die "$h: sshd exited; see $LAB/$h/sshd.log"; }
			sleep 0.1
		done
	done
	for ((i = 0; ; i++)); do
		lab_exec ${LAB_SUT} docker info --format '{{.ServerVersion}}' >/dev/null 2>&1 && break
		((i < WAIT_SECONDS * 10)) || { tail -n 20 "$LAB/${LAB_SUT}/dockerd.log" >&2 || true; die "${LAB_SUT}: dockerd does not answer within ${WAIT_SECONDS}s"; }
		pidof_file "$RUN/${LAB_SUT}.dockerd.pid" >/dev/null || { tail -n 20 "$LAB/${LAB_SUT}/dockerd.log" >&2 || true; die "${LAB_SUT}: dockerd exited; see $LAB/${LAB_SUT}/dockerd.log"; }
		sleep 0.1
	done
}

up() {
	[[ $(id -u) == 0 ]] || die "the lab needs root"
	command -v sshd >/dev/null || [[ -x /usr/sbin/sshd ]] || die "sshd not found: install Debian package openssh-server (scripts/bootstrap.sh)"
	command -v dockerd >/dev/null || die "dockerd not found: install Debian package docker.io (scripts/bootstrap.sh)"
	# A half-made lab is undone; one that was up before stays up.
	was_up=0
	status >/dev/null 2>&1 && was_up=1
	trap 'rc=$?; if ((rc != 0 && ! was_up)); then say "up failed: removing the half-made lab"; down || true; fi' EXIT
	make_files
	make_bridge
	local h
	for h in "${HOSTS[@]}"; do
		make_host "$h"
		start_sshd "$h"
	done
	start_dockerd
	wait_ready
	trap - EXIT
	say "up: ${LAB_SUT} ${ADDR[$LAB_SUT]} (Docker), ${LAB_LOAD} ${ADDR[$LAB_LOAD]}"
	echo "$SSH_CONFIG"
}

# --- down ----------------------------------------------------------------------

down() {
	[[ $(id -u) == 0 ]] || die "the lab needs root"
	local h pid p
	# lab-sut's engine: its containers, then dockerd (which stops its
	# containerd), then a containerd that outlived it.
	if holder ${LAB_SUT} >/dev/null; then
		if pid=$(pidof_file "$RUN/${LAB_SUT}.dockerd.pid") && in_host ${LAB_SUT} "$pid"; then
			local ids
			ids=$(lab_exec ${LAB_SUT} timeout 20 docker ps -aq 2>/dev/null || true)
			if [[ -n $ids ]]; then
				# shellcheck disable=SC2086
				lab_exec ${LAB_SUT} timeout 60 docker rm -f $ids >/dev/null 2>&1 || true
				say "${LAB_SUT}: removed $(wc -w <<<"$ids") container(s)"
			fi
			local ctrd
			ctrd=$(cat "/proc/$(holder ${LAB_SUT})/root/var/run/docker/containerd/containerd.pid" 2>/dev/null || true)
			stop_pid "$pid" "${LAB_SUT}'s dockerd" 20
			if [[ $ctrd =~ ^[0-9]+$ ]] && in_host ${LAB_SUT} "$ctrd"; then
				stop_pid "$ctrd" "${LAB_SUT}'s containerd" 10
			fi
		fi
	fi
	for h in "${HOSTS[@]}"; do
		if pid=$(pidof_file "$RUN/$h.sshd.pid") && in_host "$h" "$pid"; then
			stop_pid "$pid" "$h's sshd" 5
		fi
		# Whatever else still runs in the host (ssh sessions, an agent,
		# container shims) goes with it.
		local killed=()
		for p in $(ns_pids "$h"); do
			local c
			c=$(cmdline "$p")
			kill -KILL "$p" 2>/dev/null && killed+=("$p") && say "$h: killed pid $p (${c:0:60})" || true
		done
		# SIGKILL is not death yet: wait (up to 10 s) until they are gone.
		local i
		for p in "${killed[@]}"; do
			for ((i = 0; i < 100; i++)); do
				alive "$p" || break
				sleep 0.1
			done
		done
		if pid=$(holder "$h"); then
			stop_pid "$pid" "$h's namespace holder" 5
		fi
		# With its last process gone the mount namespace and its mounts go;
		# the netns goes when its name is removed, and the veth with it.
		ip netns delete "$h" 2>/dev/null && say "$h: netns removed" || true
		ip link del "${VETH[$h]}" 2>/dev/null && say "removed veth ${VETH[$h]}" || true
	done
	ip link del "$BRIDGE" 2>/dev/null && say "removed bridge $BRIDGE" || true
	forward_remove "$CHAIN"
	remove_cgroups "$CGROUP_PARENT"
	local d
	for d in "$LAB" "$RUN"; do
		[[ -e $d ]] || continue
		rm -rf "$d" && say "removed $d"
	done
	# rmdir: /run/ctrperf/lab.lock stays (the lock of the next up/down).
	return 0
}

# --- status, leftovers, images ---------------------------------------------------

status() {
	local h pid rc=0
	for h in "${HOSTS[@]}"; do
		if pid=$(holder "$h"); then
			printf '%-9s %-13s holder %s' "$h" "${ADDR[$h]}" "$pid"
			if p=$(pidof_file "$RUN/$h.sshd.pid") && in_host "$h" "$p"; then printf ', sshd %s' "$p"; else printf ', sshd DOWN'; rc=1; fi
			if [[ $h == "$LAB_SUT" ]]; then
				if p=$(pidof_file "$RUN/$h.dockerd.pid") && in_host "$h" "$p"; then printf ', dockerd %s' "$p"; else printf ', dockerd DOWN'; rc=1; fi
			fi
			echo
		else
			printf '%-9s down\n' "$h"
			rc=1
		fi
	done
	((rc == 0)) && echo "ssh_config: $SSH_CONFIG"
	return $rc
}

# leftovers: anything of the lab on this machine, one line each; exit 1 if any.
leftovers() {
	local left=() h p
	for h in "${HOSTS[@]}"; do
		[[ -e /run/netns/$h ]] && left+=("netns $h")
		ip link show "${VETH[$h]}" >/dev/null 2>&1 && left+=("veth ${VETH[$h]}")
	done
	ip link show "$BRIDGE" >/dev/null 2>&1 && left+=("bridge $BRIDGE")
	iptables -w -S "$CHAIN" >/dev/null 2>&1 && left+=("iptables chain $CHAIN")
	for p in /sys/fs/cgroup/*/"${CGROUP_PARENT#/}"; do [[ -d $p ]] && left+=("cgroup $p"); done
	for p in "$LAB" "$RUN"; do [[ -e $p ]] && left+=("path $p"); done
	grep -q "$LAB" /proc/mounts && left+=("mounts under $LAB")
	local c
	for p in /proc/[0-9]*; do
		p=${p#/proc/}
		c=$(cmdline "$p")
		[[ $c == *"$CGROUP_PARENT"* || $c == *"$LAB"* ]] && left+=("process $p: ${c:0:80}")
	done
	((${#left[@]})) || return 0
	printf '%s\n' "${left[@]}"
	return 1
}

# images [IMAGE...]: the given images of the default engine (default: every
# tagged ctrperf/* image) into lab-sut's engine.
images() {
	local imgs="$*"
	[[ -n $imgs ]] || imgs=$(docker images --format '{{.Repository}}:{{.Tag}}' | grep '^ctrperf/' | grep -v ':<none>$' || true)
	[[ -n $imgs ]] || die "no ctrperf/* images on the default engine: bin/ctrperf images build"
	# shellcheck disable=SC2086
	docker save $imgs | ssh -F "$SSH_CONFIG" ${LAB_SUT} docker load
}

cmd=${1:-}
shift || true
case $cmd in
up | down)
	take_lock "$LOCK" "lab up/down"

	"$cmd"
	;;
status) status ;;
leftovers) leftovers ;;
exec)
	[[ $# -ge 2 ]] || die "usage: $0 exec HOST CMD..."
	h=$1
	shift
	lab_exec "$h" "$@"
	;;
images) images "$@" ;;
*) die "usage: $0 up|down|status|leftovers|exec HOST CMD...|images [IMAGE...]" ;;
esac
