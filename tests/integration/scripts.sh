#!/usr/bin/env bash
# scripts.sh: scripts/deps.sh respects the machine it runs on. The demo's
# set holds what the demo needs and nothing the tests alone use (Apache,
# nginx, valgrind, clang, Redis, Prometheus, Chromium); the test set holds
# the demo's and those. Run as root with everything installed, neither
# set touches a service: systemctl, service, update-rc.d, invoke-rc.d,
# pkill, apt-get and npm are replaced by recorders on PATH (dpkg-query
# says every package is installed, and RLGATE_NODE_DIR holds the npm
# package structured-headers), and none is called (an earlier deps.sh
# stopped and disabled the machine's redis-server on every run).
: "${RLGATE_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/integration/lib.sh
. "$RLGATE_SRCDIR/tests/integration/lib.sh" || { echo "Bail out! cannot read lib.sh"; exit 99; }

setup_test timeout

deps="$RLGATE_SRCDIR/scripts/deps.sh"
demo=$(bash "$deps" --list demo) || bail_out "deps.sh --list demo failed"
full=$(bash "$deps" --list) || bail_out "deps.sh --list failed"

has() { printf '%s\n' "$1" | grep -qx "$2"; }

missing=
for p in build-essential libfcgi-dev libsqlite3-dev libhiredis-dev libsodium-dev \
    spawn-fcgi lighttpd sqlite3 curl; do
	has "$demo" "$p" || missing="$missing $p"
done
is "${missing# }" "" "the demo's set: what it takes to build and run the demo"
extra=
for p in apache2 nginx-light valgrind clang redis-server prometheus chromium check wrk; do
	has "$demo" "$p" && extra="$extra $p"
done
is "${extra# }" "" "the demo's set: nothing only the tests use"
missing=
for p in $demo apache2 nginx-light valgrind clang redis-server prometheus chromium check wrk jq; do
	has "$full" "$p" || missing="$missing $p"
done
is "${missing# }" "" "the test set: the demo's, and what the tests use"
bash "$deps" nonsense >/dev/null 2>&1
is "$?" 64 "an unknown set: exit 64"

# the recorders
mkdir -p "$T/shim"
for c in systemctl service update-rc.d invoke-rc.d pkill apt-get npm; do
	printf '#!/bin/sh\necho "%s $*" >>"%s/calls"\nexit 0\n' "$c" "$T" >"$T/shim/$c"
	chmod 755 "$T/shim/$c"
done
printf '#!/bin/sh\nprintf "install ok installed"\n' >"$T/shim/dpkg-query"
chmod 755 "$T/shim/dpkg-query"
mkdir -p "$T/node/node_modules/structured-headers"
echo '{"name":"structured-headers","version":"1.0.1"}' \
    >"$T/node/node_modules/structured-headers/package.json"
: >"$T/calls"
for set in demo test; do
	PATH="$T/shim:$PATH" RLGATE_NODE_DIR="$T/node" timeout 60 \
	    bash "$deps" "$set" >"$T/$set.out" 2>&1
	is "$?" 0 "deps.sh $set, everything installed: exit 0"
	is "$(cat "$T/$set.out")" "" "... says nothing"
done
is "$(cat "$T/calls")" "" "no service stopped, disabled or started, no process killed, nothing installed"
if [ -s "$T/calls" ]; then
	diag "called: $(tr '\n' ';' <"$T/calls")"
fi

done_testing
