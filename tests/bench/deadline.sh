#!/bin/bash
# tests/bench/deadline.sh: what the read deadline ([fastcgi]
# read_timeout_ms, app/server.c) costs the hot path. Two rlgate builds
# side by side behind lighttpd (a unix socket, as www/ mounts it), one
# hot client admitted (fixed_window, 1000000000 per 60 s):
#
#     BASE_BIN=/path/to/old/rlgate bash tests/bench/deadline.sh [OUTFILE]
#
# BASE_BIN is the build to compare with (the code before the deadline:
# it is given a config without [fastcgi]); RLGATE_BIN the one with it.
# BENCH_ROUNDS rounds (default 3) of one run each, in the order base,
# deadline, base, deadline, ... (drift hits both alike); every run has a
# fresh rlgate (spawn-fcgi -F BENCH_PROCS --threads BENCH_THREADS, a
# fresh database) and a fresh lighttpd, one curl that checks the answer,
# a discarded warm-up of BENCH_WARMUP s, then
#     wrk -t BENCH_WRK_THREADS -c BENCH_CONNECTIONS -d BENCH_SECONDS
# bounded by timeout(1). Output (stdout and OUTFILE, default
# ./bench-deadline.md): each round's requests/s of both and rlgate's CPU
# per request (its processes' CPU over the run, which a busy machine
# hurts less), each with their ratio, then the median ratios with their
# spread (lowest and highest round). Ratios, never pass/fail. Progress on stderr; exit 1 on any error (every
# server stopped by pid).
: "${NOOP_BIN:=/bin/true}"
# shellcheck source=tests/bench/lib-bench.sh
. "$(dirname "$0")/lib-bench.sh" || exit 1

bench_defaults BENCH_ROUNDS=3 BENCH_PROCS=2 BENCH_THREADS=2
bench_outputs "${1:-bench-deadline.md}"
check_counts BENCH_ROUNDS BENCH_PROCS BENCH_THREADS BENCH_SECONDS \
    BENCH_WRK_THREADS BENCH_CONNECTIONS
need_cmd spawn-fcgi wrk curl timeout
[ -x "$LIGHTTPD_BIN" ] || die "no lighttpd at $LIGHTTPD_BIN"
[ -x "${BASE_BIN:-}" ] || die "set BASE_BIN to the rlgate to compare with"
[ -x "$RLGATE_BIN" ] || die "no rlgate at $RLGATE_BIN"
{ : >"$OUT"; } 2>/dev/null || die "cannot write $OUT"
CLK_TCK=$(getconf CLK_TCK 2>/dev/null || echo 100)
bench_tmpdir

# one_run WHICH BIN ROUND: a fresh rlgate and lighttpd, the run; sets RPS.
one_run() {
	local which=$1 bin=$2 round=$3 what
	what="$which round $round"
	RUN="$BT/$which-$round"
	mkdir -p "$RUN"
	cat >"$RUN/rlgate.conf" <<EOF
[store]
path = $RUN/rlgate.db
[policy default]
algorithm = fixed_window
limit = 1000000000
window = 60
key = ip
EOF
	[ "$which" = deadline ] &&
		printf '[fastcgi]\nread_timeout_ms = 5000\n' >>"$RUN/rlgate.conf"
	"$bin" --config "$RUN/rlgate.conf" --check-config >/dev/null 2>&1 ||
		die "$what: $bin refuses its config"
	spawn_backend "$what" "$RUN/rlgate.sock" "$BENCH_PROCS" 0600 \
	    "$bin" --config "$RUN/rlgate.conf" --threads "$BENCH_THREADS"
	start_server lighttpd "$RUN/rlgate.sock" off "$what"
	check_answer "http://127.0.0.1:$port$URL_PATH" rlgate 200 "$what"
	note "$what: wrk ${BENCH_SECONDS}s"
	wrk_run "$what" "http://127.0.0.1:$port$URL_PATH"
	read_wrk "$what" 2xx
	RPS=$WRK_RPS
	# rlgate's CPU per request, in µs: less hurt by a busy machine
	CPU_US=$(awk -v c="$CPU_BACKEND" -v r="$RPS" \
	    'BEGIN { printf "%.1f", c * 10000 / r }')
	stop_run
}

runs_begin
ratios=()
cpus=()
rows=""
for round in $(seq 1 "$BENCH_ROUNDS"); do
	one_run base "$BASE_BIN" "$round"
	base=$RPS
	base_cpu=$CPU_US
	one_run deadline "$RLGATE_BIN" "$round"
	r=$(awk -v a="$RPS" -v b="$base" 'BEGIN { printf "%.3f", a / b }')
	c=$(awk -v a="$CPU_US" -v b="$base_cpu" 'BEGIN { printf "%.3f", a / b }')
	ratios+=("$r")
	cpus+=("$c")
	rows+="| $round | $base | $RPS | $r | $base_cpu | $CPU_US | $c |"$'\n'
done
runs_end
# spread NAME VALUE...: "median (rounds from LOWEST to HIGHEST)"
spread() {
	printf '%s %s (rounds from %s to %s)\n' "$1" "$(median "${@:2}")" \
	    "$(printf '%s\n' "${@:2}" | sort -g | head -1)" \
	    "$(printf '%s\n' "${@:2}" | sort -g | tail -1)"
}
{
	echo "# The read deadline's cost: rlgate behind lighttpd"
	echo
	echo "spawn-fcgi -F $BENCH_PROCS --threads $BENCH_THREADS, unix socket, one hot client admitted;"
	echo "wrk -t$BENCH_WRK_THREADS -c$BENCH_CONNECTIONS ${BENCH_SECONDS}s after ${BENCH_WARMUP}s of warm-up;"
	echo "$cpu_model; $lighttpd_v; $wrk_v; load $load_start -> $load_end; $started, ${elapsed_s}s."
	echo
	echo "| round | base req/s | deadline req/s | ratio | base µs CPU/req | deadline µs CPU/req | ratio |"
	echo "|---|---|---|---|---|---|---|"
	printf '%s' "$rows"
	echo
	spread "requests/s, deadline / base: median" "${ratios[@]}"
	spread "rlgate CPU per request, deadline / base: median" "${cpus[@]}"
} | tee "$OUT"
