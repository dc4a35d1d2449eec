#!/usr/bin/env bash
# Installs, on Debian 12 as root, what rlgate needs that is not installed
# yet: `deps.sh demo` what the demo needs (build it, run it under lighttpd
# and spawn-fcgi, look at its database), `deps.sh` (or `deps.sh test`)
# everything the tests, the benchmarks and the linters use too.
# `deps.sh --list [demo|test]` prints the packages of a set and changes
# nothing. Safe to run again: it calls apt-get only when something is
# missing.
#
# It respects the machine: it never stops, disables or kills a service or
# process it did not start. The tests start their own servers (Redis,
# lighttpd, Apache, nginx, Prometheus) on ports they pick, so a service a
# package brings along is never in their way; while installing, packages
# are kept from starting theirs (policy-rc.d), and what the machine runs
# already keeps running.
set -euo pipefail

demo_pkgs=(
	build-essential autoconf automake pkg-config   # the toolchain
	libfcgi-dev libsqlite3-dev libsodium-dev       # FastCGI, SQLite, API-key hashing
	libhiredis-dev                                 # the Redis store (built in)
	spawn-fcgi lighttpd sqlite3 curl               # run it, look at it
)
test_pkgs=(
	"${demo_pkgs[@]}"
	check                                          # the unit tests
	clang                                          # the fuzzers
	apache2                                        # Apache in front (the tests)
	lighttpd-modules-lua                           # mod_magnet: headers on an authorizer's 200 (tests/integration/authorizer.sh)
	caddy                                          # Caddy's forward_auth in front (tests/integration/caddy_auth.sh)
	gnuplot-nox                                    # the boundary-burst picture
	groff-base                                     # the man pages checked (tests/integration/docs.sh)
	valgrind                                       # memcheck over one integration run
	libcurl4-openssl-dev                           # the load generator (tests/loadgen.c)
	cppcheck clang-tidy                            # static analysis (scripts/lint.sh)
	wrk nginx-light                                # nginx's auth_request in front (tests/integration/nginx_auth.sh), the benchmarks
	redis-server redis-tools                       # the Redis store's tests (their own servers)
	prometheus                                     # Prometheus and promtool (tests/integration/prometheus.sh)
	jq                                             # Prometheus' JSON answers read (the same)
	chromium                                       # the status page rendered headless (tests/integration/status_page.sh)
	systemd                                        # systemd-analyze, systemd-socket-activate (tests/integration/systemd.sh)
	debhelper lintian                              # the Debian package built and checked (tests/package.sh)
)

list=0
if [ "${1:-}" = --list ]; then
	list=1
	shift
fi
case "${1:-test}" in
demo) pkgs=("${demo_pkgs[@]}") ;;
test) pkgs=("${test_pkgs[@]}") ;;
*)
	echo "usage: scripts/deps.sh [--list] [demo|test]" >&2
	exit 64
	;;
esac
if [ $list -eq 1 ]; then
	printf '%s\n' "${pkgs[@]}"
	exit 0
fi

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
# Packages like lighttpd, apache2, redis-server and prometheus start their
# system service when installed; rlgate's scripts start their own servers,
# so keep the new ones from starting (only while installing, and only
# with a policy of our own: a policy-rc.d already there is the machine's).
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
