#!/usr/bin/env bash
# bench_smoke.sh: keeps the benchmarks (tests/bench/e2e.sh and
# tests/bench/bench_decide) from rotting.
#
# e2e.sh runs for one second per run, one pair, on three scenarios that
# cover both web servers, both answers and both stores
# (fixed_window_rejected behind lighttpd, nginx_fixed_window_admitted
# behind nginx, fixed_window_admitted_redis: rlgate on a redis-server that
# e2e.sh starts); then this checks what it wrote: the same markdown on
# stdout and in OUTFILE, a summary table per server with one row per
# scenario, numbers in every cell and positive rates, ratios and
# latencies; the per-run table (all 429 when rejected, all 2xx otherwise;
# the redis-server's CPU for the Redis run); the memory table; the machine
# line; the TSV (one row per run, 7 columns); no server left running (nor
# the redis-server); an unknown scenario refused.
#
# bench_decide runs one cell (fixed_window, 1 thread, 1,000 keys) for 0.2
# s on the tmpfs SQLite store and on its own redis-server, side by side:
# exit 0, the rates and the p50/p99 latencies in the markdown and the TSV,
# its redis-server gone; and without redis-server in PATH it refuses with
# a message. About 15 s in all. It measures nothing worth keeping.
#
# noop is $RLGATE_BUILDDIR/tests/bench/noop (make tests/bench/noop); if it
# is absent, this script builds it from tests/bench/noop.c with gcc and
# libfcgi into its temporary directory. bench_decide is
# $RLGATE_BUILDDIR/tests/bench/bench_decide (make check builds it).
# Skipped without wrk or nginx; redis-server and redis-cli are required
# (scripts/deps.sh installs them), as in redis.sh.
: "${RLGATE_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/integration/lib.sh
. "$RLGATE_SRCDIR/tests/integration/lib.sh" || { echo "Bail out! cannot read lib.sh"; exit 99; }

command -v wrk >/dev/null 2>&1 || skip_all "wrk is not installed"
NGINX_BIN=${NGINX_BIN:-$(command -v nginx 2>/dev/null || echo /usr/sbin/nginx)}
[ -x "$NGINX_BIN" ] || skip_all "nginx is not installed"
need_cmd lighttpd spawn-fcgi curl timeout redis-server redis-cli
[ -x "$RLGATE_BIN" ] || bail_out "no rlgate binary at $RLGATE_BIN"
E2E=$RLGATE_SRCDIR/tests/bench/e2e.sh
[ -r "$E2E" ] || bail_out "no $E2E"
make_tmpdir

NOOP_BIN=${NOOP_BIN:-$RLGATE_BUILDDIR/tests/bench/noop}
if [ ! -x "$NOOP_BIN" ]; then
	command -v gcc >/dev/null 2>&1 ||
		skip_all "no $NOOP_BIN and no gcc to build it"
	NOOP_BIN=$T/noop
	gcc -std=c11 -O2 -Wall -Wextra -pthread -o "$NOOP_BIN" \
	    "$RLGATE_SRCDIR/tests/bench/noop.c" -lfcgi >"$T/gcc.log" 2>&1 ||
		skip_all "cannot build noop (libfcgi-dev?): $(head -3 "$T/gcc.log")"
	diag "built $NOOP_BIN from tests/bench/noop.c"
fi

# e2e VAR=VALUE... -- OUTFILE: e2e.sh with a small, bounded set-up; its own
# temporary directories go under $T/tmp. Sets RC; stdout in $T/e2e.out,
# stderr in $T/e2e.err.
e2e() {
	split_envs "$@"
	shift "$ENVS_SHIFT"
	mkdir -p "$T/tmp"
	env TMPDIR="$T/tmp" RLGATE_BIN="$RLGATE_BIN" NOOP_BIN="$NOOP_BIN" \
	    NGINX_BIN="$NGINX_BIN" LIGHTTPD_BIN="$LIGHTTPD_BIN" \
	    BENCH_SECONDS=1 BENCH_WARMUP=1 BENCH_PAIRS=1 "${ENVS[@]}" \
	    timeout -k 5 150 bash "$E2E" "$@" </dev/null >"$T/e2e.out" 2>"$T/e2e.err"
	RC=$?
}

# table_after HEADING_RE FILE: the data rows of the first markdown table
# after the line matching HEADING_RE (header and |---| lines dropped).
table_after() {
	awk -v re="$1" '
		!seen && $0 ~ re { seen = 1; next }
		seen && /^\|/ { n++; if (n > 2) print; in_t = 1; next }
		seen && in_t { exit }' "$2"
}

