#!/usr/bin/env bash
# sustained.sh: the files stay bounded under continuous load. lighttpd +
# spawn-fcgi -F 4, rlgate --threads 2 (8 SQLite connections on one file),
# driven by tests/loadgen for SUSTAINED_SECONDS (default 150; 45 in a
# sanitizer build) from SUSTAINED_CLIENTS distinct source addresses
# (default 20,000 for a run of 150 s or more, else 120 for each second of
# it), each sending 1 to 3 requests a window against a limit of 2. SUSTAINED_PROCS and
# SUSTAINED_THREADS change the shape (default -F 4, --threads 2). Every SUSTAINED_SAMPLE_S seconds (default 3) it samples the sizes
# of the database, its -wal and -shm, the rows of rlg_state (an operator's
# read, as anyone may run one) and the private memory of every worker
# (RssAnon: the decision table and the database are files every process
# maps and shares, their pages bounded by the files' sizes, and counted
# in VmRSS as they are touched; the decision table's entries sit where
# their hashes lead, all over its file): the samples come out as a TSV in
# TAP diag lines.
#
# It asserts: the WAL never passed SUSTAINED_WAL_MAX_MB (default 16, twice
# the length at which the store makes it start over: it checkpoints it
# past about 4 MB and makes it start over past about 8 MB), and within 45
# s of light traffic after the load (five requests a second) it is back
# within 4 MiB; the database stayed bounded by the clients (at most 400 bytes a
# client, and never more rows than clients); no worker's RssAnon grew by more
# than SUSTAINED_RSS_SLACK_MB (default 16, 256 under ASan) from the end of
# the first third of the run to its end; counting stayed exact (per client
# and window, admitted == min(sent, limit); only 200s and 429s; no store
# error in the log; the database's counts of the last window equal the
# 200s); PRAGMA integrity_check is ok.
#
# It runs with the default [store] commit (auto: the decision table, the
# database written behind; the last window's counts are read once the table
# is flushed), or SUSTAINED_COMMIT: sustained_each.sh runs it with each, one
# SQLite transaction per decision, whose WAL the bounds above were first
# set for.
#
# make soak runs it for 30 minutes (SUSTAINED_SECONDS=1800).
: "${RLGATE_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/integration/lib.sh
. "$RLGATE_SRCDIR/tests/integration/lib.sh" || { echo "Bail out! cannot read lib.sh"; exit 99; }

setup_test lighttpd spawn-fcgi sqlite3 curl
need_loadgen
cpu_bound

asan=0
nm -D "$RLGATE_BIN" 2>/dev/null | grep -q __asan_init && asan=1
if [ "$asan" = 1 ]; then
	SECONDS_RUN=${SUSTAINED_SECONDS:-45}
	# ASan holds freed memory in its quarantine, up to 256 MB
	RSS_SLACK_MB=${SUSTAINED_RSS_SLACK_MB:-256}
else
	SECONDS_RUN=${SUSTAINED_SECONDS:-150}
	RSS_SLACK_MB=${SUSTAINED_RSS_SLACK_MB:-16}
fi
# Every client must get its turn within the run, on a loaded machine too.
CLIENTS=${SUSTAINED_CLIENTS:-$((SECONDS_RUN >= 150 ? 20000 : SECONDS_RUN * 120))}
SAMPLE_S=${SUSTAINED_SAMPLE_S:-3}
WAL_MAX_MB=${SUSTAINED_WAL_MAX_MB:-16}
LIMIT=2
WINDOW=10
PROCS=${SUSTAINED_PROCS:-4}
THREADS=${SUSTAINED_THREADS:-2}

db="$T/sustained.db"
COMMIT=${SUSTAINED_COMMIT:-} start_load_gateway "$db" "$LIMIT" "$WINDOW" "$PROCS" "$THREADS"
diag "sustained: $SECONDS_RUN s, $CLIENTS clients, -F $PROCS --threads $THREADS, limit $LIMIT per $WINDOW s, $("$RLGATE_BIN" --check-config --config "$T/rlgate.conf" | head -1 | cut -d: -f1)$([ "$asan" = 1 ] && echo ", sanitizer build")"

# size FILE: its size in bytes, 0 when it does not exist.
size() {
	stat -c %s "$1" 2>/dev/null || echo 0
}

# rss_kb: the largest RssAnon (kB) of the workers, and their sum.
rss_kb() {
	local p v max=0 sum=0
	for p in "${RLGATE_PIDS[@]}"; do
		v=$(awk '/^RssAnon:/ { print $2 }' "/proc/$p/status" 2>/dev/null)
		[ -n "$v" ] || continue
		sum=$((sum + v))
		[ "$v" -gt "$max" ] && max=$v
	done
	echo "$max $sum"
}

# The sampler: one TSV line every SAMPLE_S seconds until stopped.
# Bounded: at most (SECONDS_RUN + 120) / SAMPLE_S lines.
t0=$(now_ms)
sampler() {
	local i rows rss
	printf 't_s\tdb_bytes\twal_bytes\tshm_bytes\trows\tanon_max_kb\tanon_sum_kb\n'
	for i in $(seq 0 $(((SECONDS_RUN + 120) / SAMPLE_S))); do
		rows=$(sqlite3 -cmd '.timeout 2000' "$db" \
		    'SELECT count(*) FROM rlg_state' 2>/dev/null || echo -)
		rss=$(rss_kb)
		printf '%d\t%d\t%d\t%d\t%s\t%s\t%s\n' \
		    $((($(now_ms) - t0) / 1000)) "$(size "$db")" \
		    "$(size "$db-wal")" "$(size "$db-shm")" "$rows" \
		    "${rss% *}" "${rss#* }"
		sleep "$SAMPLE_S"
	done
}
sampler >"$T/samples.tsv" &
sampler_pid=$!
track_pid "$sampler_pid"

