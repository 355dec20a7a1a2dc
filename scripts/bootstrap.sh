#!/usr/bin/env bash
# bootstrap.sh: install what ctrperf needs and is missing, from Debian's own
# packages. Idempotent; as root on Debian. When nothing is missing it only
# looks (well under 2 s) and says so.
#
#   scripts/bootstrap.sh           # install what is missing
#   scripts/bootstrap.sh --check   # only report; exit 1 if something is missing
set -euo pipefail

# Debian packages, and why:
PACKAGES=(
	docker.io iptables                          # the default engine and its NAT
	fio sysbench stress-ng memcached bonnie++   # workloads on bare metal (the baseline)
	mariadb-server nginx-light                  # the web workload's DB and proxy on bare metal
	debootstrap                                 # the Debian base image (ctrperf images build)
	e2fsprogs btrfs-progs xfsprogs              # loop-mounted data roots and data filesystems (mkfs)
	wrk                                         # reference load generator for comparisons
	openssh-server                              # the lab's hosts (scripts/lab.sh: make lab-up)
	redis-server redis-tools postgresql         # examples/redis, examples/postgres: the app on bare metal and its client (redis-benchmark; pgbench is in postgresql-15)
	chromium                                    # renders the HTML report in its test
	gcc libc6-dev                               # cgo for go test -race
	etcd-server containerd containernetworking-plugins nftables conntrack  # the lab cluster (make kube-up)
)
# staticcheck for `make test`, pinned (2026.2.2).
STATICCHECK_VERSION=${STATICCHECK_VERSION:-v0.8.2}

check_only=0
[[ ${1:-} == --check ]] && check_only=1

say() { printf 'bootstrap: %s\n' "$*"; }
die() { printf 'bootstrap: %s\n' "$*" >&2; exit 1; }

cd "$(dirname "$0")/.."

[[ -r /etc/debian_version ]] || die "this is not Debian (no /etc/debian_version); install by hand: ${PACKAGES[*]}"

# --- Debian packages --------------------------------------------------------
# One dpkg-query for all of them: fast when everything is there.
installed=$(dpkg-query -W -f='${Package} ${Status}\n' "${PACKAGES[@]}" 2>/dev/null | awk '$NF == "installed" {print $1}') || true
missing=()
for p in "${PACKAGES[@]}"; do
	grep -qx -- "$p" <<<"$installed" || missing+=("$p")
done

if ((${#missing[@]})); then
	if ((check_only)); then
		say "missing Debian packages: ${missing[*]}"
	else
		[[ $(id -u) == 0 ]] || die "missing ${missing[*]}; run as root (sudo make bootstrap)"
		say "installing ${missing[*]}"
		# Packages must not start their services (dockerd, mariadb, nginx,
		# memcached): ctrperf starts what it needs itself. Debian asks
		# policy-rc.d; put a refusing one in place unless one exists.
		policy=/usr/sbin/policy-rc.d
		if [[ ! -e $policy ]]; then
			printf '#!/bin/sh\nexit 101\n' >"$policy"
			chmod 755 "$policy"
			trap 'rm -f "$policy"' EXIT
		fi
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq
		apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
		say "installed ${missing[*]}"
		missing=()
	fi
fi

# --- Go toolchain -----------------------------------------------------------
want_go=$(awk '$1 == "go" {print $2; exit}' go.mod)
if ! command -v go >/dev/null; then
	die "Go is not installed; ctrperf needs go$want_go or newer: install it from https://go.dev/dl/ (tar -C /usr/local -xzf go*.linux-amd64.tar.gz; export PATH=\$PATH:/usr/local/go/bin)"
fi
have_go=$(go env GOVERSION | sed 's/^go//')
if [[ $(printf '%s\n%s\n' "$want_go" "$have_go" | sort -V | head -1) != "$want_go" ]]; then
	die "Go $have_go is older than go.mod's go $want_go: install a newer Go from https://go.dev/dl/, or let the go command fetch it with GOTOOLCHAIN=auto"
fi

# --- staticcheck --------------------------------------------------------------
gobin=$(go env GOBIN)
[[ -n $gobin ]] || gobin="$(go env GOPATH)/bin"
staticcheck="$gobin/staticcheck"
if [[ ! -x $staticcheck ]] || ! go version -m "$staticcheck" 2>/dev/null | grep -q "honnef.co/go/tools[[:space:]]*$STATICCHECK_VERSION[[:space:]]"; then
	if ((check_only)); then
		missing+=("staticcheck@$STATICCHECK_VERSION")
		say "missing staticcheck $STATICCHECK_VERSION in $gobin"
	else
		say "installing staticcheck $STATICCHECK_VERSION into $gobin"
		go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION"
	fi
fi

if ((${#missing[@]})); then
	exit 1
fi
say "all present (Debian packages, go $have_go >= $want_go, staticcheck $STATICCHECK_VERSION)"
