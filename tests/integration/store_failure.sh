#!/usr/bin/env bash
# store_failure.sh: what rlgate does when its SQLite store fails, behind
# lighttpd + spawn-fcgi. on_error = closed: 503 JSON with Retry-After and a
# line in the error log; the running workers recover by themselves when the
# fault goes away. on_error = open: the same faults let requests through.
# Faults: the database's directory missing; the database locked by another
# process for longer than busy_timeout_ms; the database file deleted while
# rlgate serves. These run with commit = each, where every decision is a
# SQLite transaction. With commit = behind (the default) the decisions are
# made in the decision table: a lock held on the database stops only the
# flush (logged), requests are decided and counted on, and the database
# catches up once the lock is gone; a deleted database is noticed and
# given the table's states (the table is the authority: the counts are
# kept), where with each the new file is the record (logged as such).
# max_clients is held under both.
: "${RLGATE_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/integration/lib.sh
. "$RLGATE_SRCDIR/tests/integration/lib.sh" || { echo "Bail out! cannot read lib.sh"; exit 99; }

setup_test lighttpd spawn-fcgi sqlite3 curl mkfifo

make_rundir

LIMIT=5
WINDOW=3600
BUSY_MS=100

demo_lighttpd_conf

# lock_db DB: another process holds an exclusive lock on DB until unlock_db.
lock_db() {
	rm -f "$T/lock.fifo"
	mkfifo "$T/lock.fifo" || bail_out "mkfifo failed"
	sqlite3 "$1" <"$T/lock.fifo" >"$T/lock.out" 2>&1 &
	LOCK_PID=$!
	track_pid "$LOCK_PID"
	exec 7>"$T/lock.fifo"
	echo 'BEGIN EXCLUSIVE;' >&7
	# bounded wait until the lock is really held
	local i
	for i in $(seq 1 50); do
		if ! sqlite3 -cmd '.timeout 0' "$1" 'BEGIN IMMEDIATE; ROLLBACK;' \
		    >/dev/null 2>&1; then
			return 0
		fi
		sleep 0.1
	done
	bail_out "could not lock $1: $(cat "$T/lock.out")"
}
unlock_db() {
	echo 'COMMIT;' >&7
	exec 7>&-
	stop_pids "$LOCK_PID"
}

# timed_req ARGS...: req, and ELAPSED_MS its duration.
timed_req() {
	local t0
	t0=$(now_ms)
	req "$@"
	ELAPSED_MS=$(($(now_ms) - t0))
}

ensure_window_room $WINDOW 30

# ============================================================================
# on_error = closed
missing="$T/missing"
db="$missing/rlgate.db"
conf="$T/closed.conf"
COMMIT=each write_rlgate_conf "$conf" "$db" $LIMIT $WINDOW closed $BUSY_MS
# one process, one thread: one error-log throttle, so the log is exact
start_rlgate_fcgi closed "$sock" "$conf" 1 --threads 1
pids_before=$(cat "$T/closed.pid")
start_lighttpd "$T/lighttpd.conf" "$PORT"

# --- the database's directory does not exist
for i in 1 2 3; do
	req "$url"
	is "$STATUS" 503 "missing directory, closed: request $i: 503"
done
is "$(header Content-Type)" application/json "503: Content-Type: application/json"
between "$(header Retry-After)" 1 60 "503: Retry-After in 1..60"
like "$BODY" "$(re_err 503)" "503: JSON error body"
has_header RateLimit-Remaining
ok $((! $?)) "503: no RateLimit-Remaining (nothing was counted)"

lines=$(store_log_lines "$T/closed.log")
is "$(printf '%s\n' "$lines" | grep -c .)" 1 "the error log has one line about the store (not one per request)"
like "$lines" "(unable to open|cannot open|No such file|$missing)" "... naming the problem"
diag "log: $lines"

