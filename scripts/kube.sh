#!/usr/bin/env bash
# kube.sh: ctrperf's lab Kubernetes cluster on this one machine (issue 26).
#
#   scripts/kube.sh up       # build what is missing, start, wait for every node Ready
#   scripts/kube.sh down     # stop and remove everything up made (a second down does nothing)
#   scripts/kube.sh status   # what runs; exit 1 if the cluster is not up
#   scripts/kube.sh images   # import every ctrperf/* image of the default Docker engine into each node
#
# Up ends when every node is Ready and every kube-proxy has synced its rules.
#
# What it makes, all named ctrperf* or kube-node*:
#   - etcd (Debian's etcd-server) on 127.0.0.1:32379, data in $STATE/etcd;
#     kube-apiserver on $APISERVER_IP:6443 (the bridge's address: it refuses
#     loopback as its advertise address), kube-controller-manager (allocates
#     node CIDRs), kube-scheduler, in this machine's network namespace;
#   - a bridge ctrperf-kube0 (198.19.210.1/24) and per node a network
#     namespace kube-node-N with a veth (kube-node-N on the bridge, eth0
#     inside, 198.19.210.1N) holding that node's containerd (Debian's, its
#     own config, root, state and socket), kubelet and kube-proxy, pods on a
#     CNI bridge ctrperf-cni0 with addresses from the node's pod CIDR;
#     kube-proxy's metrics (and /proxyMode) on the node's address :10249;
#     kube-node-2's kubelet with the static CPU manager (KUBE_STATIC_CPU_NODE,
#     "none" for no such node), CPU 0 reserved;
#   - routes: this machine reaches every pod CIDR and the service CIDR through
#     the nodes, nodes reach each other's pods directly over the bridge;
#   - an iptables chain CTRPERF-KUBE in filter/FORWARD (Docker's FORWARD
#     policy is DROP and bridged frames pass through it);
#   - cgroups /ctrperf-kube/<node> in every hierarchy (each kubelet's
#     cgroupRoot);
#   - files only under $STATE (/var/lib/ctrperf/kube) and $RUN
#     (/run/ctrperf/kube: pid files, containerd state, sockets).
# The kubelets run in this machine's mount namespace (nsenter --net, not ip
# netns exec, which would give them a private one): the volumes they mount
# must be seen by their containerd.
#
# Kubernetes' components are one multi-call binary, bin/kube, built from
# tools/kube (a module of its own) by `make bin/kube`.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
LIB_NAME=kube
# shellcheck source=lib.sh
. "$ROOT/scripts/lib.sh" # and the names and addresses: internal/labnet/labnet.env

KUBE=${KUBE:-$ROOT/bin/kube}
CTRPERF=${CTRPERF:-$ROOT/bin/ctrperf}
STATE=$KUBE_STATE
RUN=$KUBE_RUN
KUBECONFIG_PATH=$STATE/kubeconfig
PKI=$STATE/pki
LOGS=$STATE/log

BRIDGE=$KUBE_BRIDGE
APISERVER_IP=$KUBE_APISERVER_IP
NODES=("$KUBE_NODE_1" "$KUBE_NODE_2")
declare -A NODE_IP=(["$KUBE_NODE_1"]=$KUBE_NODE_1_ADDR ["$KUBE_NODE_2"]=$KUBE_NODE_2_ADDR)
declare -A POD_CIDR=(["$KUBE_NODE_1"]=$KUBE_NODE_1_POD_CIDR ["$KUBE_NODE_2"]=$KUBE_NODE_2_POD_CIDR)
CLUSTER_CIDR=$KUBE_CLUSTER_CIDR
SERVICE_CIDR=$KUBE_SERVICE_CIDR
FIRST_SERVICE_IP=$KUBE_FIRST_SERVICE_IP
ETCD_CLIENT=127.0.0.1:32379
ETCD_PEER=127.0.0.1:32380
CGROUP_ROOT=$KUBE_CGROUP_ROOT # /sys/fs/cgroup/<hierarchy>/ctrperf-kube/<node>
CHAIN=$KUBE_CHAIN
CNI_BRIDGE=$KUBE_CNI_BRIDGE
PAUSE_IMAGE=ctrperf/pause:latest

