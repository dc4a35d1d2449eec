#!/usr/bin/env bash
# table_authority.sh: with [store] commit = behind, the decision table is
# the authority over its database, and no count is lost without an
# operator's act. Two spawn-fcgi sets driven with tests/fcgi_client, one
# fixed window of 5 per hour and client address (clients 10.0.0.N), a flush
# interval of 30 s (so that nothing reaches the database unless a flush
# is asked for, with rlgate --reset of nobody):
#  1. Two configurations on one database, apart only in max_clients, each
#     under its own spawn-fcgi: one client alternating between them gets
#     5 in all, then 429 from either; the one started second says that it
#     adopts the live table, naming both sizes.
#  2. A reload (SIGHUP) changing max_clients: refused as a change of the
#     store, the count goes on; the rolling restart that applies it (new
#     processes started beside the old ones, then the old ones stopped):
#     the count goes on (3 admitted before, 2 after, then 429).
#  3. The database deleted while rlgate runs: the client at its limit is
#     still refused, a flush writes its row into the new file, the log
#     says so and that the overrides are the new file's.
#  4. The database replaced (another rlgate database moved over it):
#     likewise; the row of the other file's own is kept beside them.
: "${RLGATE_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/integration/lib.sh
. "$RLGATE_SRCDIR/tests/integration/lib.sh" || { echo "Bail out! cannot read lib.sh"; exit 99; }

setup_test spawn-fcgi sqlite3

client=$RLGATE_BUILDDIR/tests/fcgi_client
[ -x "$client" ] || bail_out "no $client (make check builds it)"

make_rundir
db="$T/auth.db"

# conf NAME [STORE_LINE...]: $T/NAME.conf on $db, the store lines added.
conf() {
	local name=$1 line
	shift
	{
		echo "; written by $(basename "$0")"
		echo "[store]"
		echo "path = $db"
		echo "commit = behind"
		echo "flush_ms = 30000"
		for line in "$@"; do
			echo "$line"
		done
		echo
		echo "[policy default]"
		echo "algorithm = fixed_window"
		echo "limit = 5"
		echo "window = 3600"
		echo "key = ip"
	} >"$T/$name.conf"
	check_conf "$name"
}

# code SOCK N: the status of one request of 10.0.0.N through SOCK.
code() {
	"$client" "$1" GET /api/v1/resources "REMOTE_ADDR=10.0.0.$2" 2>>"$T/client.err" |
	    sed -n 's/^status=\([0-9]*\).*/\1/p'
}

# codes N SOCK...: one request of 10.0.0.N through each SOCK in turn, the codes
# in one line.
codes() {
	local c=$1 s out=
	shift
	for s in "$@"; do
		out="$out $(code "$s" "$c")"
	done
	echo "${out# }"
}

# flush: a flush of the table into the database now (rlgate --reset of a
# client no request has opens the store, flushes and closes it; what it
# logs goes to $T/flush.log).
flush() {
	local out
	out=$("$RLGATE_BIN" --config "$T/e1.conf" --reset flush.barrier 2>>"$T/flush.log")
	[ "$out" = "rlgate: reset flush.barrier: 0 states deleted" ] ||
		fail "flush" "$out $(tail -3 "$T/flush.log")"
}

# count N: the database's count of 10.0.0.N (empty: no row).
count() {
	sql "$db" "SELECT count FROM rlg_state WHERE client = '10.0.0.$1'"
}

s1="$run/e1.sock" s2="$run/e2.sock"
conf e1
conf e2 "max_clients = 2000"
ensure_window_room 3600 120

# ---- 1. two configurations on one database --------------------------------
start_rlgate_fcgi e1 "$s1" "$T/e1.conf" 1 --threads 2
E1=${RLGATE_PIDS[0]}
start_rlgate_fcgi e2 "$s2" "$T/e2.conf" 1 --threads 2
got=$(codes 1 "$s1" "$s2" "$s1" "$s2" "$s1" "$s2" "$s1" "$s2" "$s1" "$s2" "$s1" "$s2")
is "$got" "200 200 200 200 200 429 429 429 429 429 429 429" \
    "one client alternating between two configurations: 5 admitted in all, then 429 from either"
like "$(cat "$T/e2.log")" "live table holds [0-9]+ entries, this configuration asks for [0-9]+ \\(max_clients = 2000" \
    "the second configuration says it adopts the live table, naming both sizes"