# --- the directory appears: the same workers recover, no restart
mkdir "$missing"
chmod 755 "$missing"
req "$url"
is "$STATUS" 200 "directory created: the running rlgate answers 200"
is "$(header RateLimit-Remaining)" $((LIMIT - 1)) "... and counts from there (RateLimit-Remaining $((LIMIT - 1)))"
is "$(cat "$T/closed.pid")" "$pids_before" "... with the same process"
rlgate_pids_alive closed
ok $? "... which is still running"
[ -f "$db" ]
ok $? "the database file was created"

# --- the database is locked by another process for longer than busy_timeout_ms
off=$(log_size closed)
lock_db "$db"
timed_req "$url"
is "$STATUS" 503 "database locked, closed: 503"
between "$(header Retry-After)" 1 60 "locked: Retry-After in 1..60"
like "$BODY" "$(re_err 503)" "locked: JSON error body"
between "$ELAPSED_MS" $((BUSY_MS - 20)) 3000 "locked: answered after about busy_timeout_ms ($ELAPSED_MS ms)"
req "$url"
is "$STATUS" 503 "still locked: 503 again"
lines=$(new_store_lines closed "$off")
like "$lines" 'lock' "the error log names the lock"
diag "log: $lines"

unlock_db
req "$url"
is "$STATUS" 200 "lock released: 200"
is "$(header RateLimit-Remaining)" $((LIMIT - 2)) "... and the failed requests were not counted"
is "$(sql "$db" "SELECT count FROM rlg_state WHERE client = '127.0.0.1'")" 2 \
    "the database holds count 2"

# --- the database file is deleted while rlgate serves: within a second the
# running worker notices that the path names no file, says so once, and
# starts a new database there (the counts were in the deleted file)
off=$(log_size closed)
rm -f "$db" "$db-wal" "$db-shm"
sleep 1.2
req "$url"
is "$STATUS" 200 "database deleted: the running rlgate answers 200"
is "$(header RateLimit-Remaining)" $((LIMIT - 1)) "... counting in a new database (RateLimit-Remaining $((LIMIT - 1)))"
[ -f "$db" ]
ok $? "... which it created at the same path"
is "$(sql "$db" "SELECT count FROM rlg_state WHERE client = '127.0.0.1'")" 1 \
    "the new database holds count 1"
is "$(stat -c %a "$db")" 600 "the new database has mode 0600"
lines=$(new_store_lines closed "$off")
is "$(printf '%s\n' "$lines" | grep -c .)" 1 "deleted: one line in the error log"
like "$lines" 'deleted or replaced: reopening; with commit = each the counts and overrides are now the new file' "... saying the file was deleted or replaced, and that the counts are the new file's"
is "$(cat "$T/closed.pid")" "$pids_before" "deleted: the same process serves"

stop_rlgate_fcgi closed

# ============================================================================
# on_error = open
missing="$T/missing-open"
db="$missing/rlgate.db"
conf="$T/open.conf"
COMMIT=each write_rlgate_conf "$conf" "$db" $LIMIT $WINDOW open $BUSY_MS
start_rlgate_fcgi open "$sock" "$conf" 1 --threads 1

# --- directory missing: every request passes, past the limit too
codes=
for i in $(seq 1 $((LIMIT + 2))); do
	req "$url"
	codes="$codes $STATUS"
done
is "${codes# }" "$(printf '200 %.0s' $(seq 1 $((LIMIT + 2))) | sed 's/ $//')" \
    "missing directory, open: all $((LIMIT + 2)) requests pass (200)"
is "$(header Content-Type)" application/json "open: Content-Type: application/json"
like "$BODY" "$RE_BODY_200" "open: success JSON body"
lines=$(store_log_lines "$T/open.log")
is "$(printf '%s\n' "$lines" | grep -c .)" 1 "open: the error log has one line about the store"
diag "log: $lines"

# routing still applies when the store is down
req -X POST -d a=1 "$url"
is "$STATUS" 405 "open, store down: POST is still 405"