KUBE_PROXY_MODE=${KUBE_PROXY_MODE:-iptables}
# The node whose kubelet runs the static CPU manager (Guaranteed pods with
# whole CPUs get them exclusively): kube-node-2 unless set; "none" for no
# such node. Empty (make's default) is kube-node-2.
KUBE_STATIC_CPU_NODE=${KUBE_STATIC_CPU_NODE:-$KUBE_NODE_2}
if [[ $KUBE_STATIC_CPU_NODE == none ]]; then KUBE_STATIC_CPU_NODE=; fi
KUBE_UP_TIMEOUT=${KUBE_UP_TIMEOUT:-180} # seconds for all nodes to be Ready

# Kubelet sets these kernel tunables at start (setupKernelTunables); up
# saves the machine's values and down puts them back.
TUNABLES=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys kernel.keys.root_maxbytes)

kubectl() { "$KUBE" kubectl --kubeconfig "$KUBECONFIG_PATH" "$@"; }

# --- processes ----------------------------------------------------------------
# Each process has a pid file $RUN/<name>.pid. A pid counts as ours only while
# its command line still names $STATE (every one of them reads its config or
# data from there), so a recycled pid is never signalled.

ours() { # ours PID: the process is alive and one of the cluster's
	local pid=$1
	# One grep, no pipeline: with pipefail, tr's SIGPIPE after grep -q found
	# the path would read as "not ours".
	grep -qaF -- "$STATE" /proc/"$pid"/cmdline 2>/dev/null
}

running() { # running NAME
	local f=$RUN/$1.pid
	[[ -f $f ]] && ours "$(cat "$f")"
}

# start NAME NETNS|- COMMAND...: run detached (lib.sh), output to
# $LOGS/NAME.log, its pid in $RUN/NAME.pid.
start() {
	local name=$1 netns=$2
	shift 2
	local pre=()
	[[ $netns != - ]] && pre=(nsenter --net=/run/netns/"$netns" --)
	detach "$ROOT" "$LOGS/$name.log" "${pre[@]}" "$@"
	echo $! >"$RUN/$name.pid"
}

# stop NAME [SECONDS]: SIGTERM, then SIGKILL after SECONDS (default 10);
# 0: SIGKILL at once, for a process whose state goes anyway.
stop() {
	local name=$1 grace=${2:-10} f=$RUN/$1.pid
	[[ -f $f ]] || return 0
	stop_pid "$(cat "$f")" "$name" "$grace" ours
	rm -f "$f"
}

# wait_for WHAT SECONDS COMMAND...: retry COMMAND every 0.5 s.
wait_for() {
	local what=$1 secs=$2
	shift 2
	local deadline=$((SECONDS + secs))
	until "$@" >/dev/null 2>&1; do
		((SECONDS < deadline)) || die "$what: not ready after ${secs}s (logs in $LOGS)"
		sleep 0.5
	done
}

# --- certificates and kubeconfigs ---------------------------------------------
# One CA signs everything; ECDSA P-256 keys (fast to make, accepted by every
# component, ES256 for service-account tokens).

