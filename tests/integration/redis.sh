#!/usr/bin/env bash
# redis.sh: the Redis store against real servers. One redis-server started
# here (127.0.0.1, a free port, no persistence) and two gateways sharing
# it, each its own lighttpd + spawn-fcgi (2 processes x 2 threads) on its
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
#   3. Redis killed (SIGKILL, by pid) under load from 3 concurrent loops,
#      on_error = closed, then open: the answers become 503 with
#      Retry-After and a JSON body (closed) or uncounted 200s (open); each
#      worker thread logs one "store lost" line naming the server, not one
#      per request; redis-server started again on the same port: every
#      answer sent 5.5 s later (the longest backoff is 5 s) is counted
#      again, "store back" is logged, and counting is exact again from the
#      fresh, empty Redis.
#
# REDIS_SERVER and REDIS_CLI name the binaries (default: from PATH).
: "${RLGATE_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/integration/lib.sh
. "$RLGATE_SRCDIR/tests/integration/lib.sh" || { echo "Bail out! cannot read lib.sh"; exit 99; }
# shellcheck source=tests/integration/lib-gateways.sh
. "$RLGATE_SRCDIR/tests/integration/lib-gateways.sh" || { echo "Bail out! cannot read lib-gateways.sh"; exit 99; }

# a missing Redis is a broken set-up (scripts/deps.sh installs redis-server
# and redis-tools), as for the unit tests: never a silent skip
setup_test lighttpd spawn-fcgi curl timeout "$REDIS_SERVER" "$REDIS_CLI"

LIMIT=50
WINDOW=3600
NREQ=100                # per gateway: 2 x NREQ requests against LIMIT
NPROC=2
NTHREADS=2
BACKOFF_MAX_MS=5000     # store_redis.c's longest reconnect backoff

# ---- Redis -------------------------------------------------------------------

# (rcli, redis_up and start_test_redis: lib.sh. start_redis: the server
# started again on the same port, RPORT, after it was killed.)
start_redis() {
	start_test_redis "${RPORT:-}"
}

