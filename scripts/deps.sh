#!/usr/bin/env bash
# Installs, on Debian 12 as root, whatever rlgate needs to build, test and
# run its demo that is not installed yet. Safe to run again: it only calls
# apt-get when something is missing.
set -euo pipefail

pkgs=(
	build-essential autoconf automake pkg-config   # the toolchain
	libfcgi-dev libsqlite3-dev check               # libraries and Check
	libsodium-dev clang                            # API-key hashing; the fuzzers
	spawn-fcgi lighttpd apache2 sqlite3 curl       # run it, test it, inspect it
	gnuplot-nox                                    # the boundary-burst picture
	groff-base                                     # the man pages checked (tests/integration/docs.sh)
	valgrind                                       # memcheck over one integration run
	libcurl4-openssl-dev                           # the load generator (tests/loadgen.c)
	cppcheck clang-tidy                            # static analysis (scripts/lint.sh)
	wrk nginx-light                                # the benchmarks (make bench-e2e)
	libhiredis-dev redis-server redis-tools        # the Redis store and its tests
	prometheus                                     # Prometheus and promtool (tests/integration/prometheus.sh)
	jq                                             # Prometheus' JSON answers read (the same)
	chromium                                       # the status page rendered headless (tests/integration/status_page.sh)
)

# redis-server's package runs a system service on 6379. The tests start
# their own servers on other ports and must never meet it: stop it and keep
# it from starting at boot. Errors are ignored (no systemd in a container,
# no service, not running).
quiet_redis() {
	[ "$(id -u)" -eq 0 ] || return 0
	dpkg-query -W -f='${Status}' redis-server 2>/dev/null | grep -q 'ok installed' || return 0
	if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
		systemctl stop redis-server >/dev/null 2>&1 || true
		systemctl disable redis-server >/dev/null 2>&1 || true
	else
		service redis-server stop >/dev/null 2>&1 || true
		update-rc.d redis-server disable >/dev/null 2>&1 || true
	fi
	# A server the service scripts no longer know about: by its pidfile.
	local pidfile=/run/redis/redis-server.pid pid
	if [ -r "$pidfile" ] && pid=$(cat "$pidfile") && [ -n "$pid" ] &&
	    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = redis-server ]; then
		kill "$pid" 2>/dev/null || true
	fi
	return 0
}

missing=()
for p in "${pkgs[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed'; then
		missing+=("$p")
	fi
done
if [ ${#missing[@]} -eq 0 ]; then
	quiet_redis
	exit 0
fi

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
quiet_redis
