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
# scripts/demo.sh status names the programs it finds running (lighttpd,
# rlgate), and the commands the demo prints to try are the README's.
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

# --- scripts/demo.sh status, in a tree of its own (no demo of the source
# tree is looked at): two processes of ours stand for lighttpd and rlgate
mkdir -p "$T/tree/scripts" "$T/tree/demo"
cp "$RLGATE_SRCDIR/scripts/demo.sh" "$T/tree/scripts/"
sleep 60 >/dev/null 2>&1 &
lpid=$!
sleep 60 >/dev/null 2>&1 &
rpid=$!
track_pid "$lpid" "$rpid"
echo "$lpid" >"$T/tree/demo/lighttpd.pid"
echo "$rpid" >"$T/tree/demo/rlgate.pids"
out=$(timeout 10 bash "$T/tree/scripts/demo.sh" status 2>&1)
is "$out" "running: lighttpd pid $lpid
running: rlgate pid $rpid" "demo.sh status names lighttpd and rlgate with their pids"
stop_pids "$lpid" "$rpid"

# --- what the demo prints to try is what the README shows: its commands
# (comments dropped, the port and the run directory as the README has them)
# (the README's block that ends with "bash scripts/demo.sh stop")
readme_cmds=$(awk '/^```/ { if (inb && blk ~ /\nbash scripts\/demo\.sh stop\n$/) { printf "%s", blk; exit }
	inb = !inb; blk = "\n"; next } inb { blk = blk $0 "\n" }' "$RLGATE_SRCDIR/README.md" |
    sed -E "/^\$/d; s/[[:space:]]+#[^'\"]*\$//; s/[[:space:]]+\$//")
# shellcheck disable=SC2016  # $port and $run as the script writes them
demo_cmds=$(awk '/^Try it:/ { on = 1; next } on && /^$/ { exit } on' "$RLGATE_SRCDIR/scripts/demo.sh" |
    sed -E "s/^[[:space:]]+//; s/[[:space:]]+#[^'\"]*\$//; s/[[:space:]]+\$//" |
    sed -e 's/\$port/8080/g' -e 's|\$run/|demo/|g')
[ -n "$demo_cmds" ] || bail_out "no commands to try found in scripts/demo.sh"
[ -n "$readme_cmds" ] || bail_out "no demo commands found in README.md"
while IFS= read -r c; do
	if printf '%s\n' "$readme_cmds" | grep -qxF -- "$c"; then
		pass "the demo's command is the README's: $c"
	else
		fail "the demo's command is the README's: $c" "README.md's:" "$readme_cmds"
	fi
done <<<"$demo_cmds"

done_testing
