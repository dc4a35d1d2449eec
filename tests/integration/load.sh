#!/usr/bin/env bash
# load.sh: exact counting under load. lighttpd + spawn-fcgi -F 8, rlgate
# --threads 4 (32 SQLite connections on one file, on a 2-core machine),
# driven by tests/loadgen: at least 100,000 requests from 1,000 distinct
# source addresses (127.1.X.Y) over at least two fixed windows. For every
# client and every window: admitted == min(sent, limit) exactly, every
# answer is a 200 or a 429, no store error reaches the log (SQLITE_BUSY
# included), and the database's counts for the last window equal the 200s
# each client got. The figures it saw are printed as diagnostics.
#
# LOAD_TOTAL (default 100000) and LOAD_CLIENTS (default 1000) scale it.
: "${RLGATE_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/integration/lib.sh
. "$RLGATE_SRCDIR/tests/integration/lib.sh" || { echo "Bail out! cannot read lib.sh"; exit 99; }

need_cmd lighttpd spawn-fcgi sqlite3 curl
[ -x "$RLGATE_BIN" ] || bail_out "no rlgate binary at $RLGATE_BIN"
LOADGEN=$RLGATE_BUILDDIR/tests/loadgen
[ -x "$LOADGEN" ] || skip_all "no tests/loadgen (configure found no libcurl)"
make_tmpdir

TOTAL=${LOAD_TOTAL:-100000}
CLIENTS=${LOAD_CLIENTS:-1000}
LIMIT=50
WINDOW=10

make_rundir
db="$T/load.db"
write_rlgate_conf "$T/rlgate.conf" "$db" "$LIMIT" "$WINDOW" closed 5000
start_rlgate_fcgi rlgate "$run/rlgate.sock" "$T/rlgate.conf" 8 --threads 4
demo_lighttpd

# Each client plans 10 to 90 requests a window against a limit of 50: about
# half of the (client, window) pairs go over it.
"$LOADGEN" --url "$url" --out "$T/cells" --clients "$CLIENTS" \
    --concurrency 32 --window-ms $((WINDOW * 1000)) --guard-ms 500 \
    --per-client 10:90 --total "$TOTAL" --min-windows 2 --max-seconds 900 \
    >"$T/summary" 2>"$T/loadgen.err"
rc=$?
while read -r k v; do
	diag "load: $k $v"
done <"$T/summary"
is "$rc" 0 "loadgen sent $TOTAL requests over 2 windows or more in time" \
    "$(tail -3 "$T/loadgen.err")"

val() { awk -v k="$1" '$1 == k { print $2 }' "$T/summary"; }
requests=$(val requests)
between "$requests" "$TOTAL" 999999999 "at least $TOTAL requests answered"
between "$(val windows)" 2 999 "over at least 2 windows"
is "$(val status_other)" 0 "every answer is a 200 or a 429"
# An answer stalled past a window boundary is filed by its RateLimit-Reset;
# one without it would leave its window unknown.
is "$(val ambiguous)" 0 "every answer's window is known ($(val late) came after a boundary)"
between "$(val status_429)" 1 999999999 "some clients went over their limit"

clients_seen=$(awk '{ print $2 }' "$T/cells" | sort -u | wc -l)
between "$clients_seen" "$CLIENTS" 999999 "$CLIENTS distinct clients sent"
pairs=$(wc -l <"$T/cells")
over=$(awk -v L=$LIMIT '$3 > L' "$T/cells" | wc -l)
diag "load: $pairs (client, window) pairs, $over of them over the limit"

# The heart of it: per client and window, admitted == min(sent, limit).
bad=$(awk -v L=$LIMIT '{ want = $3 < L ? $3 : L
	if ($4 != want || $4 + $5 != $3)
		print "window " $1 " client " $2 ": sent " $3 ", 200: " $4 ", 429: " $5 " (want " want " admitted)" }' "$T/cells")
is "$(printf '%s' "$bad" | grep -c .)" 0 "per client and window: admitted == min(sent, $LIMIT)" \
    "$(printf '%s\n' "$bad" | head -5)"

errors=$(grep -v 'serving FastCGI' "$T/rlgate.log" | grep -ciE 'error|busy|locked|fail')
is "$errors" 0 "no store error in rlgate's log (SQLITE_BUSY included)" \
    "$(grep -v 'serving FastCGI' "$T/rlgate.log" | head -3)"
codes=$(awk '{ print $9 }' "$run/lighttpd-access.log" | sort | uniq -c | awk '{ printf "%s:%s ", $2, $1 }')
diag "load: lighttpd access log statuses: $codes"
is "$(awk '$9 != 200 && $9 != 429' "$run/lighttpd-access.log" | wc -l)" 0 \
    "lighttpd logged no status but 200 and 429"

dead=0
for p in "${RLGATE_PIDS[@]}"; do
	pid_alive "$p" || dead=$((dead + 1))
done
is "$dead" 0 "all 8 rlgate workers survived the load"

# The database agrees: for the last window, each client's stored count is
# the number of 200s it got in that window.
last=$(awk '{ print $1 }' "$T/cells" | sort -n | tail -1)
is "$(sql "$db" 'PRAGMA integrity_check')" ok "PRAGMA integrity_check: ok"
sql "$db" "SELECT client, count FROM rlg_state WHERE policy = 'default' AND window_start_ms = $last ORDER BY client" >"$T/db_counts"
awk -v w="$last" '$1 == w { print $2 "|" $4 }' "$T/cells" | sort >"$T/load_counts"
sort "$T/db_counts" >"$T/db_counts.sorted"
mismatch=$(comm -3 "$T/load_counts" "$T/db_counts.sorted" | wc -l)
is "$mismatch" 0 "the database counts $(wc -l <"$T/load_counts") clients of the last window exactly as admitted" \
    "$(comm -3 "$T/load_counts" "$T/db_counts.sorted" | head -5)"

term_and_wait 10000 "${RLGATE_PIDS[@]}" || fail "rlgate workers did not stop on SIGTERM"
done_testing
