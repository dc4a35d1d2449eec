#!/usr/bin/env bash
# Installs, on Debian 12 as root, whatever rlgate needs to build, test and
# run its demo that is not installed yet. Safe to run again: it only calls
# apt-get when something is missing.
set -euo pipefail

pkgs=(
	build-essential autoconf automake pkg-config   # the toolchain
	libfcgi-dev libsqlite3-dev libinih-dev check   # libraries and Check
	libsodium-dev clang                            # API-key hashing; the fuzzers
	spawn-fcgi lighttpd apache2 sqlite3 curl       # run it, test it, inspect it
	gnuplot-nox                                    # the boundary-burst picture
	valgrind                                       # memcheck over one integration run
	libcurl4-openssl-dev                           # the load generator (tests/loadgen.c)
	cppcheck clang-tidy                            # static analysis (scripts/lint.sh)
	wrk nginx-light                                # the benchmarks (make bench-e2e)
)

missing=()
for p in "${pkgs[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed'; then
		missing+=("$p")
	fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
	echo "deps.sh: missing packages: ${missing[*]}; run as root to install them" >&2
	exit 1
fi
echo "deps.sh: installing ${missing[*]}"
# Packages like lighttpd and apache2 start their system service when
# installed; rlgate's scripts start their own servers, so keep them down.
policy=/usr/sbin/policy-rc.d
own_policy=0
if [ ! -e "$policy" ]; then
	printf '#!/bin/sh\nexit 101\n' > "$policy"
	chmod 755 "$policy"
	own_policy=1
fi
trap '[ $own_policy -eq 1 ] && rm -f "$policy"' EXIT
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
