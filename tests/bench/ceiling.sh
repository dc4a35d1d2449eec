#!/bin/bash
# tests/bench/ceiling.sh: the ceiling matrix of issue 14. rlgate behind
# lighttpd against, in the same run, the no-op FastCGI responder (the
# ceiling, tests/bench/noop) and the naive one (tests/bench/naive: one
# autocommit SQLite UPSERT per request, the 60-line limiter anyone would
# write), for every deployment of a matrix:
#
#     bash tests/bench/ceiling.sh [OUTFILE]     (default ./bench-ceiling.md)
#
#   spawn-fcgi -F P (BENCH_PROCS_LIST) x --threads T (BENCH_THREADS_LIST),
#   the same P and T for all three backends, x the client mix
#   (BENCH_CLIENTS_LIST): 1 is one hot client (rlgate key = ip, every
#   request from 127.0.0.1), 10000 is 10,000 clients (wrk's Lua script
#   sets X-API-Key to one of 10,000 values, a new one each request, in
#   turn; rlgate key = header:X-API-Key, naive keys by that header too;
#   the ceiling gets the same requests).
#
# For each deployment, BENCH_PAIRS rounds of runs, each round in the order
#   ceiling, naive, then per rlgate variant: admitted, rejected
# (A B C D A B C D: drift hits all alike). admitted: a limit never reached
# (fixed_window, 1000000000 per 60 s); rejected: 1 per 3600 s, used up by
# the check before the warm-up, so every measured answer is a 429 (hot
# client only; with 10,000 clients each would pay its first admission).
# Every run has a fresh backend (and a fresh database for naive and
# rlgate, in the temporary directory) and a fresh lighttpd on a free port
# of 127.0.0.1, one curl that checks the answer is the one intended, a
# discarded warm-up of BENCH_WARMUP s, then
#     wrk -t BENCH_WRK_THREADS -c BENCH_CONNECTIONS -d BENCH_SECONDS --latency
# bounded by timeout(1). Figures are ratios, never pass/fail: each round
# gives rlgate/ceiling, rlgate/naive, ... of requests/s (and of p99); the
# tables show the median over the rounds.
#
# rlgate variants (BENCH_RLGATE_VARIANTS, default "each"): "each" runs
# rlgate's config as it is today; any other word W adds "commit = W" to
# its [store] (so "each behind" measures [store] commit = behind beside
# today's path, a column set per variant). BENCH_STORE_EXTRA adds lines
# (newline-separated) to [store] for every variant. Before any run each
# variant's configs go through rlgate --check-config: a variant rlgate
# refuses (exit 78: a key it does not know yet) is skipped, with a note
# in the tables, and the rest runs.
#
# Output: the tables (markdown) on stdout and in OUTFILE; every run in
# OUTFILE with .md replaced by (or followed by) .tsv:
#     procs threads clients kind variant round reqs_per_s p50_ms p99_ms
#     requests non_2xx socket_errors server_cpu backend_cpu wrk_cpu
# (kind: ceiling, naive, admitted, rejected; variant "-" for the first
# two; *_cpu: % of one core during the measured run). Progress on stderr.
# Exit 0 with the tables, 1 on any error (every server is stopped by pid).
#
# Environment:
#   RLGATE_SRCDIR      source tree (default: two levels above this script)
#   RLGATE_BUILDDIR    build tree (default: RLGATE_SRCDIR)
#   RLGATE_BIN         rlgate (default: RLGATE_BUILDDIR/app/rlgate)
#   NOOP_BIN           noop (default: RLGATE_BUILDDIR/tests/bench/noop)
#   NAIVE_BIN          naive (default: RLGATE_BUILDDIR/tests/bench/naive)
#   BENCH_SECONDS      measured seconds per run (default 5)
#   BENCH_WARMUP       warm-up seconds per run, discarded (default 1)
#   BENCH_PAIRS        rounds per deployment (default 2)
#   BENCH_PROCS_LIST   spawn-fcgi -F values (default "1 2 4")
#   BENCH_THREADS_LIST --threads values (default "1 4")
#   BENCH_CLIENTS_LIST client mixes, 1 and/or 10000 (default "1 10000")
#   BENCH_RLGATE_VARIANTS  rlgate variants (default "each"; see above)
#   BENCH_STORE_EXTRA  extra [store] lines for rlgate (default none)
#   BENCH_WRK_THREADS  wrk -t (default 2)
#   BENCH_CONNECTIONS  wrk -c (default 16)
#   BENCH_KEEP_TMP     1 keeps the temporary directory and prints its name
#   LIGHTTPD_BIN       lighttpd (default: the one in PATH)

