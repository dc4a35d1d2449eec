#!/bin/bash
# tests/bench/ceiling.sh: the ceiling matrix. rlgate behind
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
# rlgate variants (BENCH_RLGATE_VARIANTS, default "behind"): a word W
# adds "commit = W" to its [store] ("behind each" measures the decision
# table beside one commit per decision, a column set per variant); the
# word "default" adds nothing (rlgate's default). BENCH_STORE_EXTRA adds lines
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
#   BENCH_RLGATE_VARIANTS  rlgate variants (default "behind"; see above)
#   BENCH_STORE_EXTRA  extra [store] lines for rlgate (default none)
#   BENCH_WRK_THREADS  wrk -t (default 2)
#   BENCH_CONNECTIONS  wrk -c (default 16)
#   BENCH_KEEP_TMP     1 keeps the temporary directory and prints its name
#   LIGHTTPD_BIN       lighttpd (default: the one in PATH)

BENCH_PROG=ceiling.sh
# lib-bench.sh: set -u, the defaults of RLGATE_*, NOOP_BIN, BENCH_SECONDS,
# BENCH_WARMUP, BENCH_WRK_THREADS, BENCH_CONNECTIONS, LIGHTTPD_BIN, URL_PATH
# shellcheck source=tests/bench/lib-bench.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib-bench.sh"

bench_defaults NAIVE_BIN="$RLGATE_BUILDDIR/tests/bench/naive" BENCH_PAIRS=2 \
    BENCH_PROCS_LIST="1 2 4" BENCH_THREADS_LIST="1 4" \
    BENCH_CLIENTS_LIST="1 10000" BENCH_RLGATE_VARIANTS=behind BENCH_STORE_EXTRA=
NKEYS=10000
KEY_SECRET=ceiling-bench-key-secret-0123456789

bench_outputs "${1:-./bench-ceiling.md}"

# ---- checks ----------------------------------------------------------------

check_counts BENCH_SECONDS BENCH_WARMUP BENCH_PAIRS BENCH_WRK_THREADS \
    BENCH_CONNECTIONS
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
[ -x "$NAIVE_BIN" ] || die "naive not found or not executable: $NAIVE_BIN (make tests/bench/naive, or set NAIVE_BIN)"
bench_begin

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
		[ "$3" = default ] || echo "commit = $3"
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

NRUN=0

