#!/usr/bin/env bash
# bootstrap.sh: install what ctrperf needs and is missing, from Debian's own
# packages. Idempotent; as root on Debian. When nothing is missing it only
# looks (well under 2 s) and says so.
#
#   scripts/bootstrap.sh                   # every package, the Go check, staticcheck (make bootstrap, make test)
#   scripts/bootstrap.sh --for engine      # only the packages of a set (make demo: engine)
#   scripts/bootstrap.sh --for lab,engine  # several sets
#   scripts/bootstrap.sh --check [--for SET]  # only report; exit 1 if something is missing
#
# The packages, their sets and why ctrperf needs each are one list,
# internal/deps/packages.txt, which `ctrperf doctor` reads too (it is built
# into the binary). Sets: engine (the Docker engine and its NAT: make demo,
# make engine), base-image (debootstrap: make images), lab (make lab-up),
# kube (make kube-up).
set -euo pipefail

# staticcheck for `make test`, pinned (2026.2.2); only without --for.
STATICCHECK_VERSION=${STATICCHECK_VERSION:-v0.8.2}

check_only=0 sets=
while (($#)); do
	case $1 in
	--check) check_only=1 ;;
	--for) sets=${2:?--for needs a set: engine, base-image, lab, kube}; shift ;;
	--for=*) sets=${1#--for=} ;;
	*) printf 'bootstrap: unknown argument %s (--check, --for SET[,SET])\n' "$1" >&2; exit 2 ;;
	esac
	shift
done

say() { printf 'bootstrap: %s\n' "$*"; }
die() { printf 'bootstrap: %s\n' "$*" >&2; exit 1; }
# since T0: seconds since T0 (date +%s%N) with one decimal.
since() { local ms=$((($(date +%s%N) - $1) / 1000000)); printf '%d.%d s' $((ms / 1000)) $((ms % 1000 / 100)); }

cd "$(dirname "$0")/.."
LIST=internal/deps/packages.txt
[[ -r $LIST ]] || die "$LIST is missing (run from a ctrperf source tree)"

# The packages of the sets asked for (all of them without --for).
mapfile -t PACKAGES < <(awk -v sets="$sets" '
	BEGIN { n = split(sets, want, ",") }
	/^#/ || NF < 3 { next }
	n == 0 { print $1; next }
	{ m = split($2, have, ","); for (i = 1; i <= n; i++) for (j = 1; j <= m; j++) if (want[i] == have[j]) { print $1; next } }
' "$LIST")
if [[ -n $sets ]]; then
	known=$(awk '!/^#/ && NF >= 3 && $2 != "-" {print $2}' "$LIST" | tr ',' '\n' | sort -u | tr '\n' ' ')
	for s in ${sets//,/ }; do
		[[ " $known " == *" $s "* ]] || die "--for $s: no such set (known: ${known% })"
	done
fi
what=${sets:+" for ${sets//,/, }"}

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
		say "missing Debian packages$what: ${missing[*]}"
	else
		[[ $(id -u) == 0 ]] || die "missing ${missing[*]}; run as root (sudo make bootstrap)"
		say "installing ${#missing[@]} Debian packages$what: ${missing[*]}"
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
		# Three steps, each timed: the index, the download (with its
		# size), the unpacking and configuring.
		t=$(date +%s%N)
		apt-get update -qq
		say "  apt-get update: $(since "$t")"
		t=$(date +%s%N)
		apt-get install -y -qq --no-install-recommends --download-only "${missing[@]}" >/dev/null
		say "  downloaded: $(since "$t")"
		t=$(date +%s%N)
		apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
		say "  unpacked and configured: $(since "$t")"
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

# --- staticcheck (make test) --------------------------------------------------
tail=
if [[ -z $sets ]]; then
	gobin=$(go env GOBIN)
	[[ -n $gobin ]] || gobin="$(go env GOPATH)/bin"
	staticcheck="$gobin/staticcheck"
	if [[ ! -x $staticcheck ]] || ! go version -m "$staticcheck" 2>/dev/null | grep -q "honnef.co/go/tools[[:space:]]*$STATICCHECK_VERSION[[:space:]]"; then
		if ((check_only)); then
			missing+=("staticcheck@$STATICCHECK_VERSION")
			say "missing staticcheck $STATICCHECK_VERSION in $gobin"
		else
			say "installing staticcheck $STATICCHECK_VERSION into $gobin (go install; about a minute with an empty build cache)"
			t=$(date +%s%N)
			go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION"
			say "  staticcheck built: $(since "$t")"
		fi
	fi
	tail=", staticcheck $STATICCHECK_VERSION"
fi

if ((${#missing[@]})); then
	exit 1
fi
n=${#PACKAGES[@]}
say "all present$what ($n Debian package$( ((n == 1)) || echo s), go $have_go >= $want_go$tail)"