set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BENCH_PROG=ceiling.sh
# shellcheck source=tests/bench/lib-bench.sh
. "$here/lib-bench.sh"

: "${RLGATE_SRCDIR:=$(cd "$here/../.." && pwd)}"
: "${RLGATE_BUILDDIR:=$RLGATE_SRCDIR}"
: "${RLGATE_BIN:=$RLGATE_BUILDDIR/app/rlgate}"
: "${NOOP_BIN:=$RLGATE_BUILDDIR/tests/bench/noop}"
: "${NAIVE_BIN:=$RLGATE_BUILDDIR/tests/bench/naive}"
: "${BENCH_SECONDS:=5}"
: "${BENCH_WARMUP:=1}"
: "${BENCH_PAIRS:=2}"
: "${BENCH_PROCS_LIST:=1 2 4}"
: "${BENCH_THREADS_LIST:=1 4}"
: "${BENCH_CLIENTS_LIST:=1 10000}"
: "${BENCH_RLGATE_VARIANTS:=each}"
: "${BENCH_STORE_EXTRA:=}"
: "${BENCH_WRK_THREADS:=2}"
: "${BENCH_CONNECTIONS:=16}"
LIGHTTPD_BIN=${LIGHTTPD_BIN:-$(command -v lighttpd 2>/dev/null || echo /usr/sbin/lighttpd)}
URL_PATH=/api/v1/resources
NKEYS=10000
KEY_SECRET=ceiling-bench-key-secret-0123456789

OUT=${1:-./bench-ceiling.md}
case $OUT in
*.md) TSV=${OUT%.md}.tsv ;;
*) TSV=$OUT.tsv ;;
esac

# ---- checks ----------------------------------------------------------------

for v in BENCH_SECONDS BENCH_WARMUP BENCH_PAIRS BENCH_WRK_THREADS \
    BENCH_CONNECTIONS; do
	[[ ${!v} =~ ^[1-9][0-9]{0,3}$ ]] ||
		die "$v must be an integer from 1 to 9999 (got \"${!v}\")"
done
[ "$BENCH_CONNECTIONS" -ge "$BENCH_WRK_THREADS" ] ||
	die "BENCH_CONNECTIONS ($BENCH_CONNECTIONS) must be at least BENCH_WRK_THREADS ($BENCH_WRK_THREADS)"
