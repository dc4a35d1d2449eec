#!/usr/bin/env bash
# schema_guard.sh: the database runs no code rlgate did not write. Behind
# lighttpd (and Apache, when installed) with spawn-fcgi -F 2 --threads 2 and
# a limit of 2 per minute:
#   - a trigger that sets the count back to 0 on every update, added with
#     the sqlite3 shell while rlgate serves: the next requests get 503 with
#     Retry-After (on_error = closed), never a 200, the count in the file
#     does not move, and the log names the trigger and DROP TRIGGER; after
#     DROP TRIGGER the same workers count exactly again (limit 2, then
#     429) and log that the store recovered;
#   - the same trigger in the file before rlgate starts: 503 from the first
#     request, then exact counting once it is dropped;
#   - an index of the operator's on rlg_state: refused the same way; a
#     view and a table of the operator's own: served as before;
#   - through Apache (mod_proxy_fcgi, the shipped config): the trigger
#     again, 503, then exact counting after DROP TRIGGER.
# Those run with commit = each: the trigger would fire in the transaction of
# a decision. With commit = behind (the default) it would fire in a flush:
#   - the trigger added while the table decides: requests are decided on
#     (200, then 429 at the limit), the flush refuses the file and the log
#     names the trigger, the trigger never runs; after DROP TRIGGER the
#     database catches up with the table.
: "${RLGATE_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/integration/lib.sh
. "$RLGATE_SRCDIR/tests/integration/lib.sh" || { echo "Bail out! cannot read lib.sh"; exit 99; }

setup_test lighttpd spawn-fcgi sqlite3 curl

make_rundir
db="$T/guard.db"
LIMIT=2
WINDOW=60
conf="$T/rlgate.conf"
COMMIT=each write_rlgate_conf "$conf" "$db" $LIMIT $WINDOW closed 2000
start_rlgate_fcgi rlgate "$sock" "$conf" 2 --threads 2
demo_lighttpd "$sock"

RESET_TRIGGER="CREATE TRIGGER reset AFTER UPDATE ON rlg_state BEGIN
    UPDATE rlg_state SET count = 0
    WHERE policy = new.policy AND client = new.client;
END;"

# statuses ADDR N [URL]: N requests from ADDR, their statuses in one line.
statuses() {
	local i out=
	for i in $(seq 1 "$2"); do
		req --interface "$1" "${3:-$url}"
		out="$out $STATUS"
	done
	echo "${out# }"
}

# count_of ADDR: the client's stored count ("" when it has no row).
count_of() {
	sql "$db" "SELECT count FROM rlg_state WHERE client = '$1'"
}

# Each part needs its requests in one window of 60 s.
ensure_window_room $WINDOW 20

# --- a trigger added while rlgate serves
req --interface 127.0.0.2 "$url"
is "$STATUS" 200 "before the trigger: 200"
is "$(count_of 127.0.0.2)" 1 "the client's count is 1"
sql "$db" "$RESET_TRIGGER"
got=$(statuses 127.0.0.2 6)
is "$got" "503 503 503 503 503 503" \
    "with the trigger in the file: 6 requests, 6 answered 503 (none admitted)"
between "$(header Retry-After)" 1 60 "the 503 has Retry-After"
is "$(count_of 127.0.0.2)" 1 "the trigger never ran: the count is still 1"
like "$(store_log_lines "$T/rlgate.log")" \
    'store error: sqlite schema check on .*guard\.db: the database holds trigger "reset" on rlg_state that rlgate did not create: remove it with DROP TRIGGER "reset"' \
    "the log names the trigger and the fix"

sql "$db" "DROP TRIGGER reset"
got=$(statuses 127.0.0.2 4)
is "$got" "200 429 429 429" \
    "after DROP TRIGGER: the client's second request admitted, then 429"
is "$(count_of 127.0.0.2)" 2 "the count is the limit, 2"
like "$(store_log_lines "$T/rlgate.log")" 'store recovered after' \
    "the log says the store recovered"

# --- an index of the operator's on rlg_state; a view and a table of its own
sql "$db" "CREATE INDEX by_client ON rlg_state (client)"
is "$(statuses 127.0.0.3 2)" "503 503" "an index on rlg_state: 503"
like "$(store_log_lines "$T/rlgate.log")" \
    'holds index "by_client" on rlg_state that rlgate did not create: remove it with DROP INDEX "by_client"' \
    "the log names the index and the fix"
