#!/usr/bin/env bash
# redis.sh: the Redis store against real servers. One redis-server started
# here (127.0.0.1, a free port, no persistence) and two gateways sharing
# it (lib-redis.sh), each its own lighttpd + spawn-fcgi (2 processes x 2 threads) on its
# own port, both with [store] backend = redis on that server:
#
#   1. exact counting across gateways: for each algorithm (fixed_window,
#      sliding_window, token_bucket with burst = limit, sliding_log), 50 per
#      3600 s, one client sends 100 requests to each gateway at once (curl
#      --parallel, 16 connections to each): exactly 50 admitted in total,
#      every other answer a 429 with Retry-After and the seed's body, and
#      the client's keys in Redis (HGET count, the GCRA tat, LLEN of the
#      log) count the same 50 and expire (PTTL); with the rejection cache
#      off, then on (the default), which must change nothing;
#   2. the clock: with clock = redis the gateway passes no time of its own
#      (MONITOR shows ARGV[1] = "") and the state stored (the sliding log's
#      entry, window_start_ms, tat_us) is the time Redis TIME gave around
#      the request; with clock = local it passes its own clock. Clocks of
#      two machines that disagree cannot be faked here: this checks the
#      wiring, the local clock only to within a second;
#   (redis_outage.sh kills Redis under load on the same set-up.)
#
# REDIS_SERVER and REDIS_CLI name the binaries (default: from PATH).
: "${RLGATE_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/integration/lib.sh
. "$RLGATE_SRCDIR/tests/integration/lib.sh" || { echo "Bail out! cannot read lib.sh"; exit 99; }
# shellcheck source=tests/integration/lib-gateways.sh
. "$RLGATE_SRCDIR/tests/integration/lib-gateways.sh" || { echo "Bail out! cannot read lib-gateways.sh"; exit 99; }
# shellcheck source=tests/integration/lib-redis.sh
. "$RLGATE_SRCDIR/tests/integration/lib-redis.sh" || { echo "Bail out! cannot read lib-redis.sh"; exit 99; }

redis_gateways

# ---- --check-config reaches the store ------------------------------------------

# chkconf NAME PORT: $T/NAME.conf, the Redis store at 127.0.0.1:PORT
chkconf() {
	printf '[store]\npath = %s\nbackend = redis\nurl = redis://127.0.0.1:%s\nconnect_timeout_ms = 500\n' \
	    "$T/$1.db" "$2" >"$T/$1.conf"
}
chkconf check-up "$RPORT"
out=$("$RLGATE_BIN" --check-config --config "$T/check-up.conf" 2>"$T/check-up.err")
is "$?|$(cat "$T/check-up.err")" "0|" "--check-config, Redis up: exit 0, nothing on stderr"
is "$(head -1 <<<"$out")" "redis: reachable at 127.0.0.1:$RPORT, script loaded" "... says it connected and loaded the script"
out=$("$RLGATE_BIN" --check-config --strict --config "$T/check-up.conf" 2>&1)
is "$?" 0 "--check-config --strict, Redis up: exit 0"
DEAD_PORT=$(free_port) || bail_out "no free port"
chkconf check-down "$DEAD_PORT"
out=$("$RLGATE_BIN" --check-config --config "$T/check-down.conf" 2>&1)
is "$?" 0 "--check-config, nothing listening: exit 0 (the config is valid; rlgate would start and retry)"
like "$out" "check-down\\.conf: warning: redis: not reachable at 127\\.0\\.0\\.1:$DEAD_PORT: .*(refused|connect)" \
    "... with a warning that says why"
out=$("$RLGATE_BIN" --check-config --strict --config "$T/check-down.conf" 2>&1)
is "$?" 69 "--check-config --strict, nothing listening: exit 69 (EX_UNAVAILABLE)"
like "$out" "check-down\\.conf: 1 problem \\(--strict: the store must answer\\), not starting" "... a problem, not starting"