# check_cells ROWS NCELLS NTEXT DESC: every row has NCELLS cells, and every
# cell after the first NTEXT is a non-negative number.
check_cells() {
	local bad
	bad=$(awk -F'|' -v n="$2" -v text="$3" '
		{
			if (NF - 2 != n) { print "cells: " $0; next }
			for (i = text + 2; i <= n + 1; i++) {
				v = $i; gsub(/^ +| +$/, "", v)
				if (v !~ /^[0-9]+(\.[0-9]+)?$/) { print "cell " i - 1 ": " $0; next }
			}
		}' <<<"$1")
	if [ -z "$bad" ] && [ -n "$1" ]; then
		pass "$4"
	else
		fail "$4" "${bad:-no rows}"
	fi
}

# positive ROWS CELL... DESC: those cells are > 0 in every row.
positive() {
	local rows=$1 desc=${*: -1} bad
	shift
	set -- "${@:1:$(($# - 1))}"
	bad=$(awk -F'|' -v cells="$*" '
		BEGIN { n = split(cells, c, " ") }
		{ for (i = 1; i <= n; i++) if ($(c[i] + 1) + 0 <= 0) { print "cell " c[i] ": " $0; next } }' <<<"$rows")
	if [ -z "$bad" ] && [ -n "$rows" ]; then
		pass "$desc"
	else
		fail "$desc" "${bad:-no rows}"
	fi
}

# ours_running: the pids of processes whose command line or working
# directory is under $T/tmp (redis-server renames itself and holds none of
# its arguments, but runs in its --dir).
ours_running() {
	local d p
	for d in /proc/[0-9]*; do
		p=${d#/proc/}
		[ "$p" = "$$" ] && continue
		if grep -q -s -a "$T/tm[p]/" "$d/cmdline" ||
		    [[ $(readlink "$d/cwd" 2>/dev/null) == "$T/tmp/"* ]]; then
			echo "$p"
		fi
	done | head -3
}

# cell ROWS SCENARIO N: cell N of the row whose second cell is SCENARIO.
cell() {
	awk -F'|' -v s="$2" -v n="$3" '
		{ v = $3; gsub(/^ +| +$/, "", v) }
		v == s { x = $(n + 1); gsub(/^ +| +$/, "", x); print x; exit }' <<<"$1"
}

OUT=$T/bench-e2e.md
SCEN="fixed_window_rejected nginx_fixed_window_admitted fixed_window_admitted_redis"
e2e BENCH_SCENARIOS="$SCEN" -- "$OUT"
is "$RC" 0 "e2e.sh on three scenarios exits 0"
[ "$RC" -eq 0 ] || diag "$(tail -5 "$T/e2e.err")"
[ -s "$OUT" ] || bail_out "e2e.sh wrote no $OUT: $(tail -5 "$T/e2e.err")"
if cmp -s "$OUT" "$T/e2e.out"; then
	pass "stdout and OUTFILE hold the same text"
else
	fail "stdout and OUTFILE hold the same text"
fi
unlike "$(cat "$T/e2e.err")" 'WARNING|error' "no warning or error on stderr"

# --- the summary tables, one per server
for server in lighttpd nginx; do
	rows=$(table_after "^## $server\$" "$OUT")
	n=1
	[ "$server" = lighttpd ] && n=2
	is "$(grep -c . <<<"$rows")" "$n" "$server: one summary row per scenario ($n)"
	check_cells "$rows" 8 1 "$server: 8 cells, numbers after the scenario"
	positive "$rows" 2 3 4 5 6 7 8 "$server: req/s, ratio and latencies > 0"
done
rows=$(table_after '^## lighttpd$' "$OUT")
like "$rows" '^\| fixed_window_rejected \|' "lighttpd row: fixed_window_rejected"
like "$(sed -n 2p <<<"$rows")" '^\| fixed_window_admitted_redis \|' "lighttpd row: fixed_window_admitted_redis"
rows=$(table_after '^## nginx$' "$OUT")
like "$rows" '^\| nginx_fixed_window_admitted \|' "nginx row: nginx_fixed_window_admitted"
ratio=$(awk -F'|' '{ gsub(/ /, "", $5); print $5 }' <<<"$rows")
like "$ratio" '^[0-9]+\.[0-9]{2}$' "the ratio has two decimals ($ratio)"

# --- every run: server | scenario | pair | kind | req/s | p50 | p99 |
# requests | non-2xx | socket errors | 3 x CPU % | redis CPU % | redis µs
# per request | ratio ("-" for the redis columns but in a Redis
# scenario's rlgate run, and for a noop's ratio)
runs=$(table_after '^## Every run$' "$OUT")
is "$(grep -c . <<<"$runs")" 6 "every run: 6 rows (3 scenarios x rlgate, noop)"
redis_run=$(grep '| fixed_window_admitted_redis | 1 | rlgate |' <<<"$runs")
check_cells "$redis_run" 16 4 "every run, the Redis rlgate run: numbers in every cell"
positive "$redis_run" 14 15 "every run: the redis-server's CPU % and µs per request > 0 in the Redis run"
check_cells "$(grep '| rlgate |' <<<"$runs" | grep -v '_redis |' |
    sed 's/| - | - | \([0-9.]*\) |$/| 0 | 0 | \1 |/')" 16 4 \
    "every run, rlgate with SQLite: numbers in every cell (no redis CPU)"
check_cells "$(grep '| noop |' <<<"$runs" | sed 's/| - | - | - |$/| 0 | 0 | 0 |/')" 16 4 \
    "every run, noop: numbers in every cell (no redis CPU, no ratio)"
positive "$runs" 5 6 7 8 "every run: req/s, p50, p99, requests > 0"
positive "$(grep '| rlgate |' <<<"$runs")" 16 "every run: rlgate's per-pair ratio > 0"
rej=$(grep '| fixed_window_rejected | 1 | rlgate |' <<<"$runs")
is "$(awk -F'|' '{ print $10 + 0 }' <<<"$rej")" "$(awk -F'|' '{ print $9 + 0 }' <<<"$rej")" \
    "rejected: every measured answer was a non-2xx (429)"
adm=$(grep -v '| fixed_window_rejected | 1 | rlgate |' <<<"$runs")
is "$(awk -F'|' '{ s += $10 } END { print s + 0 }' <<<"$adm")" 0 \
    "admitted and noop runs: no non-2xx answer"
is "$(awk -F'|' '{ s += $11 } END { print s + 0 }' <<<"$runs")" 0 "no socket errors"

# --- memory: server | scenario | rlgate RSS | noop RSS | db | wal
# (db and wal "-" with Redis)
mem=$(table_after '^## Memory and database$' "$OUT")
is "$(grep -c . <<<"$mem")" 3 "memory: one row per scenario"
bad=$(awk -F'|' '{
	redis = $3 ~ /_redis /
	for (i = 4; i <= 5; i++) { v = $i; gsub(/ /, "", v)
		if (v !~ /^[0-9]+(,[0-9]+)*$/) print "RSS " $0 }
	for (i = 6; i <= 7; i++) { v = $i; gsub(/ /, "", v)
		if (redis ? v != "-" : v !~ /^[0-9]+$/) print "size " $0 }
	v = $6; gsub(/ /, "", v); if (!redis && v + 0 <= 0) print "db " $0 }' <<<"$mem")
is "$bad" "" "memory: RSS per worker (2 each) and database sizes are numbers, db > 0 (Redis: -)"
like "$(cell "$mem" fixed_window_rejected 3)" '^[0-9]+, [0-9]+$' "memory: 2 rlgate workers (-F 2)"

# --- machine and parameters
mach=$(grep '^- machine:' "$OUT")
like "$mach" "^- machine: $(nproc) CPUs, " "the machine line names the CPU count"
like "$(grep '^- software:' "$OUT")" 'lighttpd/1\.4.*nginx.*wrk.*rlgate.*redis-server [0-9]' "the software line names every version"
like "$(grep '^- redis ' "$OUT")" 'backend = redis' "a line says how rlgate used Redis"
like "$(grep '^- wrk ' "$OUT")" '-t2 -c16 -d1s --latency' "the parameters: wrk -t2 -c16 -d1s"

# --- the TSV for gnuplot
TSV=$T/bench-e2e.tsv
[ -s "$TSV" ] || bail_out "no $TSV"
is "$(head -1 "$TSV")" "$(printf '# server\tscenario\tkind\tpair\treqs_per_s\tp50_ms\tp99_ms')" \
    "TSV: a commented header line"
bad=$(awk -F'\t' 'NR > 1 && (NF != 7 || $1 !~ /^(lighttpd|nginx)$/ ||
	$3 !~ /^(rlgate|noop)$/ || $4 !~ /^[0-9]+$/ || !($5 + 0 > 0) ||
	$6 !~ /^[0-9.]+$/ || !($6 + 0 > 0) || $7 !~ /^[0-9.]+$/ ||
	$7 + 0 < $6 + 0) { print NR ": " $0 }' "$TSV")
is "$bad" "" "TSV: 7 columns, known servers and kinds, positive numbers, p99 >= p50"
is "$(awk 'NR > 1' "$TSV" | grep -c .)" 6 "TSV: one row per run"

# --- nothing left behind
# (the pattern does not match itself, so grep does not find its own cmdline)
is "$(ours_running)" "" "no process of the benchmark left running (redis-server included)"
is "$(find "$T/tmp" -mindepth 1 -maxdepth 1 | head -3)" "" "its temporary directory is removed"

# --- a bad scenario name is refused before anything starts
e2e BENCH_SCENARIOS="fixed_window_admitted no_such_scenario" -- "$T/bad.md"
is "$RC" 1 "an unknown scenario: exit 1"
like "$(cat "$T/e2e.err")" 'unknown scenario "no_such_scenario"' "an unknown scenario is named"
e2e BENCH_SECONDS=0 -- "$T/bad.md"
is "$RC" 1 "BENCH_SECONDS=0: exit 1"

# --- bench_decide: SQLite (tmpfs) and Redis side by side, one cell
BD=${BENCH_DECIDE_BIN:-$RLGATE_BUILDDIR/tests/bench/bench_decide}
[ -x "$BD" ] || bail_out "no $BD (make check builds it; make tests/bench/bench_decide)"
(cd "$T" && exec timeout -k 5 120 "$BD" --seconds 0.2 \
    --only fixed_window,1,1000 --stores memory,redis --out "$T/decide.md" \
    --tsv "$T/decide.tsv" </dev/null >"$T/decide.out" 2>"$T/decide.err")
RC=$?
is "$RC" 0 "bench_decide on memory and redis exits 0"
[ "$RC" -eq 0 ] || diag "$(tail -5 "$T/decide.err")"
if cmp -s "$T/decide.md" "$T/decide.out"; then
	pass "bench_decide: stdout and --out hold the same text"
else
	fail "bench_decide: stdout and --out hold the same text"
fi
for store in memory redis; do
	rows=$(table_after "^## Admitted, $store store: decisions/s\$" "$T/decide.md")
	like "$(grep '^| fixed_window | 1 |' <<<"$rows")" '^\| fixed_window \| 1 \| - \| [1-9][0-9,]* \| - \| - \|$' \
	    "bench_decide: the $store store's table has the fixed_window 1-thread rate"
done
rows=$(table_after '^## Redis / SQLite \(memory store\)' "$T/decide.md")
like "$(grep '^| fixed_window | 1 |' <<<"$rows")" '^\| fixed_window \| 1 \| - \| [0-9]+\.[0-9]{2} \|' \
    "bench_decide: the Redis / SQLite ratio"
rows=$(table_after '^## Latency per decision' "$T/decide.md")
is "$(grep -c . <<<"$rows")" 1 "bench_decide: one latency row"
check_cells "${rows//| 1,000 |/| 1000 |}" 6 1 "bench_decide: latency: p50 and p99 of both stores are numbers"
positive "$rows" 3 4 5 6 "bench_decide: latencies > 0"
rows=$(table_after '^## redis-server CPU per decision' "$T/decide.md")
like "$(grep '^| fixed_window | 1 |' <<<"$rows")" '^\| fixed_window \| 1 \| - \| [0-9]+\.[0-9] \|' \
    "bench_decide: the redis-server's CPU per decision"
is "$(head -1 "$T/decide.tsv")" "$(printf '# store\talgorithm\tthreads\tkeys\tdecisions_per_s\tp50_us\tp99_us')" \
    "bench_decide TSV: a commented header line"
bad=$(awk -F'\t' 'NR > 1 && (NF != 7 || $2 != "fixed_window" || $3 != 1 ||
	$4 != 1000 || !($5 + 0 > 0) || !($6 + 0 > 0) || $7 + 0 < $6 + 0) {
	print NR ": " $0 }' "$T/decide.tsv")
is "$bad" "" "bench_decide TSV: rate, p50 and p99 (>= p50) of the cell"
is "$(awk -F'\t' 'NR > 1 { printf "%s ", $1 }' "$T/decide.tsv")" "memory redis " \
    "bench_decide TSV: one row per store"
rpid=$(sed -n 's/^bench_decide: redis-server pid \([0-9]*\) .*/\1/p' "$T/decide.err")
like "$rpid" '^[0-9]+$' "bench_decide names its redis-server's pid"
if [ -n "$rpid" ] && pid_alive "$rpid"; then
	fail "bench_decide stopped its redis-server (pid $rpid)"
else
	pass "bench_decide stopped its redis-server (pid $rpid)"
fi
(cd "$T" && exec timeout -k 5 30 env PATH=/nonexistent "$BD" --stores redis \
    --out "$T/nr.md" --tsv "$T/nr.tsv" </dev/null >/dev/null 2>"$T/nr.err")
RC=$?
is "$RC" 1 "bench_decide without redis-server in PATH: exit 1"
like "$(cat "$T/nr.err")" 'redis-server is not installed' "bench_decide says redis-server is missing"

done_testing