run_loadgen sustained --per-client 1:3 --seconds "$SECONDS_RUN"
is "$?" 0 "loadgen sent for $SECONDS_RUN s, every one of $CLIENTS clients" \
    "$(tail -3 "$T/loadgen.err")"
load_end_s=$((($(now_ms) - t0) / 1000))
# The counts of the last window, before anything prunes them (they expire
# as it ends, and the next request's worker may prune).
last=$(awk '{ print $1 }' "$T/cells" | sort -n | tail -1)
sql_flushed "$T/rlgate.conf" "$db" "SELECT client, count FROM rlg_state WHERE policy = 'default' AND window_start_ms = $last ORDER BY client" | sort >"$T/db_counts"

# After the load, five requests a second, as a quiet gateway gets them:
# each worker prunes every 10 s after a request, and its first prune after
# an interval of few commits truncates the WAL: within about 20 s. Up to
# 45 s.
wal_shrunk() {
	curl -s -o /dev/null --max-time 5 --interface 127.0.0.1 "$url"
	[ "$(size "$db-wal")" -le 4194304 ]
}
shrink_start=$(now_ms)
wait_until 45000 eval 'wal_shrunk || { sleep 0.2; false; }'
wal_after=$(size "$db-wal")
diag "sustained: the WAL was $wal_after bytes $((($(now_ms) - shrink_start) / 1000)) s after the load"
stop_pids "$sampler_pid"

diag "samples (the load ran until t_s = $load_end_s):"
while IFS= read -r line; do
	diag "$line"
done <"$T/samples.tsv"

between "$(loadgen_val requests)" $((SECONDS_RUN * 50)) 999999999 \
    "at least 50 requests/s answered over the run"
is "$(loadgen_val status_other)" 0 "every answer is a 200 or a 429"
is "$(loadgen_val ambiguous)" 0 "every answer's window is known"
between "$(loadgen_val status_429)" 1 999999999 "some clients went over their limit"

# The samples taken while the load ran (the first line is the header).
awk -v end="$load_end_s" 'NR > 1 && $1 <= end' "$T/samples.tsv" >"$T/during"
nsamples=$(wc -l <"$T/during")
between "$nsamples" 5 999999 "at least 5 samples taken during the load"

wal_max=$(awk 'BEGIN { m = 0 } $3 > m { m = $3 } END { print m }' "$T/during")
diag "sustained: WAL at most $wal_max bytes during the load, $wal_after after"
between "$wal_max" 0 $((WAL_MAX_MB * 1048576)) \
    "the WAL stayed within $WAL_MAX_MB MiB under continuous load"
between "$wal_after" 0 $((4 * 1048576)) \
    "the WAL is back within 4 MiB within 45 s of light traffic after the load"

db_max=$(awk 'BEGIN { m = 0 } NR > 1 && $2 > m { m = $2 } END { print m }' "$T/samples.tsv")
rows_max=$(awk 'BEGIN { m = 0 } NR > 1 && $5 ~ /^[0-9]+$/ && $5 > m { m = $5 } END { print m }' "$T/samples.tsv")
diag "sustained: database at most $db_max bytes, $rows_max rows"
between "$db_max" 1 $((CLIENTS * 400 + 1048576)) \
    "the database stayed within 400 bytes a client"
# (and the one client that sends after the load)
between "$rows_max" 1 $((CLIENTS + 1)) "never more state rows than clients"

# RSS: the end of the first third against the last sample of the load.
third=$((nsamples / 3))
[ "$third" -ge 1 ] || third=1
rss_third=$(awk -v n="$third" 'NR == n { print $6 }' "$T/during")
rss_last=$(awk 'END { print $6 }' "$T/during")
diag "sustained: the largest worker's RssAnon $rss_third kB after a third of the run, $rss_last kB at its end"
between "$rss_last" 1 $((rss_third + RSS_SLACK_MB * 1024)) \
    "no worker's own memory (RssAnon) grew by more than $RSS_SLACK_MB MiB after the first third"

# Exact counting, as in load.sh.
check_load_counts $LIMIT "$PROCS"

awk -v w="$last" '$1 == w && $4 > 0 { print $2 "|" $4 }' "$T/cells" | sort >"$T/load_counts"
mismatch=$(comm -3 "$T/load_counts" "$T/db_counts" | wc -l)
is "$mismatch" 0 "the database counts the $(wc -l <"$T/load_counts") clients of the last window exactly as admitted" \
    "$(comm -3 "$T/load_counts" "$T/db_counts" | head -5)"
is "$(sql "$db" 'PRAGMA integrity_check')" ok "PRAGMA integrity_check: ok"

term_and_wait 10000 "${RLGATE_PIDS[@]}" || fail "rlgate workers did not stop on SIGTERM"
done_testing