# ============================================================================
# 1. exact counting across two gateways, every algorithm, cache off and on
ncl=0
for cache in 0 default; do
	if [ $cache = 0 ]; then cdesc="cache off"; else cdesc="cache on"; fi
	for alg in fixed_window sliding_window token_bucket sliding_log; do
		pol="${alg}_c$cache"
		extra=
		[ $alg = token_bucket ] && extra="burst = $LIMIT"
		gwconf "x-$pol" closed $cache <<EOF
[policy $pol]
algorithm = $alg
limit = $LIMIT
window = $WINDOW
$extra
EOF
		use_gateways "x-$pol"
		what="$alg, $cdesc"
		# a run that crosses an hour of Redis' clock (fixed and sliding
		# windows count by aligned hour) is repeated from a fresh client
		for try in 1 2 3; do
			ncl=$((ncl + 1))
			CL=127.0.1.$ncl
			r0=$(redis_ms)
			hammer "$CL" "h-$pol" "$NREQ"
			r1=$(redis_ms)
			[ "$(hour_of "$r0")" = "$(hour_of "$r1")" ] && break
			diag "$what: the run crossed an hour boundary (try $try); again with a fresh client"
		done
		diag "$what: $((2 * NREQ)) requests from $CL in $((r1 - r0)) ms (Redis clock)"
		check_hammer "h-$pol" "$what"
		k=$(key "$CL" "$pol")
		case $alg in
		fixed_window | sliding_window)
			is "$(rcli HGET "$k" count)|$(rcli HGET "$k" prev_count)" "$H200|0" \
			    "$what: Redis HGET $k count: $H200, as admitted"
			is "$(rcli HGET "$k" window_start_ms)" $(($(hour_of "$r0") * WINDOW * 1000)) \
			    "$what: window_start_ms is the hour of Redis' clock"
			;;
		token_bucket)
			# H200 admitted from a full bucket within one emission
			# interval T = 72 s: tat = first + H200 x T, so the
			# tokens still owed, rounded up, are H200
			tat=$(rcli HGET "$k" tat_us)
			t_us=$(((WINDOW * 1000000 + LIMIT - 1) / LIMIT))
			now_us=$(($(redis_ms) * 1000))
			if [[ $tat =~ ^[0-9]+$ ]]; then
				owed=$(((tat - now_us + t_us - 1) / t_us))
			else
				owed="tat_us '$tat'"
			fi
			is "$owed" "$H200" "$what: Redis HGET $k tat_us: $H200 emission intervals ahead, as admitted"
			;;
		sliding_log)
			is "$(rcli LLEN "$k:log")|$(rcli HGET "$k" count)" "$H200|$H200" \
			    "$what: Redis LLEN $k:log and HGET count: $H200, as admitted"
			ts=$(rcli LRANGE "$k:log" 0 -1 | tr '\n' ' ')
			sorted=$(rcli LRANGE "$k:log" 0 -1 | sort -n | tr '\n' ' ')
			is "$ts" "$sorted" "$what: the log is in ascending order"
			pttl=$(rcli PTTL "$k:log")
			between "$pttl" 1 $((WINDOW * 1000 + 1000)) "$what: the log expires (PTTL $pttl ms)"
			;;
		esac
		pttl=$(rcli PTTL "$k")
		between "$pttl" 1 $((2 * WINDOW * 1000 + 1000)) "$what: the state expires (PTTL $pttl ms)"
		# both gateways refuse the client now (from the store or its cache)
		for g in 1 2; do
			req --interface "$CL" "${URL[$g]}"
			is "$STATUS:$(header Retry-After | grep -c .)" "429:1" "$what: afterwards gateway $g answers 429 with Retry-After"
		done
	done
done
is "$(rcli DBSIZE)" "$(($(rcli --scan --pattern 'rlg:*' | wc -l)))" "every key in Redis is one of rlgate's (rlg:*)"

# ============================================================================
# 2. the clock

# monitor_start: MONITOR in the background into $T/monitor.out, until
# monitor_stop (bounded by timeout anyway).
monitor_start() {
	: >"$T/monitor.out"
	timeout 30 "$REDIS_CLI" -h 127.0.0.1 -p "$RPORT" MONITOR >"$T/monitor.out" 2>&1 &
	MON_PID=$!
	track_pid "$MON_PID"
	wait_until 5000 grep -q '^OK' "$T/monitor.out" ||
		bail_out "redis-cli MONITOR did not start: $(head -3 "$T/monitor.out")"
}
monitor_stop() {
	stop_pids "$MON_PID"
}

