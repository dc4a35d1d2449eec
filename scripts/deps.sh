#!/usr/bin/env bash
# Installs, on Debian 12 as root, what rlgate needs that is not installed
# yet: `deps.sh demo` what the demo needs (build it, run it under lighttpd
# and spawn-fcgi, look at its database), `deps.sh` (or `deps.sh test`)
# everything the tests, the benchmarks and the linters use too.
# `deps.sh --list [demo|test]` prints the Debian packages of a set and
# changes nothing. Safe to run again: it calls apt-get (and npm) only when
# something is missing.
#
# The test set holds one package Debian does not: the npm package
# structured-headers (an RFC 8941/9651 parser, major version 1), with
# which tests/integration/sf_headers.sh parses the ietf style's fields,
# so a third party's reading of them is checked, not only rlgate's own
# (tests/sf_parse.c). It goes into its own directory, $RLGATE_NODE_DIR
# (default /usr/local/lib/rlgate-node, the test's NODE_PATH is its
# node_modules), not npm's global prefix: that is /usr/lib/node_modules
# for Debian's and NodeSource's node, which belongs to dpkg; a directory
# of its own is local to this machine's admin (/usr/local), pinned for
# the tests alone, and removed with one rm -r.
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
	libjwt-dev                                     # bearer tokens (key = jwt:CLAIM)
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
	redis-sentinel                                 # Sentinel failover (tests/integration/sentinel.sh)
	prometheus                                     # Prometheus and promtool (tests/integration/prometheus.sh)
	jq                                             # Prometheus' JSON answers read (the same)
	openssl                                        # bearer tokens signed as an issuer would (the JWT tests)
	chromium                                       # the status page rendered headless (tests/integration/status_page.sh)
	systemd                                        # systemd-analyze, systemd-socket-activate (tests/integration/systemd.sh)
	debhelper lintian logrotate                    # the Debian package built, checked, its log rotated (tests/package.sh)
	nodejs                                         # node, for structured-headers (see the top)
)
node_dir=${RLGATE_NODE_DIR:-/usr/local/lib/rlgate-node}
node_pkg=structured-headers@1

list=0
if [ "${1:-}" = --list ]; then
	list=1
	shift
fi
which_set=${1:-test}
case "$which_set" in
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
need_node=0
if [ "$which_set" = test ] &&
    [ ! -f "$node_dir/node_modules/structured-headers/package.json" ]; then
	need_node=1
	# Debian's nodejs comes without npm (NodeSource's has it).
	command -v npm >/dev/null 2>&1 || missing+=(npm)
fi
[ ${#missing[@]} -eq 0 ] && [ $need_node -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
	[ ${#missing[@]} -gt 0 ] &&
	    echo "deps.sh: missing packages: ${missing[*]}; run as root to install them" >&2
	[ $need_node -eq 1 ] &&
	    echo "deps.sh: missing npm package $node_pkg in $node_dir; run as root to install it" >&2
	exit 1
fi
install_node() {
	[ $need_node -eq 1 ] || return 0
	echo "deps.sh: installing npm package $node_pkg into $node_dir"
	mkdir -p "$node_dir"
	npm install --prefix "$node_dir" --no-audit --no-fund --loglevel=error "$node_pkg"
}
if [ ${#missing[@]} -eq 0 ]; then
	install_node
	exit 0
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
install_node
