#!/bin/bash
# tests/bench/park.sh: what smoothing (a token_bucket policy's delay)
# costs. rlgate behind lighttpd (a unix socket, spawn-fcgi -F 1, --threads
# BENCH_THREADS, default 4), a fresh rlgate and lighttpd per round:
#
#     bash tests/bench/park.sh [OUTFILE]
#
# Each round (BENCH_ROUNDS, default 3):
#   1. baseline: wrk -t BENCH_WRK_THREADS -c BENCH_CONNECTIONS for
#      BENCH_SECONDS on a policy that admits everything;
#   2. the cost of a held answer: 1,000 clients (key = query:c, 1 per 8 s,
#      burst 2) send a request each twice, under a policy with delay = 2
#      (the second answered at once) and under one with delay = 0 (the
#      second held about 8 s): rlgate's CPU per second request of each
#      (the time its threads ran, the park's included, from
#      /proc/PID/task/*/schedstat), and their ratio;
#   3. other clients while 1,000 are held: 1,000 more clients the same
#      way, and while their second requests are held, the wrk run of 1
#      again: its requests/s against the baseline's.
# Output (stdout and OUTFILE, default ./bench-park.md): each round's
# figures, then the medians with their spread (lowest and highest round).
# Ratios, never pass/fail. Progress on stderr; exit 1 on any error (every
# server stopped by pid).
: "${NOOP_BIN:=/bin/true}"
# shellcheck source=tests/bench/lib-bench.sh
. "$(dirname "$0")/lib-bench.sh" || exit 1

bench_defaults BENCH_ROUNDS=3 BENCH_THREADS=4 BENCH_HELD=1000
bench_outputs "${1:-bench-park.md}"
check_counts BENCH_ROUNDS BENCH_THREADS BENCH_SECONDS BENCH_WRK_THREADS \
    BENCH_CONNECTIONS BENCH_HELD
need_cmd spawn-fcgi wrk curl timeout
[ -x "$LIGHTTPD_BIN" ] || die "no lighttpd at $LIGHTTPD_BIN"
[ -x "$RLGATE_BIN" ] || die "no rlgate at $RLGATE_BIN"
{ : >"$OUT"; } 2>/dev/null || die "cannot write $OUT"
CLK_TCK=$(getconf CLK_TCK 2>/dev/null || echo 100)
bench_tmpdir

# launch_lighttpd_park PORT SOCKET KEEPCONN WHAT: launch_lighttpd with
# room for the held connections (each is two descriptors of lighttpd's).
launch_lighttpd_park() {
	write_lighttpd_conf "$RUN/lighttpd.conf" "$RUN" "$1" "$2"
	printf 'server.max-fds = 16384\nserver.max-connections = 8192\n' \
	    >>"$RUN/lighttpd.conf"
	"$LIGHTTPD_BIN" -tt -f "$RUN/lighttpd.conf" >"$RUN/server.out" 2>&1 ||
		die "$4: lighttpd rejects its config: $(head -3 "$RUN/server.out")"
	"$LIGHTTPD_BIN" -D -f "$RUN/lighttpd.conf" </dev/null >>"$RUN/server.out" 2>&1 &
}

# wave FROM TO CFG [ROUTE]: one request of each client FROM..TO (?c=N) to
# ROUTE (default park), in 4 curls of parallel transfers, in the
# background; their pids in WAVE_PIDS.
wave() {
	local q per=$((($2 - $1 + 4) / 4)) lo hi
	WAVE_PIDS=()
	for q in 0 1 2 3; do
		lo=$(($1 + q * per)); hi=$((lo + per - 1))
		[ "$hi" -gt "$2" ] && hi=$2
		[ "$lo" -gt "$hi" ] && continue
		for i in $(seq "$lo" "$hi"); do
			printf 'url = "http://127.0.0.1:%s/api/%s?c=%d"\noutput = /dev/null\n' "$port" "${4:-park}" "$i"
		done >"$3.$q"
		timeout -k 5 60 curl -sS -Z --parallel-immediate --parallel-max 300 \
		    -K "$3.$q" -w '%{http_code}\n' >"$3.$q.out" 2>/dev/null &
		WAVE_PIDS+=($!)
	done
}

# codes CFG CODE: how many answers of the wave written with CFG were CODE.
codes() { cat "$1".?.out | grep -c "^$2\$"; }