sql "$db" "DROP INDEX by_client; CREATE TABLE notes (client TEXT);
    CREATE VIEW heavy AS SELECT client FROM rlg_state WHERE count > 1"
is "$(statuses 127.0.0.3 3)" "200 200 429" \
    "the operator's own table and view: counted exactly"
is "$(sql "$db" "SELECT count(*) FROM heavy")" 2 "the operator's view works"

# --- the trigger in the file before rlgate starts
stop_rlgate_fcgi rlgate
sql "$db" "$RESET_TRIGGER"
: >"$T/rlgate.log"
start_rlgate_fcgi rlgate "$sock" "$conf" 2 --threads 2
ensure_window_room $WINDOW 10
is "$(statuses 127.0.0.4 3)" "503 503 503" \
    "a trigger in the file at start: 503 from the first request"
like "$(store_log_lines "$T/rlgate.log")" 'holds trigger "reset"' \
    "the log names the trigger"
is "$(count_of 127.0.0.4)" "" "nothing written for the client"
sql "$db" "DROP TRIGGER reset"
is "$(statuses 127.0.0.4 3)" "200 200 429" "after DROP TRIGGER: exact again"

# --- Apache
if apache_available; then
	shipped_apache "$sock"
	aurl="$AP/api/v1/resources"
	ensure_window_room $WINDOW 10
	is "$(statuses 127.0.0.5 1 "$aurl")" 200 "Apache: 200 before the trigger"
	sql "$db" "$RESET_TRIGGER"
	is "$(statuses 127.0.0.5 4 "$aurl")" "503 503 503 503" \
	    "Apache: with the trigger, 503, none admitted"
	is "$(count_of 127.0.0.5)" 1 "Apache: the count is still 1"
	sql "$db" "DROP TRIGGER reset"
	is "$(statuses 127.0.0.5 3 "$aurl")" "200 429 429" \
	    "Apache: after DROP TRIGGER, exact again"
else
	echo "ok $((_tap_n + 1)) # SKIP Apache with mod_proxy_fcgi is not installed"
	_tap_n=$((_tap_n + 1))
fi

dead=0
for p in "${RLGATE_PIDS[@]}"; do
	pid_alive "$p" || dead=$((dead + 1))
done
is "$dead" 0 "no worker died"
stop_rlgate_fcgi rlgate

# --- commit = behind: the trigger added while the table decides
db="$T/guard-behind.db"
conf="$T/behind.conf"
write_rlgate_conf "$conf" "$db" $LIMIT $WINDOW closed 2000
sed -i 's/^\[store\]$/[store]\nflush_ms = 100/' "$conf"
: >"$T/rlgate.log"
start_rlgate_fcgi rlgate "$sock" "$conf" 2 --threads 2
ensure_window_room $WINDOW 10
is "$(statuses 127.0.0.6 1)" 200 "behind: 200 before the trigger"
[ -f "$db-table" ]
ok $? "behind: decided in the table"
is "$(sql_flushed "$conf" "$db" "SELECT count FROM rlg_state WHERE client = '127.0.0.6'")" 1 \
    "behind: the database holds count 1, once flushed"
sql "$db" "$RESET_TRIGGER"
is "$(statuses 127.0.0.6 3)" "200 429 429" \
    "behind, with the trigger in the file: decided on in the table (the limit 2, then 429)"
sleep 0.5
like "$(grep 'flush failed' "$T/rlgate.log" | head -1)" \
    'holds trigger "reset" on rlg_state that rlgate did not create: remove it with DROP TRIGGER "reset"' \
    "behind: the flush refuses the file, and the log names the trigger and the fix"
is "$(count_of 127.0.0.6)" 1 "behind: the trigger never ran, and nothing was written: the count is still 1"
sql "$db" "DROP TRIGGER reset"
start=$(now_ms)
until [ "$(count_of 127.0.0.6)" = 2 ] || [ $(($(now_ms) - start)) -gt 5000 ]; do
	sleep_ms 50
done
is "$(count_of 127.0.0.6)" 2 "behind, after DROP TRIGGER: the database catches up with the table (count 2)"
rlgate_pids_alive rlgate
ok $? "behind: no worker died"
done_testing
