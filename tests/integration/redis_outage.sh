#!/usr/bin/env bash
# redis_outage.sh: the Redis store losing its server, against real
# servers. One redis-server started here (127.0.0.1, a free port, no
# persistence) and two gateways sharing it (lib-redis.sh), each its own lighttpd + spawn-fcgi (2 processes x 2 threads) on its
# own port, both with [store] backend = redis on that server:
#
#   Redis killed (SIGKILL, by pid) under load from 3 concurrent loops,
#      on_error = closed, then open: the answers become 503 with
#      Retry-After and a JSON body (closed) or uncounted 200s (open); each
#      worker thread logs one "store lost" line naming the server, not one
#      per request; redis-server started again on the same port: every
#      answer sent 5.5 s later (the longest backoff is 5 s) is counted
#      again, "store back" is logged, and counting is exact again from the
#      fresh, empty Redis.
#   (redis.sh checks the counting and the clock on the same set-up.)
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

# ============================================================================
# Redis killed under load, and back

# The loads: lib.sh's bg_load, each to both gateways in turn (URL_N the
# gateway), from 250 clients 127.(10+J).MODE_N.X, for 60 s and 6000
# requests at most. Twice as many loads as a gateway has worker threads:
# the idle workers of a process wait in one epoll set, which wakes the
# last to wait first, so a thread serves only while every other of its
# process is busy, and each must meet the outage (all_lost).

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
	for j in $(seq 1 $((2 * NPROC * NTHREADS))); do
		bg_load $j 60 6000 250 "127.$((10 + j)).$mode_n" "${URL[1]}" \
		    "${URL[2]}" &
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