# cpu_ns: the nanoseconds rlgate's threads have run (all of them, by
# /proc/PID/task/*/schedstat: finer than the clock ticks of /proc/PID/stat).
cpu_ns() {
	cat "/proc/${BACKEND_PIDS[0]}"/task/*/schedstat 2>/dev/null |
	    awk '{ s += $1 } END { printf "%.0f\n", s }'
}

# second_cpu ROUTE FROM TO TAG: clients FROM..TO send one request each to
# ROUTE, then one more each; prints rlgate's CPU per second request (µs).
second_cpu() {
	local b0 b1
	wave "$2" "$3" "$RUN/$4.a" "$1"
	wait "${WAVE_PIDS[@]}"
	b0=$(cpu_ns)
	wave "$2" "$3" "$RUN/$4.b" "$1"
	wait "${WAVE_PIDS[@]}"
	b1=$(cpu_ns)
	[ "$(codes "$RUN/$4.b" 404)" -eq $(($3 - $2 + 1)) ] ||
		die "$4: the second requests' answers: $(cat "$RUN/$4".b.?.out | sort | uniq -c | tr '\n' ' ')"
	awk -v d="$((b1 - b0))" -v n="$(($3 - $2 + 1))" \
	    'BEGIN { printf "%.1f\n", d / 1000 / n }'
}

# held_now: rlgate's open descriptors.
held_now() { find "/proc/${BACKEND_PIDS[0]}/fd" -mindepth 1 2>/dev/null | wc -l; }

one_round() {
	local round=$1 what="round $1" t0 t1 n=$BENCH_HELD fds _
	RUN="$BT/$round"
	mkdir -p "$RUN"
	cat >"$RUN/rlgate.conf" <<EOF
[store]
path = $RUN/rlgate.db
[client]
key_secret = 00112233445566778899aabbccddeeff
[fastcgi]
max_parked = $((n + 100))
[policy default]
algorithm = fixed_window
limit = 1000000000
window = 60
[policy park]
algorithm = token_bucket
limit = 1
window = 8
burst = 2
delay = 0
key = query:c
new_keys_per_ip = 0
[policy direct]
algorithm = token_bucket
limit = 1
window = 8
burst = 2
delay = 2
key = query:c
new_keys_per_ip = 0
[route park]
path = /api/park
policies = park
[route direct]
path = /api/direct
policies = direct
EOF
	"$RLGATE_BIN" --config "$RUN/rlgate.conf" --check-config >/dev/null 2>&1 ||
		die "$what: rlgate refuses its config"
	spawn_backend "$what" "$RUN/rlgate.sock" 1 0600 \
	    "$RLGATE_BIN" --config "$RUN/rlgate.conf" --threads "$BENCH_THREADS"
	start_server lighttpd_park "$RUN/rlgate.sock" off "$what"
	check_answer "http://127.0.0.1:$port$URL_PATH" rlgate 200 "$what"

	note "$what: baseline, wrk ${BENCH_SECONDS}s"
	wrk_run "$what" "http://127.0.0.1:$port$URL_PATH"
	read_wrk "$what" 2xx
	BASE_RPS=$WRK_RPS

	note "$what: $n clients twice, the second answered at once, then held"
	AT_ONCE_US=$(second_cpu direct 1 "$n" direct)
	t0=$(now_ms)
	HELD_US=$(second_cpu park 1 "$n" held)
	t1=$(now_ms)
	note "$what: the held clients took $((t1 - t0)) ms"

	note "$what: $n more clients held, and wrk meanwhile"
	wave $((n + 1)) $((2 * n)) "$RUN/w3"
	wait "${WAVE_PIDS[@]}"
	wave $((n + 1)) $((2 * n)) "$RUN/w4"
	for _ in $(seq 1 200); do
		fds=$(held_now)
		[ "$fds" -ge "$n" ] && break
		sleep 0.02
	done
	[ "$fds" -ge "$n" ] || die "$what: rlgate holds only $fds descriptors"
	BENCH_WARMUP=1 wrk_run "$what" "http://127.0.0.1:$port$URL_PATH"
	HELD_AFTER=$(held_now)
	read_wrk "$what" 2xx
	HELD_RPS=$WRK_RPS
	wait "${WAVE_PIDS[@]}"
	[ "$(codes "$RUN/w4" 404)" -eq "$n" ] ||
		die "$what: the second held wave's answers: $(cat "$RUN"/w4.?.out | sort | uniq -c | tr '\n' ' ')"
	[ "$HELD_AFTER" -ge "$n" ] ||
		note "WARNING: $what: only $HELD_AFTER descriptors open at the end of the wrk run"
	stop_run
}

runs_begin
rows=""
rps_ratios=()
cpu_ratios=()
for round in $(seq 1 "$BENCH_ROUNDS"); do
	one_round "$round"
	r=$(awk -v a="$HELD_RPS" -v b="$BASE_RPS" 'BEGIN { printf "%.2f", a / b }')
	c=$(awk -v a="$HELD_US" -v b="$AT_ONCE_US" 'BEGIN { printf "%.2f", a / b }')
	rps_ratios+=("$r")
	cpu_ratios+=("$c")
	rows+="| $round | $BASE_RPS | $HELD_RPS | $r | $AT_ONCE_US | $HELD_US | $c |"$'\n'
	runs_row "$round" "$BASE_RPS" "$HELD_RPS" "$r" "$AT_ONCE_US" "$HELD_US" "$c"
done
runs_end
spread() { printf '%s\n' "$@" | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%s-%s", lo, hi }'; }
{
	echo "# What smoothing costs"
	echo
	echo "- $rlgate_version, $started; $elapsed_s s"
	machine_line
	echo "- $lighttpd_v, $wrk_v; spawn-fcgi -F 1, --threads $BENCH_THREADS; wrk -t$BENCH_WRK_THREADS -c$BENCH_CONNECTIONS -d${BENCH_SECONDS}s; $BENCH_HELD held answers"
	echo
	echo "| round | req/s, nothing held | req/s, $BENCH_HELD held | ratio | CPU µs, a second request at once | CPU µs, a second request held | ratio |"
	echo "|---|---|---|---|---|---|---|"
	printf '%s' "$rows"
	echo
	echo "Medians: other clients' requests/s while $BENCH_HELD are held, $(median "${rps_ratios[@]}")x of nothing held (rounds $(spread "${rps_ratios[@]}")); a held request's CPU, $(median "${cpu_ratios[@]}")x of one answered at once (rounds $(spread "${cpu_ratios[@]}"))."
} >"$BT/report.md"
publish "$BT/report.md" 1-7 round base_rps held_rps ratio at_once_us held_us cpu_ratio