# --- the directory appears: counting resumes
mkdir "$missing"
chmod 755 "$missing"
req "$url"
is "$STATUS" 200 "directory created: 200"
# the POST above is counted when the store works; here it did not
is "$(header RateLimit-Remaining)" $((LIMIT - 1)) "open: counting resumes (RateLimit-Remaining $((LIMIT - 1)))"

# --- locked: passes, quickly after busy_timeout_ms
lock_db "$db"
timed_req "$url"
is "$STATUS" 200 "database locked, open: 200"
like "$BODY" "$RE_BODY_200" "locked, open: success JSON body"
between "$ELAPSED_MS" $((BUSY_MS - 20)) 3000 "locked, open: answered after about busy_timeout_ms ($ELAPSED_MS ms)"
unlock_db
req "$url"
is "$STATUS" 200 "lock released: 200"
is "$(header RateLimit-Remaining)" $((LIMIT - 2)) "open: the request let through while locked was not counted"

rlgate_pids_alive open
ok $? "rlgate survived every fault"
stop_rlgate_fcgi open

# ============================================================================
# commit = behind (the default): a lock on the database stops the flush,
# not the decisions
db="$T/behind.db"
conf="$T/behind.conf"
# busy_timeout_ms 5000: a request that waited for the lock would take 5 s,
# one that did not takes milliseconds (a loaded machine, whose requests
# took over 1 s, has room below 3 s)
write_rlgate_conf "$conf" "$db" $LIMIT $WINDOW closed 5000
sed -i 's/^\[store\]$/[store]\nflush_ms = 100/' "$conf"
start_rlgate_fcgi behind "$sock" "$conf" 1 --threads 1
req "$url"
is "$STATUS:$(header RateLimit-Remaining)" "200:$((LIMIT - 1))" "behind: 200, counted"
[ -f "$db-table" ]
ok $? "behind: decided in the table beside the database"
off=$(log_size behind)
lock_db "$db"
timed_req "$url"
is "$STATUS:$(header RateLimit-Remaining)" "200:$((LIMIT - 2))" "database locked, behind: 200, counted in the table"
between "$ELAPSED_MS" 0 3000 "locked, behind: answered without waiting for the lock's 5 s ($ELAPSED_MS ms)"
req "$url"
is "$STATUS:$(header RateLimit-Remaining)" "200:$((LIMIT - 3))" "still locked: 200, counted"
# the flusher tries every 100 ms and waits busy_timeout_ms (5 s) each time
sleep 5.6
lines=$(log_since behind "$off" | grep 'flush failed')
between "$(printf '%s\n' "$lines" | grep -c .)" 1 99 "locked, behind: the log says the flush failed"
like "$lines" 'lock' "... naming the lock"
diag "log: $(printf '%s\n' "$lines" | head -2)"
is "$(log_since behind "$off" | grep -v 'flush failed' | grep -ci 'store')" 0 "... and no store error: no request failed"
unlock_db
# the next flush writes what the lock held back
start=$(now_ms)
until [ "$(sql "$db" "SELECT count FROM rlg_state WHERE client = '127.0.0.1'")" = 3 ] ||
    [ $(($(now_ms) - start)) -gt 5000 ]; do
	sleep_ms 50
done
is "$(sql "$db" "SELECT count FROM rlg_state WHERE client = '127.0.0.1'")" 3 \
    "lock released: the database catches up with the table (count 3, after $(($(now_ms) - start)) ms)"
req "$url"
req "$url"
req "$url"
is "$STATUS:$(header RateLimit-Remaining)" "429:0" "behind: the limit holds across the fault (the 6th is 429)"

# --- the database file is deleted while rlgate serves: noticed, and the
# table (the authority) writes every state into the new database: the
# client stays refused, its count is in the new file
off=$(log_size behind)
rm -f "$db" "$db-wal" "$db-shm"
start=$(now_ms)
until [ -f "$db" ] || [ $(($(now_ms) - start)) -gt 5000 ]; do
	sleep_ms 50
