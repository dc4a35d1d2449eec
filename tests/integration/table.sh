#!/usr/bin/env bash
# table.sh: [store] commit = behind, the decision table in shared memory
# with SQLite written behind, through real lighttpd and spawn-fcgi.
#  1. Exact under load: -F 8 --threads 4 on one table, tests/loadgen from
#     300 addresses over two windows or more: per client and window,
#     admitted == min(sent, limit); after the load the database catches up
#     with the table within a few intervals (the lag is printed) and holds
#     each client's admitted count of the last window.
#  2. The table file beside the database: mode 0600.
#  3. Workers SIGKILLed mid-load: the others answer on; once flushed, per
#     client of the last window, admitted <= stored <= admitted + failed.
#  4. A restart (every worker stopped, new ones started) keeps every
#     client's count: a client at its limit is still refused (parts 4-6
#     count under a policy of an hour, so no window ends mid-check).
#  5. rlgate --reset CLIENT: the client's state gone from the table and the
#     database; its next request is admitted.
#  6. A table file that is not a table (garbage) is rebuilt from the
#     database, counts kept.
#
# TABLE_TOTAL (default 30000) and TABLE_CLIENTS (default 300) scale it.
: "${RLGATE_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/integration/lib.sh
. "$RLGATE_SRCDIR/tests/integration/lib.sh" || { echo "Bail out! cannot read lib.sh"; exit 99; }

setup_test lighttpd spawn-fcgi sqlite3 curl
need_loadgen
db="$T/table.db"
TOTAL=${TABLE_TOTAL:-30000} CLIENTS=${TABLE_CLIENTS:-300}
LIMIT=50 WINDOW=10 FLUSH_MS=200

# (With commit = behind no rejection cache stands in front of the table:
# part 5's reset takes effect in every worker at once.)
start_load_gateway "$db" "$LIMIT" "$WINDOW" 8 4 \
    "$(printf 'commit = behind\nflush_ms = %d\nmax_clients = 10000' "$FLUSH_MS")"

# run_load NAME ARGS...: run_loadgen, its cells and summary kept as
# $T/NAME.cells and $T/NAME.summary.
run_load() {
	local rc name=$1
	shift
	run_loadgen "$name" --per-client 10:90 --max-seconds 600 "$@"
	rc=$?
	cp "$T/cells" "$T/$name.cells"
	cp "$T/summary" "$T/$name.summary"
	return $rc
}
val() { awk -v k="$2" '$1 == k { print $2 }' "$T/$1.summary"; }

# db_mismatches NAME AWK: the clients of the last window of NAME whose count
# the awk program AWK finds wrong, as "client stored admitted failed".
db_mismatches() {
	local last
	last=$(awk '{ print $1 }' "$T/$1.cells" | sort -n | tail -1)
	sql "$db" "SELECT client, count FROM rlg_state WHERE policy = 'default' AND window_start_ms = $last" |
	    tr '|' ' ' | sort >"$T/$1.db"
	awk -v w="$last" '$1 == w { print $2, $4, $3 - $4 - $5 }' "$T/$1.cells" | sort >"$T/$1.sent"
	join -a 1 -e 0 -o 1.1,2.2,1.2,1.3 "$T/$1.sent" "$T/$1.db" | awk "$2"
}

# ---- 1. exact under load ----------------------------------------------------
run_load load --total "$TOTAL" --min-windows 2
is "$?" 0 "loadgen sent $TOTAL requests over 2 windows or more" "$(tail -3 "$T/loadgen.err")"
is "$(val load ambiguous)" 0 "every answer's window is known"
check_load_counts "$LIMIT" 8

# The database lags the table by the flush interval: wait for it, and say
# how long it took (a figure, not a timed assertion; the bound is loose).
start=$(now_ms)
while :; do
	n=$(db_mismatches load '$2 != $3' | wc -l)
	[ "$n" -eq 0 ] && break
	[ $(($(now_ms) - start)) -gt 10000 ] && break
	sleep_ms 20
done
lag=$(($(now_ms) - start))
diag "table: the database caught up ${lag} ms after the load (flush_ms = $FLUSH_MS)"
is "$n" 0 "the database holds every client's admitted count of the last window, once flushed" \
    "$(db_mismatches load '$2 != $3' | head -5)"

# ---- 2. the file --------------------------------------------------------------
is "$(stat -c %a "$db-table" 2>/dev/null)" 600 "the table file $db-table has mode 0600"