read -r -a PROCS <<<"$BENCH_PROCS_LIST"
read -r -a THREADS <<<"$BENCH_THREADS_LIST"
read -r -a CLIENTS <<<"$BENCH_CLIENTS_LIST"
read -r -a VARIANTS <<<"$BENCH_RLGATE_VARIANTS"
[ ${#PROCS[@]} -gt 0 ] || die "BENCH_PROCS_LIST is empty"
[ ${#THREADS[@]} -gt 0 ] || die "BENCH_THREADS_LIST is empty"
[ ${#CLIENTS[@]} -gt 0 ] || die "BENCH_CLIENTS_LIST is empty"
[ ${#VARIANTS[@]} -gt 0 ] || die "BENCH_RLGATE_VARIANTS is empty"
for p in "${PROCS[@]}"; do
	[[ $p =~ ^[1-9][0-9]?$ ]] || die "BENCH_PROCS_LIST: \"$p\" is not an integer from 1 to 99"
done
for t in "${THREADS[@]}"; do
	[[ $t =~ ^[1-9][0-9]?$ ]] || die "BENCH_THREADS_LIST: \"$t\" is not an integer from 1 to 99"
done
for c in "${CLIENTS[@]}"; do
	[ "$c" = 1 ] || [ "$c" = "$NKEYS" ] ||
		die "BENCH_CLIENTS_LIST: \"$c\" is neither 1 nor $NKEYS"
done
for v in "${VARIANTS[@]}"; do
	[[ $v =~ ^[a-z][a-z0-9_]{0,31}$ ]] ||
		die "BENCH_RLGATE_VARIANTS: \"$v\" is not a word of a-z 0-9 _"
done

need_cmd wrk curl spawn-fcgi awk sort timeout
[ -x "$LIGHTTPD_BIN" ] || die "lighttpd not found (LIGHTTPD_BIN=$LIGHTTPD_BIN)"
[ -x "$RLGATE_BIN" ] || die "rlgate not found or not executable: $RLGATE_BIN (set RLGATE_BIN or RLGATE_BUILDDIR)"
[ -x "$NOOP_BIN" ] || die "noop not found or not executable: $NOOP_BIN (make tests/bench/noop, or set NOOP_BIN)"
[ -x "$NAIVE_BIN" ] || die "naive not found or not executable: $NAIVE_BIN (make tests/bench/naive, or set NAIVE_BIN)"
{ : >"$OUT"; } 2>/dev/null || die "cannot write $OUT"
{ : >"$TSV"; } 2>/dev/null || die "cannot write $TSV"

CLK_TCK=$(getconf CLK_TCK 2>/dev/null || echo 100)
bench_tmpdir

# The 10,000 clients: each wrk thread walks the keys in turn from its own
# starting point, a new X-API-Key per request.
cat >"$BT/clients.lua" <<EOF
-- written by ceiling.sh: X-API-Key cycles through $NKEYS values
local nkeys = $NKEYS
local threads = 0
local n = 0
function setup(thread)
	thread:set("id", threads)
	threads = threads + 1
end
function init(args)
	n = (id or 0) * 7919 % nkeys
end
function request()
	n = (n + 1) % nkeys
	return wrk.format(nil, nil, { ["X-API-Key"] = string.format("client-%05d", n) })
end
EOF

# ---- configs -----------------------------------------------------------------

# write_rlgate_conf FILE DB VARIANT KIND(admitted|rejected) CLIENTS
write_rlgate_conf() {
	local limit=1000000000 window=60
	[ "$4" = rejected ] && limit=1 window=3600
	{
		echo "; written by ceiling.sh (variant $3)"
		echo "[store]"
		echo "path = $2"
		[ "$3" = each ] || echo "commit = $3"
		[ -n "$BENCH_STORE_EXTRA" ] && printf '%s\n' "$BENCH_STORE_EXTRA"
		echo
		echo "[headers]"
		echo "style = draft03"
		if [ "$5" != 1 ]; then
			echo
			echo "[client]"
			echo "key_secret = $KEY_SECRET"
		fi
		echo
		echo "[policy default]"
		echo "algorithm = fixed_window"
		echo "limit = $limit"
		echo "window = $window"
		if [ "$5" = 1 ]; then
			echo "key = ip"
		else
			echo "key = header:X-API-Key"
			echo "new_keys_per_ip = 0"
		fi
	} >"$1"
}

# write_lighttpd_conf FILE DIR PORT SOCKET: as e2e.sh's (lighttpd 1.4
# defaults, no access log, the mount of www/lighttpd/rlgate.conf).
write_lighttpd_conf() {
	mkdir -p "$2/htdocs"
	cat >"$1" <<EOF
# written by ceiling.sh
server.bind          = "127.0.0.1"
server.port          = $3
server.document-root = "$2/htdocs"
server.pid-file      = "$2/lighttpd.pid"
server.errorlog      = "$2/lighttpd-error.log"
server.upload-dirs   = ( "$2" )
server.modules      += ( "mod_fastcgi" )
fastcgi.server       = (
    "/api/" => ((
        "socket"      => "$4",
        "check-local" => "disable",
    ))
)
EOF
}

# Which variants rlgate accepts: every config a variant would run, through
# --check-config. SKIP[variant] holds why one is skipped.
declare -A SKIP=()
for v in "${VARIANTS[@]}"; do
	for c in "${CLIENTS[@]}"; do
		for k in admitted rejected; do
			cf=$BT/check-$v-$c-$k.conf
			write_rlgate_conf "$cf" "$BT/check-$v.db" "$v" "$k" "$c"
			"$RLGATE_BIN" --config "$cf" --check-config >"$cf.out" 2>&1
			rc=$?
			if [ "$rc" -ne 0 ] && [ -z "${SKIP[$v]:-}" ]; then
				SKIP[$v]="rlgate --check-config exits $rc: $(grep -v '^rlgate: ' "$cf.out" | head -1 | sed "s|$BT/||")"
				note "variant $v skipped: ${SKIP[$v]}"
			fi
		done
	done
	rm -f "$BT/check-$v.db"*
done
RUN_VARIANTS=()
for v in "${VARIANTS[@]}"; do
	[ -n "${SKIP[$v]:-}" ] || RUN_VARIANTS+=("$v")
done

# ---- one run -----------------------------------------------------------------

# check_answer URL BACKEND(ceiling|naive|rlgate) EXPECT CLIENTS WHAT: one
# curl; dies unless the status is EXPECT and the answer comes from the
# intended backend.
check_answer() {
	local url=$1 backend=$2 want=$3 what=$5 got hdr="$RUN/check.headers"
	local -a h=()
	[ "$4" != 1 ] && h=(-H "X-API-Key: client-check")
	got=$(curl -sS --max-time 5 "${h[@]}" -D "$hdr" -o "$RUN/check.body" \
	    -w '%{http_code}' "$url" 2>"$RUN/check.err") ||
		die "$what: curl $url failed: $(cat "$RUN/check.err")"
	[ "$got" = "$want" ] ||
		die "$what: expected HTTP $want from $url, got $got: $(head -c 300 "$RUN/check.body"); backend log: $(tail -n 2 "$RUN/backend.log" 2>/dev/null)"
	if [ "$backend" = rlgate ]; then
		grep -qi '^RateLimit-Limit:' "$hdr" ||
			die "$what: the $got from $url has no RateLimit-Limit header: is it rlgate?"
	else
		grep -qi '^X-Noop-Limit-00:' "$hdr" ||
			die "$what: the answer from $url has no X-Noop-Limit-00 header: is it $backend?"
	fi
}

# stop_run: stops the web server and the backend of the current run.
stop_run() {
	local pids=()
	[ -n "${SERVER_PID:-}" ] && pids+=("$SERVER_PID")
	[ ${#BACKEND_PIDS[@]} -gt 0 ] && pids+=("${BACKEND_PIDS[@]}")
	STOP_GRACE_MS=3000 stop_pids "${pids[@]}"
	untrack_pid "${pids[@]}"
	SERVER_PID=''
	BACKEND_PIDS=()
}

# start_lighttpd SOCKET WHAT: on a free port of 127.0.0.1, in the
# background; sets SERVER_PID and port; a port taken before the bind is
# retried with another one, up to 3 times.
start_lighttpd() {
	local sock=$1 what=$2 try
	for try in 1 2 3; do
		port=$(free_port) || die "no free port on 127.0.0.1"
		write_lighttpd_conf "$RUN/lighttpd.conf" "$RUN" "$port" "$sock"
		"$LIGHTTPD_BIN" -tt -f "$RUN/lighttpd.conf" >"$RUN/server.out" 2>&1 ||
			die "$what: lighttpd rejects its config: $(head -3 "$RUN/server.out")"
		"$LIGHTTPD_BIN" -D -f "$RUN/lighttpd.conf" </dev/null >>"$RUN/server.out" 2>&1 &
		SERVER_PID=$!
		track_pid "$SERVER_PID"
		wait_for_port "$port" 10 "$SERVER_PID" && return 0
		STOP_GRACE_MS=2000 stop_pids "$SERVER_PID"
		untrack_pid "$SERVER_PID"
		SERVER_PID=''
		grep -qs 'in use' "$RUN/server.out" "$RUN"/*error.log || break
		note "$what: port $port was taken before lighttpd could bind it (try $try); another one"
		rm -f "$RUN"/*error.log
	done
	die "$what: lighttpd did not listen on 127.0.0.1:$port: $(tail -3 "$RUN/server.out"; tail -3 "$RUN"/*error.log 2>/dev/null)"
}

NRUN=0
SERVER_PID=
BACKEND_PIDS=()

# run_one PROCS THREADS CLIENTS KIND VARIANT ROUND: one measured run;
# appends its row to $BT/runs.tsv (the columns of the .tsv above).
run_one() {
	local procs=$1 threads=$2 clients=$3 kind=$4 variant=$5 round=$6
	local backend sock url what p rc t0 t1 cpu_s0 cpu_s1 cpu_b0 cpu_b1
	local cpu_w0 cpu_w1 wall_ms
	local -a wrk_args=()
	NRUN=$((NRUN + 1))
	RUN=$BT/run$NRUN
	mkdir -p "$RUN" || die "mkdir $RUN failed"
	what="-F $procs --threads $threads, $clients client(s), $kind${variant:+ ($variant)}, round $round"
	sock=$RUN/fcgi.sock
	case $kind in
	ceiling) backend=ceiling; set -- "$NOOP_BIN" --threads "$threads" ;;
	naive) backend=naive; set -- "$NAIVE_BIN" --db "$RUN/naive.db" --threads "$threads" ;;
	*)
		backend=rlgate
		write_rlgate_conf "$RUN/rlgate.conf" "$RUN/rlgate.db" "$variant" "$kind" "$clients"
		set -- "$RLGATE_BIN" --config "$RUN/rlgate.conf" --threads "$threads"
		;;
	esac
	# spawn-fcgi points the workers' stderr at /dev/null: a /bin/sh
	# wrapper keeps it and execs the backend (same pid). The pids it wrote
	# are tracked before its status is looked at.
	# shellcheck disable=SC2016
	spawn-fcgi -s "$sock" -M 0600 -F "$procs" -P "$RUN/backend.pid" \
	    -- /bin/sh -c 'log=$1; shift; exec "$@" 2>>"$log"' backend-log \
	    "$RUN/backend.log" "$@" </dev/null >"$RUN/spawn.log" 2>&1
	rc=$?
	BACKEND_PIDS=()
	if [ -r "$RUN/backend.pid" ]; then
		while read -r p || [ -n "$p" ]; do
			[[ $p =~ ^[0-9]+$ ]] || continue
			BACKEND_PIDS+=("$p")
			track_pid "$p"
		done <"$RUN/backend.pid"
	fi
	[ "$rc" -eq 0 ] || die "$what: spawn-fcgi failed: $(tail -3 "$RUN/spawn.log"); backend log: $(tail -3 "$RUN/backend.log" 2>/dev/null)"
	[ ${#BACKEND_PIDS[@]} -eq "$procs" ] ||
		die "$what: spawn-fcgi -F $procs wrote ${#BACKEND_PIDS[@]} pids"
	[ -S "$sock" ] || die "$what: no socket at $sock"

	start_lighttpd "$sock" "$what"
	for p in "${BACKEND_PIDS[@]}"; do
		pid_alive "$p" || die "$what: backend pid $p exited at start: $(tail -3 "$RUN/backend.log")"
	done

	url=http://127.0.0.1:$port$URL_PATH
	if [ "$kind" = rejected ]; then
		check_answer "$url" rlgate 200 "$clients" "$what (first request, using the quota up)"
		check_answer "$url" rlgate 429 "$clients" "$what"
	else
		check_answer "$url" "$backend" 200 "$clients" "$what"
	fi

	[ "$clients" != 1 ] && wrk_args=(-s "$BT/clients.lua")
	timeout -k 5 $((BENCH_WARMUP + 30)) wrk -t"$BENCH_WRK_THREADS" \
	    -c"$BENCH_CONNECTIONS" -d"${BENCH_WARMUP}s" "${wrk_args[@]}" \
	    "$url" >"$RUN/warmup.out" 2>&1 ||
		die "$what: the warm-up wrk failed: $(tail -3 "$RUN/warmup.out")"

	cpu_s0=$(cpu_ticks "$SERVER_PID")
	cpu_b0=$(cpu_ticks "${BACKEND_PIDS[@]}")
	cpu_w0=$(children_ticks)
	t0=$(now_ms)
	timeout -k 5 $((BENCH_SECONDS + 30)) wrk -t"$BENCH_WRK_THREADS" \
	    -c"$BENCH_CONNECTIONS" -d"${BENCH_SECONDS}s" --latency \
	    "${wrk_args[@]}" "$url" >"$RUN/wrk.out" 2>&1 ||
		die "$what: wrk failed: $(tail -3 "$RUN/wrk.out")"
	t1=$(now_ms)
	cpu_s1=$(cpu_ticks "$SERVER_PID")
	cpu_b1=$(cpu_ticks "${BACKEND_PIDS[@]}")
	cpu_w1=$(children_ticks)
	for p in "${BACKEND_PIDS[@]}"; do
		pid_alive "$p" || die "$what: backend pid $p died during the run: $(tail -3 "$RUN/backend.log")"
	done
	stop_run

	parse_wrk "$RUN/wrk.out" ||
		die "$what: cannot read wrk's output: $(cat "$RUN/wrk.out")"
	wall_ms=$((t1 - t0))
	[ "$wall_ms" -gt 0 ] || wall_ms=1
	pct() { awk -v a="$1" -v b="$2" -v hz="$CLK_TCK" -v ms="$wall_ms" \
	    'BEGIN { printf "%.0f", (b - a) / hz / (ms / 1000) * 100 }'; }
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
	    "$procs" "$threads" "$clients" "$kind" "${variant:--}" "$round" \
	    "$WRK_RPS" "$WRK_P50_MS" "$WRK_P99_MS" "$WRK_REQUESTS" \
	    "$WRK_NON2XX" "$WRK_SOCKERR" "$(pct "$cpu_s0" "$cpu_s1")" \
	    "$(pct "$cpu_b0" "$cpu_b1")" "$(pct "$cpu_w0" "$cpu_w1")" \
	    >>"$BT/runs.tsv"

	if [ "$kind" = rejected ]; then
		[ "$WRK_NON2XX" -eq "$WRK_REQUESTS" ] ||
			note "WARNING: $what: $((WRK_REQUESTS - WRK_NON2XX)) of $WRK_REQUESTS answers were not 429"
	elif [ "$WRK_NON2XX" -ne 0 ]; then
		note "WARNING: $what: $WRK_NON2XX of $WRK_REQUESTS answers were not 2xx"
	fi
	[ "$WRK_SOCKERR" -eq 0 ] || note "WARNING: $what: $WRK_SOCKERR socket errors"
	note "$what: $WRK_RPS req/s, p99 $WRK_P99_MS ms"
	# the databases go (but with BENCH_KEEP_TMP=1): 4 runs of 10,000
	# clients are not many megabytes, 84 may be
	[ "${BENCH_KEEP_TMP:-0}" = 1 ] || rm -f "$RUN"/*.db "$RUN"/*.db-wal "$RUN"/*.db-shm
}

# ---- the runs ----------------------------------------------------------------

# kinds CLIENTS: the runs of one round, in order.
kinds() {
	local v
	echo "ceiling -"
	echo "naive -"
	for v in "${RUN_VARIANTS[@]}"; do
		echo "admitted $v"
		[ "$1" = 1 ] && echo "rejected $v"
	done
}

total=0
for c in "${CLIENTS[@]}"; do
	total=$((total + $(kinds "$c" | wc -l) * ${#PROCS[@]} * ${#THREADS[@]} * BENCH_PAIRS))
done
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
started=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
t_start=$(now_ms)
note "$total runs of ${BENCH_SECONDS} s (+ ${BENCH_WARMUP} s warm-up): about $(((total * (BENCH_SECONDS + BENCH_WARMUP + 1) + 59) / 60)) minutes; load average $load_start"
: >"$BT/runs.tsv"
for p in "${PROCS[@]}"; do
	for t in "${THREADS[@]}"; do
		for c in "${CLIENTS[@]}"; do
			for round in $(seq 1 "$BENCH_PAIRS"); do
				while read -r k v; do
					[ "$v" = - ] && v=
					run_one "$p" "$t" "$c" "$k" "$v" "$round"
				done < <(kinds "$c")
			done
		done
	done
done
load_end=$(cut -d' ' -f1-3 /proc/loadavg)
elapsed_s=$((($(now_ms) - t_start) / 1000))

# ---- the report -----------------------------------------------------------------

# ratios P T C KIND_A VAR_A KIND_B VAR_B FIELD: per round, A's FIELD / B's
# (7 req/s, 9 p99), one per line.
ratios() {
	awk -F'\t' -v p="$1" -v t="$2" -v c="$3" -v ka="$4" -v va="$5" \
	    -v kb="$6" -v vb="$7" -v f="$8" '
		$1 == p && $2 == t && $3 == c && $4 == ka && $5 == va { a[$6] = $f }
		$1 == p && $2 == t && $3 == c && $4 == kb && $5 == vb { b[$6] = $f }
		END { for (r in a) if (r in b && b[r] > 0) printf "%.6f\n", a[r] / b[r] }' \
	    "$BT/runs.tsv"
}
# values P T C KIND VAR FIELD: that field of every round.
values() {
	awk -F'\t' -v p="$1" -v t="$2" -v c="$3" -v k="$4" -v v="$5" -v f="$6" \
	    '$1 == p && $2 == t && $3 == c && $4 == k && $5 == v { print $f }' \
	    "$BT/runs.tsv"
}
# med FORMAT NUMBER...: the median, formatted; "-" for none.
med() {
	local fmt=$1 m
	shift
	[ $# -gt 0 ] || { echo -; return; }
	m=$(median "$@") || { echo -; return; }
	awk -v v="$m" -v f="$fmt" 'BEGIN { printf f, v }'
}
clients_label() {
	if [ "$1" = 1 ]; then echo "1 (hot)"; else echo "10,000"; fi
}

rlgate_version=$("$RLGATE_BIN" --version 2>/dev/null | head -1)
cpu_model=$(awk -F': *' '$1 ~ /^model name/ { print $2; exit }' /proc/cpuinfo)
lighttpd_v=$("$LIGHTTPD_BIN" -v 2>&1 | head -1)
wrk_v=$(wrk -v 2>&1 | head -1 | awk '{ print $1, $2 }')

R=$BT/report.md
{
	echo "# The ceiling matrix: rlgate against the no-op ceiling and the naive UPSERT"
	echo
	echo "Medians over $BENCH_PAIRS rounds (ceiling, naive, rlgate admitted, rlgate"
	echo "rejected, ...); each ratio is the median of the per-round ratios of"
	echo "requests/s (the last column: of p99 latency, lower is better)."
	for v in "${VARIANTS[@]}"; do
		echo
		extra=
		[ -n "$BENCH_STORE_EXTRA" ] &&
			extra=", plus in [store] (BENCH_STORE_EXTRA): \`$(printf '%s' "$BENCH_STORE_EXTRA" | tr '\n' ';')\`"
		if [ "$v" = each ]; then
			desc="its config as it is today (one commit per decision)$extra"
		else
			desc="\`commit = $v\` in [store]$extra"
		fi
		if [ -n "${SKIP[$v]:-}" ]; then
			echo "rlgate variant **$v**, $desc: **skipped**, ${SKIP[$v]}"
		else
			echo "rlgate variant **$v**: $desc."
		fi
	done
	echo
	hdr="| deployment | clients | ceiling req/s | naive/ceiling"
	sep="|---|---|---|---"
	for v in "${VARIANTS[@]}"; do
		pre=
		{ [ "${#VARIANTS[@]}" -gt 1 ] || [ "$v" != each ]; } && pre="$v: "
		hdr="$hdr | ${pre}rlgate/ceiling | ${pre}rlgate/naive | ${pre}rejected/ceiling | ${pre}p99 rlgate / p99 ceiling"
		sep="$sep|---|---|---|---"
	done
	echo "$hdr |"
	echo "$sep|"
	for p in "${PROCS[@]}"; do
		for t in "${THREADS[@]}"; do
			for c in "${CLIENTS[@]}"; do
				# shellcheck disable=SC2046
				row="| -F $p --threads $t | $(clients_label "$c") | $(med %.0f $(values "$p" "$t" "$c" ceiling - 7)) | $(med %.2f $(ratios "$p" "$t" "$c" naive - ceiling - 7))"
				for v in "${VARIANTS[@]}"; do
					if [ -n "${SKIP[$v]:-}" ]; then
						row="$row | skipped | skipped | skipped | skipped"
						continue
					fi
					rej=-
					# shellcheck disable=SC2046
					[ "$c" = 1 ] && rej=$(med %.2f $(ratios "$p" "$t" "$c" rejected "$v" ceiling - 7))
					# shellcheck disable=SC2046
					row="$row | $(med %.2f $(ratios "$p" "$t" "$c" admitted "$v" ceiling - 7)) | $(med %.2f $(ratios "$p" "$t" "$c" admitted "$v" naive - 7)) | $rej | $(med %.2f $(ratios "$p" "$t" "$c" admitted "$v" ceiling - 9))"
				done
				echo "$row |"
			done
		done
	done
	echo
	echo "## Medians: requests/s and p99 ms"
	echo
	hdr="| deployment | clients | ceiling | naive"
	sep="|---|---|---|---"
	for v in "${RUN_VARIANTS[@]}"; do
		hdr="$hdr | rlgate $v admitted | rlgate $v rejected"
		sep="$sep|---|---"
	done
	echo "$hdr |"
	echo "$sep|"
	for p in "${PROCS[@]}"; do
		for t in "${THREADS[@]}"; do
			for c in "${CLIENTS[@]}"; do
				cell() {   # cell KIND VAR: "req/s, p99 ms"
					local r
					# shellcheck disable=SC2046
					r=$(med %.0f $(values "$p" "$t" "$c" "$1" "$2" 7))
					[ "$r" = - ] && { echo -; return; }
					# shellcheck disable=SC2046
					echo "$r, $(med %.2f $(values "$p" "$t" "$c" "$1" "$2" 9)) ms"
				}
				row="| -F $p --threads $t | $(clients_label "$c") | $(cell ceiling -) | $(cell naive -)"
				for v in "${RUN_VARIANTS[@]}"; do
					row="$row | $(cell admitted "$v") | $(cell rejected "$v")"
				done
				echo "$row |"
			done
		done
	done
	echo
	echo "## Machine and parameters"
	echo
	echo "- machine: $(nproc) CPUs, $cpu_model; load average $load_start at the start, $load_end at the end"
	echo "- software: $lighttpd_v; $wrk_v; $rlgate_version"
	echo "- started $started; $total runs in $((elapsed_s / 60)) min $((elapsed_s % 60)) s; $BENCH_PAIRS rounds per deployment, ${BENCH_SECONDS} s measured after ${BENCH_WARMUP} s of warm-up per run"
	echo "- wrk -t$BENCH_WRK_THREADS -c$BENCH_CONNECTIONS -d${BENCH_SECONDS}s --latency http://127.0.0.1:PORT$URL_PATH; 10,000 clients: a Lua request() that sets X-API-Key to the next of $NKEYS values (for every backend)"
	echo "- backends: spawn-fcgi -F P of noop, naive or rlgate --threads T, a fresh process set and database (in $(dirname "$BT")) per run; lighttpd: one process, mod_fastcgi to the unix socket, no access log"
	echo "- rlgate: [headers] style = draft03, [log] level = warn, [policy default] fixed_window, admitted 1000000000 per 60 s, rejected 1 per 3600 s (used up before the warm-up); hot client key = ip; 10,000 clients key = header:X-API-Key, new_keys_per_ip = 0, a [client] key_secret"
	echo "- naive: WAL, synchronous = NORMAL, busy_timeout 2000 ms, one autocommit UPSERT per request keyed by X-API-Key, else REMOTE_ADDR"
	echo "- rlgate $RLGATE_BIN; noop $NOOP_BIN; naive $NAIVE_BIN"
} >"$R"

cp "$R" "$OUT" || die "cannot write $OUT"
{
	printf '# procs\tthreads\tclients\tkind\tvariant\tround\treqs_per_s\tp50_ms\tp99_ms\trequests\tnon_2xx\tsocket_errors\tserver_cpu\tbackend_cpu\twrk_cpu\n'
	cat "$BT/runs.tsv"
} >"$TSV" || die "cannot write $TSV"
cat "$R"
note "$total runs in ${elapsed_s} s; wrote $OUT and $TSV"