# run_one PROCS THREADS CLIENTS KIND VARIANT ROUND: one measured run;
# appends its row to $BT/runs.tsv (the columns of the .tsv above).
run_one() {
	local procs=$1 threads=$2 clients=$3 kind=$4 variant=$5 round=$6
	local backend sock url what
	local -a wrk_args=() key=()
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
	spawn_backend "$what" "$sock" "$procs" 0600 "$@"
	start_server lighttpd "$sock" off "$what"
	backends_alive "$what" "exited at start"

	url=http://127.0.0.1:$port$URL_PATH
	[ "$clients" != 1 ] && key=(-H "X-API-Key: client-check")
	if [ "$kind" = rejected ]; then
		check_answer "$url" rlgate 200 "$what (first request, using the quota up)" "${key[@]}"
		check_answer "$url" rlgate 429 "$what" "${key[@]}"
	else
		check_answer "$url" "$backend" 200 "$what" "${key[@]}"
	fi

	[ "$clients" != 1 ] && wrk_args=(-s "$BT/clients.lua")
	wrk_run "$what" "$url" "${wrk_args[@]}"
	stop_run

	if [ "$kind" = rejected ]; then read_wrk "$what" 429; else read_wrk "$what" 2xx; fi
	runs_row "$procs" "$threads" "$clients" "$kind" "${variant:--}" "$round" \
	    "$WRK_RPS" "$WRK_P50_MS" "$WRK_P99_MS" "$WRK_REQUESTS" \
	    "$WRK_NON2XX" "$WRK_SOCKERR" "$CPU_SERVER" "$CPU_BACKEND" "$CPU_WRK"
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

# each_deployment FN: FN PROCS THREADS CLIENTS for every deployment of
# the matrix, in order.
each_deployment() {
	local p t c
	for p in "${PROCS[@]}"; do
		for t in "${THREADS[@]}"; do
			for c in "${CLIENTS[@]}"; do
				"$1" "$p" "$t" "$c"
			done
		done
	done
}

# deployment_runs PROCS THREADS CLIENTS: the BENCH_PAIRS rounds of one
# deployment.
deployment_runs() {
	local round k v
	for round in $(seq 1 "$BENCH_PAIRS"); do
		while read -r k v; do
			[ "$v" = - ] && v=
			run_one "$1" "$2" "$3" "$k" "$v" "$round"
		done < <(kinds "$3")
	done
}

total=0
for c in "${CLIENTS[@]}"; do
	total=$((total + $(kinds "$c" | wc -l) * ${#PROCS[@]} * ${#THREADS[@]} * BENCH_PAIRS))
done
runs_begin
note "$total runs of ${BENCH_SECONDS} s (+ ${BENCH_WARMUP} s warm-up): about $(((total * (BENCH_SECONDS + BENCH_WARMUP + 1) + 59) / 60)) minutes; load average $load_start"
each_deployment deployment_runs
runs_end

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
# table HEADER SEPARATOR ROW_FN: a markdown table, a row per deployment
# (ROW_FN PROCS THREADS CLIENTS prints it).
table() {
	echo "$1 |"
	echo "$2|"
	each_deployment "$3"
}
# ratio_row P T C: the first table's row.
ratio_row() {
	local p=$1 t=$2 c=$3 v rej row
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
}
# cell P T C KIND VAR: "req/s, p99 ms" of the medians' table.
cell() {
	local r
	# shellcheck disable=SC2046
	r=$(med %.0f $(values "$1" "$2" "$3" "$4" "$5" 7))
	[ "$r" = - ] && { echo -; return; }
	# shellcheck disable=SC2046
	echo "$r, $(med %.2f $(values "$1" "$2" "$3" "$4" "$5" 9)) ms"
}
# median_row P T C: the medians' table's row.
median_row() {
	local v row
	row="| -F $1 --threads $2 | $(clients_label "$3") | $(cell "$@" ceiling -) | $(cell "$@" naive -)"
	for v in "${RUN_VARIANTS[@]}"; do
		row="$row | $(cell "$@" admitted "$v") | $(cell "$@" rejected "$v")"
	done
	echo "$row |"
}

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
		if [ "$v" = default ]; then
			desc="no commit in [store] (rlgate's default)$extra"
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
		[ "${#VARIANTS[@]}" -gt 1 ] && pre="$v: "
		hdr="$hdr | ${pre}rlgate/ceiling | ${pre}rlgate/naive | ${pre}rejected/ceiling | ${pre}p99 rlgate / p99 ceiling"
		sep="$sep|---|---|---|---"
	done
	table "$hdr" "$sep" ratio_row
	echo
	echo "## Medians: requests/s and p99 ms"
	echo
	hdr="| deployment | clients | ceiling | naive"
	sep="|---|---|---|---"
	for v in "${RUN_VARIANTS[@]}"; do
		hdr="$hdr | rlgate $v admitted | rlgate $v rejected"
		sep="$sep|---|---"
	done
	table "$hdr" "$sep" median_row
	echo
	echo "## Machine and parameters"
	echo
	machine_line
	echo "- software: $lighttpd_v; $wrk_v; $rlgate_version"
	echo "- started $started; $total runs in $((elapsed_s / 60)) min $((elapsed_s % 60)) s; $BENCH_PAIRS rounds per deployment, ${BENCH_SECONDS} s measured after ${BENCH_WARMUP} s of warm-up per run"
	echo "- wrk -t$BENCH_WRK_THREADS -c$BENCH_CONNECTIONS -d${BENCH_SECONDS}s --latency http://127.0.0.1:PORT$URL_PATH; 10,000 clients: a Lua request() that sets X-API-Key to the next of $NKEYS values (for every backend)"
	echo "- backends: spawn-fcgi -F P of noop, naive or rlgate --threads T, a fresh process set and database (in $(dirname "$BT")) per run; lighttpd: one process, mod_fastcgi to the unix socket, no access log"
	echo "- rlgate: [headers] style = draft03, [log] level = warn, [policy default] fixed_window, admitted 1000000000 per 60 s, rejected 1 per 3600 s (used up before the warm-up); hot client key = ip; 10,000 clients key = header:X-API-Key, new_keys_per_ip = 0, a [client] key_secret"
	echo "- naive: WAL, synchronous = NORMAL, busy_timeout 2000 ms, one autocommit UPSERT per request keyed by X-API-Key, else REMOTE_ADDR"
	echo "- rlgate $RLGATE_BIN; noop $NOOP_BIN; naive $NAIVE_BIN"
} >"$R"

publish "$R" 1-15 procs threads clients kind variant round reqs_per_s \
    p50_ms p99_ms requests non_2xx socket_errors server_cpu backend_cpu wrk_cpu
note "$total runs in ${elapsed_s} s; wrote $OUT and $TSV"