done
sleep 1.2
req "$url"
is "$STATUS:$(header RateLimit-Remaining)" "429:0" "behind, database deleted: still 429, the count kept"
is "$(sql_flushed "$conf" "$db" "SELECT count FROM rlg_state WHERE client = '127.0.0.1'")" $LIMIT \
    "the new database holds the table's count ($LIMIT), once flushed"
is "$(stat -c %a "$db")" 600 "the new database has mode 0600"
diag "log: $(log_since behind "$off" | head -3)"
rlgate_pids_alive behind
ok $? "behind: rlgate survived every fault"
stop_rlgate_fcgi behind

# ============================================================================
# max_clients: the store holds state for 3 clients at most; with commit =
# each a slot is freed by a DELETE in the database, with behind (the table)
# by rlgate --reset
for commit in each behind; do
for mode in closed open; do
	db="$T/full-$commit-$mode.db"
	conf="$T/full-$commit-$mode.conf"
	COMMIT=$commit write_rlgate_conf "$conf" "$db" $LIMIT $WINDOW $mode $BUSY_MS
	sed -i 's/^\[store\]$/[store]\nmax_clients = 3/' "$conf"
	name="full-$commit-$mode"
	start_rlgate_fcgi "$name" "$sock" "$conf" 1 --threads 1
	for c in 1 2 3; do
		req --interface "127.0.0.$c" "$url"
		[ "$STATUS" = 200 ] || break
	done
	is "$STATUS" 200 "max_clients = 3, $commit, $mode: 3 clients admitted"
	for c in 4 5; do
		req --interface "127.0.0.$c" "$url"
		if [ $mode = closed ]; then
			is "$STATUS" 503 "full, $commit, closed: a 4th client (127.0.0.$c) gets 503"
			between "$(header Retry-After)" 1 60 "full, $commit, closed: Retry-After in 1..60"
		else
			is "$STATUS" 200 "full, $commit, open: a 4th client (127.0.0.$c) passes"
		fi
		has_header RateLimit-Remaining
		ok $((! $?)) "full, $commit, $mode: no RateLimit-Remaining (nothing counted)"
	done
	req --interface 127.0.0.2 "$url"
	is "$STATUS" 200 "full, $commit, $mode: a client the store holds still gets 200"
	is "$(header RateLimit-Remaining)" $((LIMIT - 2)) "... and is counted (RateLimit-Remaining $((LIMIT - 2)))"
	flush_table "$conf"
	is "$(sql "$db" "SELECT count(*) FROM rlg_state")" 3 "full, $commit, $mode: the database holds 3 clients"
	is "$(sql "$db" "SELECT clients FROM rlg_clients")" 3 "full, $commit, $mode: rlg_clients says 3"
	lines=$(store_log_lines "$T/$name.log")
	is "$(printf '%s\n' "$lines" | grep -c .)" 1 "full, $commit, $mode: one log line for two refused clients"
	like "$lines" "store full: policy \"default\" holds state for max_clients = 3 clients.*on_error = $mode" \
	    "... naming the policy, max_clients and on_error"
	diag "log: $lines"
	# an operator frees a slot: the next new client gets in
	if [ $commit = each ]; then
		sql "$db" "DELETE FROM rlg_state WHERE client = '127.0.0.1'"
		how="by hand"
	else
		out=$("$RLGATE_BIN" --config "$conf" --reset 127.0.0.1 2>&1)
		is "$out" "rlgate: reset 127.0.0.1: 1 state deleted" "full, behind, $mode: rlgate --reset frees a slot"
		how="by rlgate --reset"
	fi
	req --interface 127.0.0.4 "$url"
	is "$STATUS" 200 "full, $commit, $mode: a slot freed $how admits a new client"
	is "$(header RateLimit-Remaining)" $((LIMIT - 1)) "... counted from 1"
	rlgate_pids_alive "$name"
	ok $? "full, $commit, $mode: rlgate still runs"
	stop_rlgate_fcgi "$name"
done
done

done_testing