pki() {
	mkdir -p "$PKI"
	openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
		-keyout "$PKI/ca.key" -out "$PKI/ca.crt" -days 3650 -subj /CN=ctrperf-kube-ca 2>/dev/null
	local sans="DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
	cert apiserver kube-apiserver "" "$sans,IP:$APISERVER_IP,IP:$FIRST_SERVICE_IP,IP:127.0.0.1"
	cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
	cert admin ctrperf-admin system:masters
	cert controller-manager system:kube-controller-manager
	cert scheduler system:kube-scheduler
	cert kube-proxy system:kube-proxy
	local n
	for n in "${NODES[@]}"; do cert "$n" "system:node:$n" system:nodes; done
	openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/sa.key"
	openssl ec -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
	chmod 0600 "$PKI"/*.key
}

cert() { # cert FILE CN [O] [SANS]
	local file=$1 cn=$2 o=${3:-} sans=${4:-} subj ext=$PKI/$1.ext
	subj=/CN=$cn
	[[ -n $o ]] && subj=/O=$o$subj
	{
		echo "basicConstraints=CA:FALSE"
		echo "keyUsage=critical,digitalSignature,keyEncipherment"
		echo "extendedKeyUsage=clientAuth,serverAuth"
		[[ -n $sans ]] && echo "subjectAltName=$sans"
	} >"$ext"
	openssl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
		-keyout "$PKI/$file.key" -out "$PKI/$file.csr" -subj "$subj" 2>/dev/null
	openssl x509 -req -in "$PKI/$file.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
		-days 3650 -extfile "$ext" -out "$PKI/$file.crt" 2>/dev/null
	rm -f "$PKI/$file.csr" "$ext"
}

kubeconfig() { # kubeconfig FILE CERT USER: credentials embedded, mode 0600
	local file=$1 c=$2 user=$3
	(
		umask 077
		cat >"$file" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: ctrperf-kube
  cluster:
    server: https://$APISERVER_IP:6443
    certificate-authority-data: $(base64 -w0 "$PKI/ca.crt")
users:
- name: $user
  user:
    client-certificate-data: $(base64 -w0 "$PKI/$c.crt")
    client-key-data: $(base64 -w0 "$PKI/$c.key")
contexts:
- name: ctrperf-kube
  context: {cluster: ctrperf-kube, user: $user}
current-context: ctrperf-kube
EOF
	)
}

# --- network --------------------------------------------------------------------

network() {
	ip link add "$BRIDGE" type bridge
	ip addr add "$APISERVER_IP/24" dev "$BRIDGE"
	ip link set "$BRIDGE" up
	# Bridged and routed frames of the cluster pass the machine's FORWARD
	# chain (br_netfilter; Docker's policy there is DROP): accept the
	# cluster's own, from the bridge to the bridge (as lab.sh does); this
	# machine reaches the nodes through INPUT/OUTPUT, not FORWARD.
	forward_accept "$CHAIN" "$BRIDGE"
	local n m
	for n in "${NODES[@]}"; do
		ip netns add "$n"
		ip link add "$n" type veth peer name eth0 netns "$n"
		ip link set "$n" master "$BRIDGE" up
		ip -n "$n" link set lo up
		ip -n "$n" addr add "${NODE_IP[$n]}/24" dev eth0
		ip -n "$n" link set eth0 up
		ip -n "$n" route add default via "$APISERVER_IP"
		for m in "${NODES[@]}"; do
			[[ $m == "$n" ]] || ip -n "$n" route add "${POD_CIDR[$m]}" via "${NODE_IP[$m]}"
		done
		# A node routes for its pods; kube-proxy needs bridged pod traffic
		# to pass iptables (both per network namespace).
		ip netns exec "$n" sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1
		# This machine reaches each node's pods through that node.
		ip route add "${POD_CIDR[$n]}" via "${NODE_IP[$n]}"
	done
	# ... and Services through the first node's kube-proxy (which
	# masquerades traffic from outside the cluster CIDR, so replies return
	# through it).
	ip route add "$SERVICE_CIDR" via "${NODE_IP[${NODES[0]}]}"
}

# --- cgroups --------------------------------------------------------------------

cgroups() {
	local h n
	for h in $(hierarchies); do
		for n in "${NODES[@]}"; do
			mkdir -p "$h/$CGROUP_ROOT/$n"
			# A new v1 cpuset has no CPUs or memory nodes: take the parent's.
			if [[ -f $h/cpuset.cpus && ! -f $h/cgroup.controllers ]]; then
				cat "$h/cpuset.cpus" >"$h/$CGROUP_ROOT/cpuset.cpus"
				cat "$h/cpuset.mems" >"$h/$CGROUP_ROOT/cpuset.mems"
				cat "$h/cpuset.cpus" >"$h/$CGROUP_ROOT/$n/cpuset.cpus"
				cat "$h/cpuset.mems" >"$h/$CGROUP_ROOT/$n/cpuset.mems"
			fi
		done
	done
}

# --- configuration files ----------------------------------------------------------

node_config() { # node_config NODE
	local n=$1 d=$STATE/nodes/$1 r=$RUN/$1
	mkdir -p "$d/containerd" "$d/kubelet" "$d/pod-logs" "$d/cni/net.d" "$d/cni/ipam" "$d/opt" "$r"
	kubeconfig "$d/kubelet.kubeconfig" "$n" "system:node:$n"
	render "$ROOT/scripts/templates/kube-containerd.toml" >"$d/containerd.toml"
	render "$ROOT/scripts/templates/kube-cni.conflist" >"$d/cni/net.d/10-ctrperf.conflist"
	local cpu=""
	if [[ $n == "$KUBE_STATIC_CPU_NODE" ]]; then
		# Guaranteed pods with whole CPUs get them exclusively (the static
		# policy needs a reservation > 0: CPU 0, never handed out, so that
		# on 2 CPUs CPU 1 is the one to pin; allocatable CPU is then 1).
		# The other pods of the node share what is not pinned; the other
		# node's pods and this machine's processes still run anywhere.
		cpu=$'cpuManagerPolicy: static\nreservedSystemCPUs: "0"'
	fi
	render "$ROOT/scripts/templates/kube-kubelet.yaml" >"$d/kubelet.yaml"
	render "$ROOT/scripts/templates/kube-proxy.yaml" >"$d/kube-proxy.yaml"
}

# --- up -----------------------------------------------------------------------------

healthy() { # every process runs and every node is Ready
	local p
	for p in etcd kube-apiserver kube-controller-manager kube-scheduler; do running "$p" || return 1; done
	for n in "${NODES[@]}"; do
		for p in containerd kubelet kube-proxy; do running "$n-$p" || return 1; done
	done
	all_ready
}

all_ready() {
	local ready
	ready=$(kubectl get nodes -o 'jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' 2>/dev/null) || return 1
	for n in "${NODES[@]}"; do grep -qx "$n=True" <<<"$ready" || return 1; done
}

leftovers() { # anything of a cluster on the machine
	[[ -e $STATE || -e $RUN ]] || ip link show "$BRIDGE" >/dev/null 2>&1 || [[ -e /run/netns/${NODES[0]} || -e /run/netns/${NODES[1]} ]]
}

up() {
	[[ $(id -u) == 0 ]] || die "needs root"
	[[ -x $KUBE ]] || die "$KUBE is missing: make bin/kube"
	local k
	for k in etcd containerd ctr runc nsenter iptables openssl docker; do
		command -v "$k" >/dev/null || die "$k is missing: scripts/bootstrap.sh installs it"
	done
	[[ -x /usr/lib/cni/bridge ]] || die "/usr/lib/cni/bridge is missing (containernetworking-plugins): scripts/bootstrap.sh"
	case $KUBE_PROXY_MODE in
	iptables) ;;
	nftables) command -v nft >/dev/null || die "nft is missing (nftables): scripts/bootstrap.sh" ;;
	ipvs) die "KUBE_PROXY_MODE=ipvs: this kernel has no CONFIG_IP_VS" ;;
	*) die "KUBE_PROXY_MODE=$KUBE_PROXY_MODE: iptables or nftables" ;;
	esac
	[[ -z $KUBE_STATIC_CPU_NODE || " ${NODES[*]} " == *" $KUBE_STATIC_CPU_NODE "* ]] ||
		die "KUBE_STATIC_CPU_NODE=$KUBE_STATIC_CPU_NODE: not one of ${NODES[*]}"

	# Idempotent: a healthy cluster of the same settings stays; anything
	# else (half made, another proxy mode) is taken down first.
	local want="proxy=$KUBE_PROXY_MODE static-cpu=$KUBE_STATIC_CPU_NODE"
	if [[ -f $STATE/settings && $(cat "$STATE/settings") == "$want" ]] && healthy; then
		say "up already ($want)"
		echo "$KUBECONFIG_PATH"
		return 0
	fi
	if leftovers; then
		say "taking down what is there first"
		down
	fi

	# A cluster half made is taken down again: any failure (set -e, die)
	# or Ctrl-C ends the script through this EXIT trap.
	trap 'rc=$?; if ((rc != 0)); then say "up failed: taking down what was made"; down; fi' EXIT
	trap 'exit 130' INT TERM
	local t0=$SECONDS
	mkdir -p "$STATE" "$RUN" "$LOGS"
	chmod 0700 "$STATE"
	echo "$want" >"$STATE/settings"

	save_tunables
	pki
	kubeconfig "$KUBECONFIG_PATH" admin ctrperf-admin
	kubeconfig "$STATE/controller-manager.kubeconfig" controller-manager system:kube-controller-manager
	kubeconfig "$STATE/scheduler.kubeconfig" scheduler system:kube-scheduler
	kubeconfig "$STATE/kube-proxy.kubeconfig" kube-proxy system:kube-proxy
	network
	cgroups
	for n in "${NODES[@]}"; do node_config "$n"; done

	# Control plane.
	start etcd - etcd --name ctrperf-kube --data-dir "$STATE/etcd" \
		--listen-client-urls "http://$ETCD_CLIENT" --advertise-client-urls "http://$ETCD_CLIENT" \
		--listen-peer-urls "http://$ETCD_PEER" --initial-advertise-peer-urls "http://$ETCD_PEER" \
		--initial-cluster "ctrperf-kube=http://$ETCD_PEER" --initial-cluster-state new
	start kube-apiserver - "$KUBE" kube-apiserver \
		--advertise-address="$APISERVER_IP" --bind-address="$APISERVER_IP" --secure-port=6443 \
		--etcd-servers="http://$ETCD_CLIENT" \
		--service-cluster-ip-range="$SERVICE_CIDR" \
		--client-ca-file="$PKI/ca.crt" --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
		--kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" --kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
		--kubelet-preferred-address-types=InternalIP \
		--service-account-issuer=https://kubernetes.default.svc.cluster.local \
		--service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
		--authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
		--allow-privileged=true --profiling=false
	# Each node's containerd meanwhile (independent of the control plane).
	for n in "${NODES[@]}"; do
		start "$n-containerd" "$n" containerd --config "$STATE/nodes/$n/containerd.toml"
	done
	wait_for kube-apiserver 90 kubectl get --raw /readyz
	start kube-controller-manager - "$KUBE" kube-controller-manager \
		--kubeconfig="$STATE/controller-manager.kubeconfig" \
		--authentication-kubeconfig="$STATE/controller-manager.kubeconfig" \
		--authorization-kubeconfig="$STATE/controller-manager.kubeconfig" \
		--bind-address=127.0.0.1 --leader-elect=false \
		--allocate-node-cidrs=true --cluster-cidr="$CLUSTER_CIDR" --node-cidr-mask-size=24 \
		--service-cluster-ip-range="$SERVICE_CIDR" \
		--service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
		--use-service-account-credentials=true
	start kube-scheduler - "$KUBE" kube-scheduler \
		--kubeconfig="$STATE/scheduler.kubeconfig" \
		--authentication-kubeconfig="$STATE/scheduler.kubeconfig" \
		--authorization-kubeconfig="$STATE/scheduler.kubeconfig" \
		--bind-address=127.0.0.1 --leader-elect=false

	# The nodes exist before their kubelets with the pod CIDR their CNI
	# config uses (the CIDR allocator keeps a CIDR that is set).
	for n in "${NODES[@]}"; do
		kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Node
metadata:
  name: $n
  labels: {app.kubernetes.io/managed-by: ctrperf}
spec:
  podCIDR: ${POD_CIDR[$n]}
  podCIDRs: [${POD_CIDR[$n]}]
EOF
	done

	for n in "${NODES[@]}"; do
		wait_for "$n containerd" 30 ctr -a "$RUN/$n/containerd.sock" version
	done
	images "$PAUSE_IMAGE"

	for n in "${NODES[@]}"; do
		local d=$STATE/nodes/$n
		start "$n-kubelet" "$n" "$KUBE" kubelet \
			--config="$d/kubelet.yaml" --kubeconfig="$d/kubelet.kubeconfig" \
			--root-dir="$d/kubelet" --cert-dir="$d/kubelet/pki" \
			--hostname-override="$n" --node-ip="${NODE_IP[$n]}"
		start "$n-kube-proxy" "$n" "$KUBE" kube-proxy --config="$d/kube-proxy.yaml"
	done

	wait_for "all nodes Ready" "$KUBE_UP_TIMEOUT" all_ready
	# Services work once each kube-proxy has programmed its rules (its
	# healthz answers 200 after the first sync).
	for n in "${NODES[@]}"; do
		wait_for "$n kube-proxy" 60 nsenter --net=/run/netns/"$n" -- curl -fsS -m 2 http://127.0.0.1:10256/healthz
	done
	trap - EXIT INT TERM
	say "up in $((SECONDS - t0)) s: ${NODES[*]} Ready (kube-proxy $KUBE_PROXY_MODE${KUBE_STATIC_CPU_NODE:+, static CPU manager on $KUBE_STATIC_CPU_NODE})"
	echo "$KUBECONFIG_PATH"
}

save_tunables() {
	local t
	for t in "${TUNABLES[@]}"; do echo "$t=$(sysctl -n "$t")"; done >"$STATE/tunables"
}

# --- images ---------------------------------------------------------------------------

# images [REF...]: import images from the default Docker engine into every
# node's containerd (namespace k8s.io, where kubelet looks); no REF: every
# ctrperf/* image there. The pause image is built first if missing.
images() {
	local refs=("$@") n p
	if ((${#refs[@]} == 0)); then
		mapfile -t refs < <(docker images --format '{{.Repository}}:{{.Tag}}' | grep '^ctrperf/' | grep -v ':<none>$' | sort -u)
	fi
	if [[ " ${refs[*]} " == *" $PAUSE_IMAGE "* ]] && ! docker image inspect "$PAUSE_IMAGE" >/dev/null 2>&1; then
		[[ -x $CTRPERF ]] || die "$CTRPERF is missing: make build"
		"$CTRPERF" images build pause >&2
	fi
	# One docker save, streamed through a FIFO per node into every node's
	# containerd at once: no copy of the images (GBs) on disk, and the
	# imports (hashing, unpacking) side by side instead of one after the
	# other. A failed import closes its FIFO: tee fails, and so does this.
	local dir pids=() fifos=() rc=0
	dir=$(mktemp -d "$RUN/images.XXXXXX")
	for n in "${NODES[@]}"; do
		mkfifo "$dir/$n"
		fifos+=("$dir/$n")
		ctr -a "$RUN/$n/containerd.sock" -n k8s.io images import - <"$dir/$n" >/dev/null &
		pids+=($!)
	done
	docker save "${refs[@]}" | tee "${fifos[@]}" >/dev/null || rc=$?
	for p in "${pids[@]}"; do wait "$p" || rc=$?; done
	rm -rf "$dir"
	((rc == 0)) || die "importing ${refs[*]} into ${NODES[*]} failed ($rc)"
	say "imported ${#refs[@]} image(s) into ${NODES[*]}: ${refs[*]}"
}

# --- down -----------------------------------------------------------------------------

down() {
	local t0=$SECONDS n p h
	# Kubelets and proxies first, so that nothing restarts pods.
	for n in "${NODES[@]}"; do
		stop "$n-kubelet"
		stop "$n-kube-proxy"
	done
	# Every process left in the nodes' cgroups (the pods' containers).
	kill_cgroups
	# The containerd shims of our nodes: they name their containerd's socket
	# under $RUN (nothing else does; the pattern's [e] keeps grep from
	# finding itself).
	local pids
	pids=$(grep -las -- "${RUN%e}[e]/" /proc/[0-9]*/cmdline 2>/dev/null | cut -d/ -f3 || true)
	if [[ -n $pids ]]; then kill -KILL $pids 2>/dev/null || true; fi
	for n in "${NODES[@]}"; do stop "$n-containerd"; done
	# The control plane's state (etcd's data) is removed below: nothing to
	# shut down gracefully, and kube-apiserver's graceful shutdown alone
	# took 6 s.
	for p in kube-scheduler kube-controller-manager kube-apiserver etcd; do stop "$p" 0; done

	# Mounts under our directories (pod volumes, rootfs, shm, pod netns
	# files), deepest first.
	local m
	for m in $(awk -v s="$STATE/" -v r="$RUN/" 'index($5, s) == 1 || index($5, r) == 1 {print $5}' /proc/self/mountinfo | sort -r); do
		umount -l "$m" 2>/dev/null || true
	done

	# Network: namespaces (their veths and CNI bridges go with them),
	# bridge (its routes go with it), our FORWARD chain.
	for n in "${NODES[@]}"; do
		if [[ -e /run/netns/$n ]]; then ip netns del "$n"; fi
		ip link del "$n" 2>/dev/null || true
	done
	ip link del "$BRIDGE" 2>/dev/null || true
	forward_remove "$CHAIN"

	# cgroups, deepest first.
	remove_cgroups "$CGROUP_ROOT"

	# Kernel tunables kubelet changed.
	if [[ -f $STATE/tunables ]]; then
		sysctl -qw $(cat "$STATE/tunables") || true
	fi
	rm -rf "$STATE" "$RUN"
	rmdir /var/lib/ctrperf /run/ctrperf 2>/dev/null || true
	say "down in $((SECONDS - t0)) s"
}