# redis_ms: Redis TIME in ms.
redis_ms() {
	local s us
	{ read -r s && read -r us; } < <(rcli TIME)
	if [[ ${s:-} =~ ^[0-9]+$ && ${us:-} =~ ^[0-9]+$ ]]; then
		echo $((s * 1000 + 10#$us / 1000))
	else
		echo 0
	fi
}

start_redis
diag "redis-server $("$REDIS_SERVER" --version | awk '{ print $3 }') on 127.0.0.1:$RPORT, pid $REDIS_PID"

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

# ---- two gateways --------------------------------------------------------------

gateways_init "$RPORT"

# gwconf NAME ON_ERROR CACHE: writes $T/NAME.conf, the Redis store on our
# server (clock = $CLOCK, default redis; rejection_cache = CACHE unless
# CACHE is "default"), the [policy] sections from stdin.
gwconf() {
	{
		cat <<EOF
; written by $(basename "$0")
[store]
backend = redis
url = redis://127.0.0.1:$RPORT
clock = ${CLOCK:-redis}
connect_timeout_ms = 500
timeout_ms = 500
on_error = $2
EOF
		[ "$3" = default ] || echo "rejection_cache = $3"
		echo
		cat
	} >"$T/$1.conf"
}


# check_hammer TAG WHAT: the answers of hammer TAG: exactly LIMIT admitted
# over both gateways, all the others 429 with a Retry-After and the seed's
# body, every 200 counted (RateLimit-Remaining present).
check_hammer() {
	local tag=$1 what=$2 bad nbody
	is "$HN1 $HN2" "$NREQ $NREQ" "$what: $NREQ answers from each gateway"
	is "$H200" "$LIMIT" "$what: exactly $LIMIT admitted over both gateways (gateway 1: $H200_1, gateway 2: $H200_2)"
	is "$H429|$HOTHER" "$((2 * NREQ - LIMIT))|" "$what: every other answer a 429 (no other status)"
	bad=$(cat "$T/$tag.g1" "$T/$tag.g2" | awk -F'|' -v w=$WINDOW '$1 == 429 &&
	    !($2 ~ /^[0-9]+$/ && $2 >= 1 && $2 <= w)' | head -3)
	is "$bad" "" "$what: every 429 has Retry-After in 1..$WINDOW"
	bad=$(cat "$T/$tag.g1" "$T/$tag.g2" | awk -F'|' '$1 == 200 && $3 !~ /^[0-9]+$/' | head -3)
	is "$bad" "" "$what: every 200 has RateLimit-Remaining (it was counted)"
	nbody=$(grep -lxF "$BODY_429" "$T/$tag.d"/g* 2>/dev/null | wc -l)
	is "$nbody" "$H429" "$what: every 429 has the seed's JSON body"
}

# key CLIENT POLICY: the client's state hash; its sliding log is KEY:log.
key() {
	echo "rlg:{$1}:$2"
}

# hour_of MS: the aligned 3600 s window MS falls in.
hour_of() {
	echo $(($1 / (WINDOW * 1000)))
}

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

# evalsha_now CLIENT: ARGV[1] of the first EVALSHA in the monitor's output
# that names CLIENT's keys: after "EVALSHA" "sha" "numkeys", numkeys keys.
evalsha_now() {
	grep -F '"EVALSHA"' "$T/monitor.out" | grep -F "{$1}" | head -1 |
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
is "$(evalsha_now "$CL")" "<>" 'clock = redis: EVALSHA passes ARGV[1] = "" (the script reads Redis TIME)'

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
argv1=$(evalsha_now "$CL")
argv1=${argv1#<}
argv1=${argv1%>}
between "$argv1" "$l0" "$l1" "clock = local: EVALSHA passes the gateway's own clock as ARGV[1] ($argv1)"
is "$(rcli HGET "$(key "$CL" csw)" window_start_ms)" $((argv1 - argv1 % 2000)) \
    "clock = local: window_start_ms follows that time"

# ============================================================================
# 3. Redis killed under load, and back

# bg_load J MODE_N: until $T/bg.stop exists (60 s and 6000 requests at
# most), one request at a time, alternately to each gateway, each from the
# next of 250 clients 127.(10+J).MODE_N.X (so no client nears the limit);
# one line per answer in $T/bg.J:
#   SENT_MS GATEWAY STATUS|Retry-After|RateLimit-Remaining|Content-Type BODY
# BODY: ok (success JSON), e503 (the 503 JSON error), e429, or other.
bg_load() {
	local j=$1 m=$2 i g t r b deadline
	deadline=$(($(now_ms) + 60000))
	: >"$T/bg.$j"
	for ((i = 0; i < 6000; i++)); do
		[ -e "$T/bg.stop" ] && break
		t=$(now_ms)
		[ "$t" -ge "$deadline" ] && break
		g=$((i % 2 + 1))
		r=$(curl -sS --max-time 5 --interface "127.$((10 + j)).$m.$((i % 250 + 1))" \
		    -o "$T/bg.$j.body" \
		    -w '%{http_code}|%header{retry-after}|%header{ratelimit-remaining}|%{content_type}' \
		    "${URL[$g]}" 2>/dev/null) || r="000|||"
		b=
		read -r b <"$T/bg.$j.body" 2>/dev/null
		case $b in
		'{"status":"success","data":'*) b=ok ;;
		'{"error":{"code":503,'*) b=e503 ;;
		'{"error":{"code":429,'*) b=e429 ;;
		*) b=other ;;
		esac
		echo "$t $g $r $b" >>"$T/bg.$j"
	done
}

# bg_after MS: the answers of the loads to requests sent at or after MS;
# bg_between MS1 MS2: sent in [MS1, MS2).
bg_after() {
	cat "$T"/bg.[0-9] | awk -v t="$1" '$1 >= t'
}
bg_between() {
	cat "$T"/bg.[0-9] | awk -v a="$1" -v b="$2" '$1 >= a && $1 < b'
}

# bg_enough MS N: the loads got at least N answers from each gateway to
# requests sent at or after MS. Phases wait for a number of answers, not a
# time: a loaded machine may serve a few requests a second.
# shellcheck disable=SC2317  # called through wait_until
bg_enough() {
	bg_after "$1" | awk -v n="$2" '{ c[$2]++ } END { exit !(c[1] >= n && c[2] >= n) }'
}
# shellcheck disable=SC2317  # called through wait_until
bg_started() {
	[ "$(cat "$T"/bg.[0-9] 2>/dev/null | wc -l)" -ge 30 ]
}

# all_lost: each gateway has logged a "store lost" line per worker thread
# since OFF[g].
# shellcheck disable=SC2317  # called through wait_until
all_lost() {
	local g
	for g in 1 2; do
		[ "$(log_since "down-$mode-$g" "${OFF[$g]}" | grep -c 'store lost')" -ge $((NPROC * NTHREADS)) ] ||
			return 1
	done
}

# per_pid_max PATTERN FILE: the most lines matching PATTERN one process
# (rlgate[PID]: prefix) logged.
per_pid_max() {
	grep -E "$1" "$2" | sed -n 's/^[^ ]* rlgate\[\([0-9]*\)\].*/\1/p' | sort | uniq -c |
	    awk 'BEGIN { m = 0 } $1 > m { m = $1 } END { print m }'
}

mode_n=0
for mode in closed open; do
	mode_n=$((mode_n + 1))
	gwconf "down-$mode" "$mode" default <<EOF
[policy fw]
algorithm = fixed_window
limit = $LIMIT
window = $WINDOW
EOF
	use_gateways "down-$mode"
	# the 30 requests before the outage must count in one hour
	ensure_window_room $WINDOW 30
	# client A: 30 requests counted before the outage
	CL=127.0.2.$mode_n
	k=$(key "$CL" fw)
	codes=
	for i in $(seq 1 30); do
		req --interface "$CL" "${URL[$((i % 2 + 1))]}"
		codes="$codes$STATUS "
	done
	is "$(echo "$codes" | tr ' ' '\n' | grep -c '^200$')|$(rcli HGET "$k" count)" "30|30" \
	    "$mode: before the outage, 30 requests from $CL admitted over both gateways, Redis count 30"

	rm -f "$T/bg.stop" "$T"/bg.[0-9]
	bgp=()
	for j in 1 2 3; do
		bg_load $j $mode_n &
		bgp+=($!)
		track_pid "$!"
	done
	wait_until 30000 bg_started ||
		bail_out "$mode: the background load does not run"
	bad=$(cat "$T"/bg.[0-9] | awk '{ print $3, $4 }' | grep -cvE '^200\|\|[0-9]+\|application/json ok$')
	is "$bad" 0 "$mode, Redis up: every answer of the load so far is a counted 200"
	OFF[1]=$(log_size "down-$mode-1")
	OFF[2]=$(log_size "down-$mode-2")

	# --- Redis dies
	t_kill=$(now_ms)
	kill -KILL "$REDIS_PID"
	wait_until 5000 pid_gone "$REDIS_PID" || bail_out "redis-server (pid $REDIS_PID) survived SIGKILL"
	wait "$REDIS_PID" 2>/dev/null
	# load against a dead Redis: 20 answers from each gateway (1 s after
	# the kill: the requests in flight then may have been answered before)
	wait_until 60000 bg_enough $((t_kill + 1000)) 20 ||
		diag "$mode: fewer than 20 answers a gateway in 60 s with Redis down"
	# and until every worker thread has met the dead Redis (20 s at
	# most): a connection that sat idle through the outage fails its first
	# request after the restart (by design: the script may have run), which
	# the check of the answers after the restart below does not allow
	wait_until 20000 all_lost ||
		diag "$mode: not every worker thread saw the outage (see the 'store lost' lines)"
	for g in 1 2; do
		req --interface 127.0.2.9 "${URL[$g]}"
		if [ $mode = closed ]; then
			is "$STATUS" 503 "closed, Redis down: gateway $g answers 503"
			is "$(header Content-Type)" application/json "closed, Redis down: 503: Content-Type application/json"
			between "$(header Retry-After)" 1 60 "closed, Redis down: 503: Retry-After in 1..60"
			like "$BODY" "$(re_err 503)" "closed, Redis down: 503: JSON error body"
		else
			is "$STATUS" 200 "open, Redis down: gateway $g lets the request through (200)"
			like "$BODY" "$RE_BODY_200" "open, Redis down: the success JSON body"
		fi
		has_header RateLimit-Remaining
		ok $((! $?)) "$mode, Redis down: gateway $g: no RateLimit-Remaining (nothing counted)"
	done
	t_down_end=$(now_ms)
	# what the load got from 1 s after the kill until now
	bg_between $((t_kill + 1000)) "$t_down_end" >"$T/bg.down.$mode"
	n_down=$(wc -l <"$T/bg.down.$mode")
	if [ $mode = closed ]; then
		want='503\|[0-9]+\|\|application/json e503$'
		wdesc="503 with Retry-After, JSON body, no RateLimit-Remaining"
	else
		want='200\|\|\|application/json ok$'
		wdesc="an uncounted 200 (success body, no RateLimit-Remaining)"
	fi
	between "$n_down" 40 999999 "$mode, Redis down: the load sent $n_down requests between 1 s after the kill and now"
	bad=$(awk '{ print $3, $4 }' "$T/bg.down.$mode" | grep -cvE "^$want")
	is "$bad" 0 "$mode, Redis down: every one of them got $wdesc" \
	    "$(awk '{ print $3, $4 }' "$T/bg.down.$mode" | grep -vE "^$want" | sort | uniq -c | head -5)"

	# --- the log: one "store lost" line per worker thread, naming the server
	for g in 1 2; do
		log_since "down-$mode-$g" "${OFF[$g]}" >"$T/down-$mode-$g.outage"
		nlost=$(grep -c 'store lost' "$T/down-$mode-$g.outage")
		between "$nlost" 1 $((NPROC * NTHREADS)) \
		    "$mode: gateway $g logged $nlost 'store lost' lines (1 per worker thread at most, $NPROC x $NTHREADS)"
		between "$(per_pid_max 'store lost' "$T/down-$mode-$g.outage")" 1 $NTHREADS \
		    "$mode: gateway $g: no process logged more 'store lost' lines than it has threads ($NTHREADS)"
		is "$(grep 'store lost' "$T/down-$mode-$g.outage" | grep -vcF "127.0.0.1:$RPORT")" 0 \
		    "$mode: gateway $g: each names the server (127.0.0.1:$RPORT)"
		between "$(per_pid_max 'store error' "$T/down-$mode-$g.outage")" 1 $NTHREADS \
		    "$mode: gateway $g: the server's 'store error' line too: once per thread at most"
		# nothing else: a line per failed request would show here
		is "$(grep -cvE 'store (lost|error|still failing):' "$T/down-$mode-$g.outage")" 0 \
		    "$mode: gateway $g logged nothing else during the outage"
		nfail=$(awk -v g=$g '$2 == g' "$T/bg.down.$mode" | wc -l)
		nlines=$(wc -l <"$T/down-$mode-$g.outage")
		[ "$nlines" -lt "$nfail" ]
		ok $? "$mode: gateway $g logged $nlines lines for $nfail failed requests (not one per request)"
		diag "$mode: gateway $g log: $(head -2 "$T/down-$mode-$g.outage")"
	done

	# --- Redis comes back on the same port, empty
	start_redis
	t_up=$(now_ms)
	# every worker's backoff ends within BACKOFF_MAX_MS of its last failure
	# (before t_up): from then on (500 ms margin), 20 answers a gateway
	sleep_ms $((t_up + BACKOFF_MAX_MS + 500 - $(now_ms)))
	wait_until 60000 bg_enough $((t_up + BACKOFF_MAX_MS + 500)) 20 ||
		diag "$mode: fewer than 20 answers a gateway in 60 s after the restart"
	touch "$T/bg.stop"
	wait_until 15000 pids_gone "${bgp[@]}" || {
		diag "$mode: the background load did not stop"
		stop_pids "${bgp[@]}"
	}
	wait "${bgp[@]}" 2>/dev/null
	for g in 1 2; do
		first=$(bg_after "$t_up" | awk -v g=$g '$2 == g && $3 ~ /^(200|429)\|[^|]*\|[0-9]+\|/ { print $1 }' | sort -n | head -1)
		diag "$mode: gateway $g counted again $((${first:-0} - t_up)) ms after Redis answered again"
	done
	bg_after $((t_up + BACKOFF_MAX_MS + 500)) >"$T/bg.up.$mode"
	n_up=$(wc -l <"$T/bg.up.$mode")
	between "$n_up" 40 999999 "$mode, Redis back: the load sent $n_up requests from $((BACKOFF_MAX_MS + 500)) ms after the restart"
	bad=$(awk '{ print $3, $4 }' "$T/bg.up.$mode" | grep -cvE '^200\|\|[0-9]+\|application/json ok$')
	is "$bad" 0 "$mode, Redis back: every one of them counted again (200 with RateLimit-Remaining)" \
	    "$(awk '{ print $3, $4 }' "$T/bg.up.$mode" | grep -vE '^200\|\|[0-9]+\|application/json ok$' | sort | uniq -c | head -5)"
	for g in 1 2; do
		log_since "down-$mode-$g" "${OFF[$g]}" >"$T/down-$mode-$g.after"
		nback=$(grep -c 'store back' "$T/down-$mode-$g.after")
		between "$nback" 1 $((NPROC * NTHREADS)) "$mode: gateway $g logged $nback 'store back' lines"
		is "$(grep 'store back' "$T/down-$mode-$g.after" | grep -vcF "127.0.0.1:$RPORT")" 0 \
		    "$mode: gateway $g: 'store back' names the server"
	done

	# --- counting is exact again, from the fresh Redis: client A's 30 are
	# gone, so it gets a whole quota
	is "$(rcli EXISTS "$k")" 0 "$mode: the restarted Redis is empty of client A's state"
	for try in 1 2 3; do
		r0=$(redis_ms)
		hammer "$CL" "h-down-$mode" "$NREQ"
		r1=$(redis_ms)
		[ "$(hour_of "$r0")" = "$(hour_of "$r1")" ] && break
		CL=127.0.2.$((10 + 3 * mode_n + try))
		k=$(key "$CL" fw)
		diag "$mode: the run crossed an hour boundary (try $try); again from a fresh client, $CL"
	done
	check_hammer "h-down-$mode" "$mode, after the restart"
	is "$(rcli HGET "$k" count)" "$H200" "$mode, after the restart: Redis HGET $k count: $H200, as admitted"

	for g in 1 2; do
		rlgate_pids_alive "down-$mode-$g"
		ok $? "$mode: gateway $g's rlgate processes survived"
	done
done

stop_rlgate_fcgi "$CUR-1"
stop_rlgate_fcgi "$CUR-2"
done_testing