# call_now CLIENT: ARGV[1] of the first step (FCALL of the library's
# function, or EVALSHA of the script) in the monitor's output that names
# CLIENT's keys: after "FCALL" "name" "numkeys", numkeys keys.
call_now() {
	grep -E '"(FCALL|EVALSHA)"' "$T/monitor.out" | grep -F "{$1}" | head -1 |
	    awk -F'" "' '{ n = $3; print "<" $(4 + n) ">" }'
}

gwconf clock-redis closed default <<EOF
[policy csw]
algorithm = sliding_window
limit = 1000
window = 2

[policy ctb]
algorithm = token_bucket
limit = 1000
window = $WINDOW
burst = 1000

[policy csl]
algorithm = sliding_log
limit = 1000
window = $WINDOW
EOF
use_gateways clock-redis
CL=127.0.5.1
t_us=$(((WINDOW * 1000000 + 999) / 1000))
monitor_start
for g in 1 2; do
	r0=$(redis_ms)
	l0=$(now_ms)
	req --interface "$CL" "${URL[$g]}"
	r1=$(redis_ms)
	is "$STATUS" 200 "clock = redis: a request through gateway $g: 200"
	ts=$(rcli LRANGE "$(key "$CL" csl):log" -1 -1)
	between "$ts" "$r0" "$r1" "clock = redis, gateway $g: the sliding log's entry is the Redis TIME of the request ($r0 <= $ts <= $r1)"
	# (a sliding window's state lives 2 windows: it cannot expire meanwhile)
	ws=$(rcli HGET "$(key "$CL" csw)" window_start_ms)
	is "$ws" $((ts - ts % 2000)) "clock = redis, gateway $g: window_start_ms = that time's 2 s window"
	tat=$(rcli HGET "$(key "$CL" ctb)" tat_us)
	if [ $g = 1 ]; then
		want=$((ts * 1000 + t_us))
	else
		want=$((prev_tat > ts * 1000 ? prev_tat + t_us : ts * 1000 + t_us))
	fi
	is "$tat" "$want" "clock = redis, gateway $g: tat_us = that time + one emission interval"
	prev_tat=$tat
	d=$((ts - l0))
	between "${d#-}" 0 1000 "clock = redis, gateway $g: the local clock agrees with Redis to within a second (${d} ms)"
done
wait_until 5000 grep -qF "{$CL}" "$T/monitor.out"
monitor_stop
is "$(call_now "$CL")" "<>" 'clock = redis: the step passes ARGV[1] = "" (the script reads Redis TIME)'
like "$(grep -E '"(FCALL|EVALSHA)"' "$T/monitor.out" | grep -F "{$CL}" | head -1)" \
    '"FCALL" "rlg_step_[0-9a-f]{16}" "[0-9]+" ' \
    "Redis 7: the step is an FCALL of the library's function, not an EVALSHA"

CLOCK=local gwconf clock-local closed default <<EOF
[policy csw]
algorithm = sliding_window
limit = 1000
window = 2
EOF
use_gateways clock-local
CL=127.0.5.2
monitor_start
l0=$(now_ms)
req --interface "$CL" "${URL[1]}"
l1=$(now_ms)
is "$STATUS" 200 "clock = local: a request: 200"
wait_until 5000 grep -qF "{$CL}" "$T/monitor.out"
monitor_stop
argv1=$(call_now "$CL")
argv1=${argv1#<}
argv1=${argv1%>}
between "$argv1" "$l0" "$l1" "clock = local: the step passes the gateway's own clock as ARGV[1] ($argv1)"
is "$(rcli HGET "$(key "$CL" csw)" window_start_ms)" $((argv1 - argv1 % 2000)) \
    "clock = local: window_start_ms follows that time"

stop_rlgate_fcgi "$CUR-1"
stop_rlgate_fcgi "$CUR-2"
done_testing
