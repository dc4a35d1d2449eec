#!/usr/bin/env bash
# crash.sh: rlgate workers killed with SIGKILL in the middle of load.
# lighttpd starts 8 rlgate processes itself ("bin-path", "min-procs" and
# "max-procs" => 8, --threads 4) so that it brings a new one up when one
# dies (spawn-fcgi starts its children once and never again); tests/loadgen
# drives 300 clients, each under its limit, and two workers are killed
# while requests are in flight. Afterwards:
#   - lighttpd has 8 workers again, and they answer 200;
#   - PRAGMA integrity_check is ok;
#   - every request that got a 200 is counted: for each client,
#     200s <= stored count <= 200s + its failed answers (a worker killed
#     after COMMIT but before its answer went out counts a request whose
#     client saw an error; it can never lose one whose client saw a 200);
#   - the failed answers are few: at most 4 (one per thread) per kill.
# It holds the SQLite transaction of commit = each to this (a kill before
# or after COMMIT); table.sh kills workers of the decision table (commit =
# behind, the default) and holds it to the same bounds.
: "${RLGATE_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/integration/lib.sh
. "$RLGATE_SRCDIR/tests/integration/lib.sh" || { echo "Bail out! cannot read lib.sh"; exit 99; }

setup_test lighttpd sqlite3 curl pgrep
need_loadgen

CLIENTS=300
PROCS=8
THREADS=4
KILLS=2
run="$T/run"
mkdir -p "$run" "$T/docroot"
chmod 755 "$run"
db="$T/crash.db"
# One day's window and a limit no client reaches: every request should be
# admitted and counted.
COMMIT=each write_rlgate_conf "$T/rlgate.conf" "$db" 1000 86400 closed 5000
PORT=$(free_port) || bail_out "no free port"
write_lighttpd_base "$T/lighttpd.conf" "$PORT" "$T/docroot" "$run/lighttpd.pid" \
    "$run/lighttpd-error.log" <<EOF
server.modules      += ( "mod_fastcgi", "mod_accesslog" )
accesslog.filename   = "$run/lighttpd-access.log"
fastcgi.server = ( "/api/" => ((
    "socket"      => "$run/rlgate.sock",
    "bin-path"    => "$RLGATE_BIN --config $T/rlgate.conf --threads $THREADS --log $T/rlgate.log",
    "min-procs"   => $PROCS,
    "max-procs"   => $PROCS,
    "check-local" => "disable",
)) )
EOF
start_lighttpd "$T/lighttpd.conf" "$PORT"
url="http://127.0.0.1:$PORT/api/v1/resources"

# workers: the pids of lighttpd's rlgate children
workers() { pgrep -P "$LIGHTTPD_PID" -x rlgate | sort -n; }
# nworkers_is N: lighttpd has N rlgate children
nworkers_is() { [ "$(workers | wc -l)" -eq "$1" ]; }
# access_lines: requests lighttpd has logged so far
access_lines() { wc -l <"$run/lighttpd-access.log" 2>/dev/null || echo 0; }
# logged_at_least N: lighttpd has logged N requests or more
logged_at_least() { [ "$(access_lines)" -ge "$1" ]; }

wait_until 10000 nworkers_is $PROCS
is "$(workers | wc -l)" $PROCS "lighttpd started $PROCS rlgate workers"
before=$(workers | tr '\n' ' ')

# 300 clients, 40 to 80 requests each, all in one window of a day (with a
# guard of a minute at each end of it).
"$LOADGEN" --url "$url" --out "$T/cells" --clients $CLIENTS \
    --concurrency 32 --window-ms 86400000 --guard-ms 60000 \
    --per-client 40:80 --total 1 --min-windows 1 --max-seconds 600 \
    >"$T/summary" 2>"$T/loadgen.err" &
LOADGEN_PID=$!
track_pid "$LOADGEN_PID"

killed=()
for k in $(seq 1 $KILLS); do
	wait_until 120000 logged_at_least $((k * 4000)) || bail_out "the load did not reach $((k * 4000)) requests"
	victim=$(workers | sed -n "${k}p")
	[ -n "$victim" ] || bail_out "no rlgate worker to kill"
	kill -KILL "$victim"
	killed+=("$victim")
	diag "crash: SIGKILL to worker $victim after $(access_lines) logged requests"
done
deadline=$(($(now_ms) + 300000))
while pid_alive "$LOADGEN_PID" && [ "$(now_ms)" -lt "$deadline" ]; do
	sleep 0.2
done
wait "$LOADGEN_PID"
is "$?" 0 "the load ran to its end" "$(tail -3 "$T/loadgen.err")"
loadgen_report crash

# lighttpd brought new workers up
wait_until 15000 nworkers_is $PROCS
is "$(workers | wc -l)" $PROCS "lighttpd runs $PROCS rlgate workers again"
gone=0
for p in "${killed[@]}"; do
	pid_alive "$p" && gone=1
done
is "$gone" 0 "the killed workers are gone"
diag "crash: workers before: $before; after: $(workers | tr '\n' ' ')"
for i in $(seq 1 $((PROCS * 2))); do
	req "$url" --interface 127.2.0.1
	[ "$STATUS" = 200 ] || break
done
is "$STATUS" 200 "the workers answer 200 after the kills"

is "$(loadgen_val status_429)" 0 "no client reached its limit"
between "$(loadgen_val status_other)" 0 $((KILLS * THREADS)) "at most $THREADS failed answers per killed worker"
is "$(loadgen_val ambiguous)" 0 "all requests in one window"

is "$(sql "$db" 'PRAGMA integrity_check')" ok "PRAGMA integrity_check: ok"
win=$(awk '{ print $1 }' "$T/cells" | sort -u)
sql "$db" "SELECT client, count FROM rlg_state WHERE policy = 'default' AND window_start_ms = ${win:-0}" | tr '|' ' ' | sort >"$T/db_counts"
awk '{ print $2, $4, $6 }' "$T/cells" | sort >"$T/load_counts"
# client 200s other | client count
bad=$(join -a 1 "$T/load_counts" "$T/db_counts" | awk '{ n = ($4 == "" ? 0 : $4)
	if (n < $2 || n > $2 + $3) print $1 ": 200s " $2 ", failed " $3 ", stored " n }')
is "$(printf '%s' "$bad" | grep -c .)" 0 "every 200 is counted: 200s <= stored <= 200s + failed, for all $CLIENTS clients" \
    "$(printf '%s\n' "$bad" | head -5)"
extra=$(join "$T/load_counts" "$T/db_counts" | awk '{ s += $4 - $2 } END { print s + 0 }')
diag "crash: requests counted whose client saw an error: $extra"
is "$(grep -c 'child signalled: 9' "$run/lighttpd-error.log")" $KILLS "lighttpd saw $KILLS workers killed by SIGKILL"

stop_pids "$LIGHTTPD_PID"
done_testing