# ---- 3. workers killed mid-load ----------------------------------------------
# One window's worth of load, with two workers killed in it.
wait_for_window_start "$WINDOW"
run_load kill --total "$((TOTAL / 3))" --min-windows 2 &
loadpid=$!
sleep 1
kill -9 "${RLGATE_PIDS[0]}"
sleep 1
kill -9 "${RLGATE_PIDS[1]}"
wait "$loadpid"
diag "table: with 2 of 8 workers SIGKILLed: $(tr '\n' ' ' <"$T/kill.summary")"
alive=0
for p in "${RLGATE_PIDS[@]:2}"; do
	pid_alive "$p" && alive=$((alive + 1))
done
is "$alive" 6 "the 6 other workers answer on"
between "$(val kill status_200)" 1 999999999 "requests were admitted after the kills"
sleep_ms $((FLUSH_MS * 5))
is "$(db_mismatches kill '$2 < $3 || $2 > $3 + $4' | wc -l)" 0 \
    "per client of the last window: admitted <= stored <= admitted + failed" \
    "$(db_mismatches kill '$2 < $3 || $2 > $3 + $4' | head -5)"
is "$(awk -v L=$LIMIT '$4 > L' "$T/kill.cells" | wc -l)" 0 \
    "no client got more than $LIMIT admitted in a window"

# code URL: the status of one request.
code() {
	req "$@"
	echo "$STATUS"
}

# Parts 4-6 count $url under a policy of an hour, so that no window ends
# between a fill and the check after it, however slow the machine: the
# workers are restarted with it added to the config.
cat >>"$T/rlgate.conf" <<'EOF2'

[policy hour]
algorithm = fixed_window
limit = 50
window = 3600
key = ip

[route hour]
path = /api/v1/resources
policies = hour
EOF2
stop_rlgate_fcgi rlgate
start_rlgate_fcgi rlgate "$run/rlgate.sock" "$T/rlgate.conf" 2 --threads 2
ensure_window_room 3600 120

# fill: LIMIT + 1 requests from 127.0.0.1 to $url over one connection;
# true if the last was refused.
fill() {
	local i
	local -a pairs=()
	for i in $(seq 0 "$LIMIT"); do
		pairs+=("f$i" "$url")
	done
	keep_many 127.0.0.1 "${pairs[@]}"
	[ "$(cat "$T/keep.f$LIMIT.status")" = 429 ]
}
hour_count() {
	sql "$db" "SELECT count FROM rlg_state WHERE policy = 'hour' AND client = '127.0.0.1'"
}

# ---- 4. restart -----------------------------------------------------------------
fill
ok $? "127.0.0.1 brought to its limit"
stop_rlgate_fcgi rlgate
start_rlgate_fcgi rlgate "$run/rlgate.sock" "$T/rlgate.conf" 2 --threads 2
is "$(code "$url")" 429 "after a restart of every worker, still refused (the table kept its count)"

# ---- 5. reset -------------------------------------------------------------------
sleep_ms $((FLUSH_MS * 3))
out=$("$RLGATE_BIN" --config "$T/rlgate.conf" --reset 127.0.0.1 2>&1)
is "$?" 0 "rlgate --reset 127.0.0.1 exits 0" "$out"
like "$out" "reset 127.0.0.1: 1 state deleted" "it says what it deleted"
is "$(sql "$db" "SELECT count(*) FROM rlg_state WHERE client = '127.0.0.1'")" 0 "the database has no state of it"
is "$(code "$url")" 200 "its next request is admitted"
out=$("$RLGATE_BIN" --config "$T/rlgate.conf" --reset 127.0.0.1 --policy nosuch 2>&1)
is "$?" 64 "--policy of no policy: exit 64" "$out"

# ---- 6. a table that is not one ---------------------------------------------------
fill
ok $? "127.0.0.1 at its limit again"
sleep_ms $((FLUSH_MS * 3))
is "$(hour_count)" "$LIMIT" "the database has its count, flushed" "$(tail -4 "$T/rlgate.log")"
stop_rlgate_fcgi rlgate
head -c 4096 /dev/urandom >"$db-table"
start_rlgate_fcgi rlgate "$run/rlgate.sock" "$T/rlgate.conf" 2 --threads 2
is "$(code "$url")" 429 "a garbage table file is rebuilt from the database: still refused" "$(tail -3 "$T/rlgate.log")"
between "$(stat -c %s "$db-table")" 100000 999999999999 "the table file is back at its full size"

stop_rlgate_fcgi rlgate
done_testing
