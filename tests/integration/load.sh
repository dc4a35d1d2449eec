#!/usr/bin/env bash
# load.sh: exact counting under load. lighttpd + spawn-fcgi -F 8, rlgate
# --threads 4 (32 SQLite connections on one file, on a 2-core machine),
# driven by tests/loadgen: at least 100,000 requests from 1,000 distinct
# source addresses (127.1.X.Y) over at least two fixed windows. For every
# client and every window: admitted == min(sent, limit) exactly, every
# answer is a 200 or a 429, no store error reaches the log (SQLITE_BUSY
# included), and the database's counts for the last window equal the 200s
# each client got. The figures it saw are printed as diagnostics. It runs
# twice: with commit = auto (the default: the decision table, the database
# written behind; a SIGTERM stops the workers at once, and the table, a
# file, is flushed by the next process that opens it, here flush_table)
# and with commit = each (one SQLite transaction per decision).
#
# LOAD_TOTAL (default 100000) and LOAD_CLIENTS (default 1000) scale it.
: "${RLGATE_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/integration/lib.sh
. "$RLGATE_SRCDIR/tests/integration/lib.sh" || { echo "Bail out! cannot read lib.sh"; exit 99; }

setup_test lighttpd spawn-fcgi sqlite3 curl
need_loadgen

TOTAL=${LOAD_TOTAL:-100000}
CLIENTS=${LOAD_CLIENTS:-1000}
LIMIT=50
WINDOW=10

for commit in auto each; do
diag "load: commit = $commit"
db="$T/load-$commit.db"
: >"$T/rlgate.log"
COMMIT=$commit start_load_gateway "$db" "$LIMIT" "$WINDOW" 8 4
if [ $commit = auto ]; then
	[ -f "$db-table" ]
	ok $? "commit = auto: the workers decide in the table beside the database"
else
	[ -e "$db-table" ]
	ok $((! $?)) "commit = each: no table, a transaction per decision"
fi

# Each client plans 10 to 90 requests a window against a limit of 50: about
# half of the (client, window) pairs go over it.
run_loadgen load --per-client 10:90 --total "$TOTAL" --min-windows 2 --max-seconds 900
is "$?" 0 "commit = $commit: loadgen sent $TOTAL requests over 2 windows or more in time" \
    "$(tail -3 "$T/loadgen.err")"

between "$(loadgen_val requests)" "$TOTAL" 999999999 "at least $TOTAL requests answered"
between "$(loadgen_val windows)" 2 999 "over at least 2 windows"
is "$(loadgen_val status_other)" 0 "every answer is a 200 or a 429"
# An answer stalled past a window boundary is filed by its RateLimit-Reset;
# one without it would leave its window unknown.
is "$(loadgen_val ambiguous)" 0 "every answer's window is known ($(loadgen_val late) came after a boundary)"
between "$(loadgen_val status_429)" 1 999999999 "some clients went over their limit"

clients_seen=$(awk '{ print $2 }' "$T/cells" | sort -u | wc -l)
between "$clients_seen" "$CLIENTS" 999999 "$CLIENTS distinct clients sent"
pairs=$(wc -l <"$T/cells")
over=$(awk -v L=$LIMIT '$3 > L' "$T/cells" | wc -l)
diag "load: $pairs (client, window) pairs, $over of them over the limit"

codes=$(awk '{ print $9 }' "$run/lighttpd-access.log" | sort | uniq -c | awk '{ printf "%s:%s ", $2, $1 }')
diag "load: lighttpd access log statuses: $codes"
# The heart of it: per client and window, admitted == min(sent, limit); no
# store error (SQLITE_BUSY included), only 200s and 429s, no worker lost.
check_load_counts $LIMIT 8

# SIGTERM: every worker stops at once; what the table held unflushed
# stays in it (a file) until a process opens it again.
term_and_wait 10000 "${RLGATE_PIDS[@]}" || fail "rlgate workers did not stop on SIGTERM"
stop_pids "$LIGHTTPD_PID"
flush_table "$T/rlgate.conf"

# The database agrees: for the last window, each client's stored count is
# the number of 200s it got in that window.
last=$(awk '{ print $1 }' "$T/cells" | sort -n | tail -1)
is "$(sql "$db" 'PRAGMA integrity_check')" ok "commit = $commit: PRAGMA integrity_check: ok"
sql "$db" "SELECT client, count FROM rlg_state WHERE policy = 'default' AND window_start_ms = $last ORDER BY client" >"$T/db_counts"
awk -v w="$last" '$1 == w { print $2 "|" $4 }' "$T/cells" | sort >"$T/load_counts"
sort "$T/db_counts" >"$T/db_counts.sorted"
mismatch=$(comm -3 "$T/load_counts" "$T/db_counts.sorted" | wc -l)
is "$mismatch" 0 "commit = $commit: the database counts $(wc -l <"$T/load_counts") clients of the last window exactly as admitted" \
    "$(comm -3 "$T/load_counts" "$T/db_counts.sorted" | head -5)"
rm -f "$run/lighttpd-access.log" "$sock"
done
done_testing