flush
is "$(count 1)" 5 "the database holds 5 for the client, flushed"
stop_rlgate_fcgi e2

# ---- 2. a reload, and a rolling restart, changing max_clients --------------
# A reload cannot change the store: it says so and the count goes on. The
# restart that applies it starts the new processes while the old ones
# still serve: both share the live table, then the old ones stop.
is "$(codes 2 "$s1" "$s1" "$s1")" "200 200 200" "3 of 5 admitted before the reload"
conf e1 "max_clients = 3000"
before=$(log_size e1)
kill -HUP "$E1"
for i in $(seq 1 50); do
	log_since e1 "$before" | grep -q "reload: " && break
	sleep 0.1
done
like "$(log_since e1 "$before")" "\\[store\\] max_clients changed: a reload cannot change the store" \
    "a reload changing max_clients says it cannot apply it" "$(log_since e1 "$before" | tail -3)"
is "$(codes 2 "$s1" "$s1" "$s1")" "200 200 429" "after it, 2 more admitted, then 429"
is "$(codes 3 "$s1" "$s1" "$s1")" "200 200 200" "another client: 3 of 5 admitted by the old processes"
s3="$run/e1b.sock"
start_rlgate_fcgi e1b "$s3" "$T/e1.conf" 1 --threads 2
is "$(codes 3 "$s3" "$s1" "$s3")" "200 200 429" \
    "the new processes (max_clients = 3000) beside the old ones: 2 more in all, then 429"
stop_rlgate_fcgi e1
is "$(codes 3 "$s3")" 429 "the old ones stopped: still refused"
like "$(cat "$T/e1b.log")" "live table holds [0-9]+ entries, this configuration asks for [0-9]+ \\(max_clients = 3000" \
    "the new ones say they adopt the live table"
s1=$s3

# flushed_log: what the flushes since $before logged: the flush of
# --reset, or the server's own (every flush_ms) if it came first
flushed_log() {
	cat "$T/flush.log"
	log_since e1b "$before"
}

# ---- 3. the database deleted -----------------------------------------------
is "$(codes 4 "$s1" "$s1" "$s1" "$s1" "$s1" "$s1")" "200 200 200 200 200 429" "a third client brought to its limit"
before=$(log_size e1b)
rm -f "$db" "$db-wal" "$db-shm"
is "$(codes 4 "$s1" "$s1")" "429 429" "the database deleted: still refused"
flush
is "$(count 4)" 5 "a flush writes the client's row into the new file"
is "$(count 1)" 5 "and every other client's"
is "$(codes 4 "$s1")" 429 "the next request is still refused"
like "$(flushed_log)" "its database was deleted or replaced .*: the table keeps every client's state and writes its [0-9]+ states into the new file; the overrides are now the new file's" \
    "the log says the database was deleted or replaced, and what becomes of the overrides"
: >"$T/flush.log"

# ---- 4. the database replaced ----------------------------------------------
is "$(codes 5 "$s1" "$s1" "$s1" "$s1" "$s1" "$s1")" "200 200 200 200 200 429" "a fourth client brought to its limit"
other="$T/other.db"
sed "s|^path = .*|path = $other|" "$T/e1.conf" >"$T/other.conf"
: >"$T/other.log"
"$RLGATE_BIN" --config "$T/other.conf" --reset flush.barrier >/dev/null 2>>"$T/other.log" ||
    bail_out "cannot make $other: $(tail -3 "$T/other.log")"
sql "$other" "INSERT INTO rlg_state (policy, client, window_start_ms, count, expires_ms) VALUES ('default', '10.0.0.9', 0, 1, 9000000000000)" ||
    bail_out "cannot put a row in $other"
before=$(log_size e1b)
rm -f "$db-wal" "$db-shm"
mv "$other" "$db"
is "$(codes 5 "$s1")" 429 "the database replaced: still refused"
flush
is "$(count 5)" 5 "a flush writes the client's row into the replacing file"
is "$(count 2)" 5 "and every other client's"
is "$(count 9)" 1 "the replacing file's own row stays"
is "$(codes 5 "$s1")" 429 "the next request is still refused"
like "$(flushed_log)" "its database was deleted or replaced" "the log says so"

stop_rlgate_fcgi e1
done_testing