kill_cgroups() {
	local h pids
	for h in $(hierarchies); do
		[[ -d $h/$CGROUP_ROOT ]] || continue
		for ((i = 0; i < 50; i++)); do
			# || true: cgroups vanish under find while their pods die (with
			# pipefail and set -e that ended down halfway, silently).
			pids=$(find "$h/$CGROUP_ROOT" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u || true)
			[[ -n $pids ]] || break
			kill -KILL $pids 2>/dev/null || true
			sleep 0.1
		done
	done
}

status() {
	local p rc=0 procs=(etcd kube-apiserver kube-controller-manager kube-scheduler)
	for n in "${NODES[@]}"; do procs+=("$n-containerd" "$n-kubelet" "$n-kube-proxy"); done
	for p in "${procs[@]}"; do
		if running "$p"; then echo "$p running (pid $(cat "$RUN/$p.pid"))"; else echo "$p not running"; rc=1; fi
	done
	[[ -f $STATE/settings ]] && echo "settings: $(cat "$STATE/settings")"
	for n in "${NODES[@]}"; do
		# kube-proxy's mode as it reports it (metrics port, node address).
		if running "$n-kube-proxy"; then
			echo "$n kube-proxy mode: $(curl -sS -m 2 "http://${NODE_IP[$n]}:10249/proxyMode" 2>&1)"
		fi
	done
	if [[ -f $KUBECONFIG_PATH ]]; then kubectl get nodes -o wide || rc=1; else rc=1; fi
	return $rc
}

# lock: one up, down or images at a time, as lab.sh does (lib.sh).
lock() { take_lock "$KUBE_LOCK" "kube.sh up, down or images"; }

case ${1:-} in
up) lock; up ;;
down) lock; down ;;
status) status ;;
images) shift; lock; images "$@" ;;
*) die "usage: scripts/kube.sh up|down|status|images [REF...]" ;;
esac
