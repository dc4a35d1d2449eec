#!/usr/bin/env bash
# global.sh: the local+global mode ([store] backend = redis or
# redis_cluster with commit = behind and sync_ms) against real servers.
# One redis-server started here (127.0.0.1, a free port, no persistence),
# later a Redis Cluster of three masters (lib-cluster.sh); three gateways,
# each its own lighttpd (the demo's) and its own rlgate (spawn-fcgi, 2
# processes x 2 threads) on its own socket, each its own table file (its
# own [store] path); a fixed window of 50:
#
#   1. two gateways, then three, on one redis-server, 2 s windows, sync_ms
#      100: one client (127.0.0.1) sends to every gateway at once, one
#      request at a time on a kept connection to each, 10 ms apart (some
#      50 a second to each, the limit's rate twice over at each gateway
#      alone: slow enough that the bound, below, is under what the
#      gateways would admit with no sync at all), for three windows, each
#      request sent from 200 ms into its window to 200 ms before its end
#      (counted in the window it was sent in). In every window: the total
#      admitted over the gateways <= limit + the bound of rlgate.conf(5),
#      what the other gateways admit in 3.25 x sync_ms, computed from the
#      rates measured in that window (requests answered per second by each
#      gateway x 3.25 x sync_ms, rounded up, summed over every gateway but
#      the one with the least: whichever gateway admits last, the others
#      are those it may not have heard of), and >= limit (nothing
#      under-admitted); every answer a 200 or a 429. The figures are
#      printed per window, with the bound of 2 x sync_ms beside it;
#   2. one client (127.1.0.1) hammering one gateway (tests/loadgen, one
#      connection, thousands a second): exactly the limit admitted in
#      each of three whole windows;
#   4. reset: a client refused by gateway B (55 requests, 50 admitted,
#      the count in Redis); rlgate --config A.conf --reset CLIENT (A, the
#      other gateway): B admits it again within 1 s, and Redis counts that
#      one admission afresh;
#   5. a gateway whose rlgate (every process) is SIGKILLed with unpushed
#      units (sync_ms = 2000 for it; right after one of its pushes, seen
#      in Redis, 30 requests and the kill; Redis read before and after;
#      tried again with another client when its sync came first anyway):
#      started again on the same table file, Redis's count reaches the 30
#      it admitted;
#   3. Redis SIGKILLed: a client the gateway knew (10 admitted, pushed)
#      gets 40 more 200s and then 429s from the table, nothing else; a new
#      client gets 503 (on_error = closed); Redis started again on the
#      same port, empty: the 40 units admitted in the outage reach it
#      (exactly 40: none lost, none pushed twice), the delay printed; the
#      new client is admitted again;
#   6. as 1, two gateways, on a Redis Cluster of three masters.
# Tests 3 to 5 use a window of 3600 s (waiting for the next hour when less
# than 40 s are left in this one).
#
# Timing-sensitive (the loads share two cores): timing_sensitive.
# REDIS_SERVER and REDIS_CLI name the binaries (default: from PATH).
: "${RLGATE_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/integration/lib.sh
. "$RLGATE_SRCDIR/tests/integration/lib.sh" || { echo "Bail out! cannot read lib.sh"; exit 99; }
# shellcheck source=tests/integration/lib-cluster.sh
. "$RLGATE_SRCDIR/tests/integration/lib-cluster.sh" || { echo "Bail out! cannot read lib-cluster.sh"; exit 99; }

# a missing Redis is a broken set-up (scripts/deps.sh installs them)
setup_test lighttpd spawn-fcgi curl timeout "$REDIS_SERVER" "$REDIS_CLI"
need_loadgen
timing_sensitive

LIMIT=50
FAST_W=2               # the windows of tests 1, 2 and 6 (s)
LONG_W=3600            # the windows of tests 3 to 5 (s)
SYNC_MS=100
SLOW_SYNC_MS=2000      # the gateway SIGKILLed in test 5
GUARD_MS=200           # the loads send from GUARD_MS into a window to GUARD_MS before its end
NWIN=3                 # the windows of each load
PACE_MS=10             # the paced loads' pause between requests
BOUND_QUARTERS=13      # the bound of rlgate.conf(5): the others' answers in 3.25 x sync_ms
NPROC=2
NTHREADS=2
BACKOFF_MAX_MS=5000    # store_redis.c's longest reconnect backoff
HAMMER=127.0.0.1       # the paced client (bash's /dev/tcp): every gateway
ALONE=127.1.0.1        # loadgen's client: the first gateway only

# ---- the gateways ------------------------------------------------------------

start_test_redis
diag "redis-server $("$REDIS_SERVER" --version | awk '{ print $3 }') on 127.0.0.1:$RPORT, pid $REDIS_PID"

# Three gateways: $T/gwG (run directory: socket, lighttpd's logs, table
# files), lighttpd on GP[G], URL[G]; CURG[G], the name of the rlgate
# running there.
for g in 1 2 3; do
	mkdir -p "$T/gw$g"
	chmod 755 "$T/gw$g"
	GP[g]=$(free_port) || bail_out "no free port"
	write_lighttpd_demo_conf "$T/gw$g/lighttpd.conf" "${GP[g]}" "$T/gw$g"
	start_lighttpd "$T/gw$g/lighttpd.conf" "${GP[g]}"
	URL[g]="http://127.0.0.1:${GP[g]}/api/v1/resources"
	CURG[g]=
done

mkfifo "$T/pace.fifo" || bail_out "mkfifo failed"

BACKEND=redis
STORE_URL="redis://127.0.0.1:$RPORT"

# gw_conf NAME G WINDOW SYNC_MS: $T/NAME-G.conf, gateway G's config: the
# store BACKEND at STORE_URL, written behind every SYNC_MS from its table
# $T/gwG/NAME.db-table, and [policy fw], LIMIT per WINDOW s.
gw_conf() {
	cat >"$T/$1-$2.conf" <<EOF
; written by $(basename "$0")
[store]
backend = $BACKEND
url = $STORE_URL
commit = behind
sync_ms = $4
path = $T/gw$2/$1.db
max_clients = 10000
connect_timeout_ms = 500
timeout_ms = 500
on_error = closed

[policy fw]
algorithm = fixed_window
limit = $LIMIT
window = $3
EOF
}

# gw_start NAME G [nocheck]: stops the rlgate of gateway G, starts NAME
# ($T/NAME-G.conf; log $T/NAME-G.log) on its socket; unless nocheck, one
# request from 127.0.0.250 (no check looks at it) proves it answers.
gw_start() {
	local name=$1 g=$2
	[ -n "${CURG[g]}" ] && stop_rlgate_fcgi "${CURG[g]}"
	check_conf "$name-$g"
	start_rlgate_fcgi "$name-$g" "$T/gw$g/rlgate.sock" "$T/$name-$g.conf" "$NPROC" \
	    --threads "$NTHREADS"
	CURG[g]=$name-$g
	[ "${3:-}" = nocheck ] && return 0
	req --interface 127.0.0.250 "${URL[g]}"
	[ "$STATUS" = 200 ] ||
		bail_out "gateway $g ($name) does not answer: $STATUS $BODY $(tail -3 "$T/$name-$g.log")"
}

# key CLIENT: the state hash of CLIENT under [policy fw] (db/redis/step.lua).
key() {
	echo "rlg:{$1}:fw"
}

# count CLIENT: Redis's count of CLIENT (0 when it has no state).
count() {
	local c
	c=$(rcli HGET "$(key "$1")" count)
	echo "${c:-0}"
}

# shellcheck disable=SC2317  # called through wait_until
count_is() {
	[ "$(count "$1")" = "$2" ]
}

# burst CLIENT G N: N requests from CLIENT to gateway G, one after the
# other on one connection; prints their statuses, one a line.
burst() {
	curl -sS --max-time 30 --interface "$1" -o /dev/null -w '%{http_code}\n' \
	    "${URL[$2]}?n=[1-$3]" 2>>"$T/burst.err"
}

# runs STATUSES: the statuses (one a line) as runs, "200x40 429x20".
runs() {
	awk 'NR > 1 && $1 != s { printf "%s%sx%d", sep, s, n; sep = " "; n = 0 }
	    { s = $1; n++ } END { if (n) printf "%s%sx%d", sep, s, n }' <<<"$1"
}

# ---- the loads: tests 1, 2 and 6 ---------------------------------------------

# http_get FD PATH: one GET of PATH over the keep-alive HTTP/1.1
# connection on FD, bash alone (no process started: a curl a request
# would take the loads' time); ST, its status ("000": no whole answer:
# the caller opens a new connection), KEEP 0 when the server closes it.
http_get() {
	local line len=-1 n rq="GET $2 HTTP/1.1"$'\r\n'"Host: 127.0.0.1"$'\r\n\r\n'
	ST=000
	KEEP=1
	# one write: a request in pieces meets Nagle and the delayed ACK (40 ms)
	{ printf '%s' "$rq" >&"$1"; } 2>/dev/null || return 1
	read -r -t 5 -u "$1" _ ST _ || { ST=000; return 1; }
	for ((n = 0; n < 100; n++)); do
		read -r -t 5 -u "$1" line || { ST=000; return 1; }
		line=${line%$'\r'}
		[ -z "$line" ] && break
		case ${line,,} in
		content-length:*) len=${line#*:} len=${len// /} ;;
		connection:*close*) KEEP=0 ;;
		esac
	done
	# a header block without its end, or a body with no (sane) length:
	# nothing more to trust on this connection
	if [ "$n" -ge 100 ] || ! [[ $len =~ ^[0-9]{1,6}$ ]]; then
		ST=000
		return 1
	fi
	[ "$len" -eq 0 ] || read -r -N "$len" -t 5 -u "$1" _ || { ST=000; return 1; }
}

# paced OUT PORT FIRST: requests from 127.0.0.1 (HAMMER) to the gateway on
# PORT, one at a time on a kept connection, PACE_MS apart, in the NWIN
# windows of FAST_W s from window FIRST (its index) on, each sent from
# GUARD_MS into its window to GUARD_MS before its end (so that the window
# it was sent in is the one it was counted in); one line per answer in
# OUT: SENT_MS DONE_MS STATUS.
paced() {
	local out=$1 port=$2 w=$((FAST_W * 1000)) t d off i end fd='' nv
	end=$((($3 + NWIN) * w - GUARD_MS))
	: >"$out"
	# a read on a fifo no one writes: a pause without a process
	exec {nv}<>"$T/pace.fifo"
	sleep_ms $(($3 * w + GUARD_MS - $(now_ms)))
	for ((i = 0; i < 100000; i++)); do
		t=${EPOCHREALTIME/./}
		t=$((10#$t / 1000))
		[ "$t" -ge "$end" ] && break
		off=$((t % w))
		if [ "$off" -lt "$GUARD_MS" ] || [ "$off" -ge $((w - GUARD_MS)) ]; then
			sleep_ms $(((w - off + GUARD_MS) % w))
			continue
		fi
		[ -n "$fd" ] || { exec {fd}<>"/dev/tcp/127.0.0.1/$port"; } 2>/dev/null || fd=
		if [ -n "$fd" ] && http_get "$fd" /api/v1/resources && [ "$KEEP" = 1 ]; then
			:
		elif [ -n "$fd" ]; then
			exec {fd}>&-
			fd=
		fi
		d=${EPOCHREALTIME/./}
		echo "$t $((10#$d / 1000)) $ST" >>"$out"
		read -r -t "0.$(printf '%03d' "$PACE_MS")" -u "$nv" _
	done
	[ -z "$fd" ] || exec {fd}>&-
}

# load TAG G...: HAMMER paced to every gateway G at once (paced, from the
# next window on: $T/TAG.pG).
load() {
	local tag=$1 g first
	local -a pids=()
	shift
	first=$(($(now_ms) / (FAST_W * 1000) + 1))
	for g in "$@"; do
		paced "$T/$tag.p$g" "${GP[g]}" "$first" &
		pids+=($!)
		track_pid "$!"
	done
	if ! wait_until $((((NWIN + 2) * FAST_W + 15) * 1000)) pids_gone "${pids[@]}"; then
		diag "$tag: the loads still run after $(((NWIN + 2) * FAST_W + 15)) s; stopped"
		stop_pids "${pids[@]}"
	fi
	wait "${pids[@]}" 2>/dev/null
}

# load_alone G: tests/loadgen hammering gateway G with ALONE, one request
# at a time, from now to the end of the NWIN-th next window (cells in
# $T/alone: WINDOW_START_MS ADDRESS SENT N200 N429 NOTHER; its summary
# in $T/alone.sum); then test 2 on them.
load_alone() {
	local rc
	"$LOADGEN" --url "${URL[$1]}" --out "$T/alone" --clients 1 --concurrency 1 \
	    --window-ms $((FAST_W * 1000)) --guard-ms "$GUARD_MS" \
	    --per-client 1000000:1000000 --seconds $((NWIN * FAST_W)) --timeout-ms 5000 \
	    >"$T/alone.sum" 2>"$T/alone.err"
	rc=$?
	[ "$rc" -eq 0 ] || diag "loadgen exited $rc: $(head -3 "$T/alone.err")"
	diag "one gateway: loadgen on gateway $1 ($ALONE): $(tr '\n' ' ' <"$T/alone.sum")"
	# the first window: partial
	awk -v c="$ALONE" '$2 == c { print $1, $4, $6 }' "$T/alone" | sort -n |
	    tail -n +2 >"$T/alone.w"
	diag "one gateway: $ALONE, admitted per window: $(awk '{ printf "%s%s", sep, $2; sep = " " }' "$T/alone.w")"
	between "$(wc -l <"$T/alone.w")" "$NWIN" 1000 "one gateway: $ALONE hammering gateway $1 only: at least $NWIN whole windows"
	is "$(awk -v l="$LIMIT" '$2 != l || $3 != 0' "$T/alone.w" | wc -l)" 0 \
	    "one gateway: $ALONE hammering gateway $1 only: exactly $LIMIT admitted in every whole window, no answer but 200 and 429"
}

# windows TAG G...: per window that every paced load of TAG sent in, a
# line: WINDOW_START_MS, then HAMMER's 200s at each G, then its answers
# at each G.
windows() {
	local tag=$1
	local -a files=()
	shift
	files=("${@/#/$T/$tag.p}")
	awk -v n=$# -v w=$((FAST_W * 1000)) '
	    FNR == 1 { f++ }
	    { k = sprintf("%.0f", int($1 / w) * w)
		if (!((f, k) in s)) seen[k]++
		s[f, k]++; a[f, k] += ($3 == 200) }
	    END {
		for (k in seen) {
			if (seen[k] != n) continue
			line = k
			for (i = 1; i <= n; i++) line = line " " a[i, k] + 0
			for (i = 1; i <= n; i++) line = line " " s[i, k]
			print line
		}
	    }' "${files[@]}" | sort -n
}

# shares N QUARTERS: per gateway (the answers of each in $v[1+N..2N]) what
# it answers in QUARTERS / 4 x SYNC_MS at its rate in the window (answers over the
# window's span), rounded up, one a line.
shares() {
	local i
	for ((i = 0; i < $1; i++)); do
		echo $(((v[1 + $1 + i] * $2 * SYNC_MS + 4 * span - 1) / (4 * span)))
	done
}

# bound_of SHARES: LIMIT + every share but the least (whichever gateway
# admits last, the others are those it may not have heard of).
bound_of() {
	echo $((LIMIT + $(paste -sd+ <<<"$1") - $(sort -n <<<"$1" | head -1)))
}

# check_load TAG WHAT G...: tests 1 and 2 on load TAG's answers (see the
# header), the figures as diagnostics.
check_load() {
	local tag=$1 what=$2 n w i sh bound bound2 over=0 over2=0 under=0 nw=0 maxover=0 line span total
	local -a v=() gws=()
	shift 2
	gws=("$@")
	n=$#
	span=$((FAST_W * 1000 - 2 * GUARD_MS))
	windows "$tag" "$@" >"$T/$tag.windows"
	while read -r -a v; do
		w=${v[0]}
		sh=$(shares "$n" "$BOUND_QUARTERS")
		bound=$(bound_of "$sh")
		bound2=$(bound_of "$(shares "$n" 8)")
		total=0
		line=
		for ((i = 0; i < n; i++)); do
			total=$((total + v[1 + i]))
			line="$line gateway ${gws[i]} ${v[1 + i]} of ${v[1 + n + i]} ($((v[1 + n + i] * 1000 / span))/s, share $(sed -n "$((i + 1))p" <<<"$sh"));"
		done
		diag "$what: window $w: $HAMMER admitted $total, bound $bound (limit $LIMIT + the others' 3.25 x $SYNC_MS ms; with 2 x: $bound2; with no sync: $((n * LIMIT))):$line"
		nw=$((nw + 1))
		[ "$total" -le "$bound" ] || over=$((over + 1))
		[ "$total" -le "$bound2" ] || over2=$((over2 + 1))
		[ "$total" -ge "$LIMIT" ] || under=$((under + 1))
		[ $((total - LIMIT)) -gt "$maxover" ] && maxover=$((total - LIMIT))
	done <"$T/$tag.windows"
	[ "$over2" -eq 0 ] || diag "$what: $over2 of $nw windows over the bound of 2 x sync_ms"
	between "$nw" "$NWIN" 1000 "$what: $nw windows of $FAST_W s under load (at least $NWIN)"
	is "$over" 0 "$what: in every window the total admitted <= $LIMIT + the others' answers in 3.25 x sync_ms (most over the limit: $maxover)"
	is "$under" 0 "$what: in every window the total admitted >= $LIMIT (hammered, nothing under-admitted)"
	is "$(cat "${@/#/$T/$tag.p}" | awk '$3 != 200 && $3 != 429' | wc -l)" 0 \
	    "$what: every answer a 200 or a 429"
	is "$(cat "${@/#/$T/$tag.p}" |
	    awk -v w=$((FAST_W * 1000)) 'int($1 / w) != int($2 / w)' | wc -l)" 0 \
	    "$what: every answer came in the window its request was sent in"
}

# ============================================================================
# 1 and 2. two gateways, then three, on one redis-server

for g in 1 2 3; do
	gw_conf fast "$g" "$FAST_W" "$SYNC_MS"
	gw_start fast "$g"
done
load two 1 2
check_load two "two gateways" 1 2
load_alone 1
load three 1 2 3
check_load three "three gateways" 1 2 3

# ============================================================================
# 4, 5 and 3: windows of an hour

ensure_window_room "$LONG_W" 40
for g in 1 2; do
	gw_conf long "$g" "$LONG_W" "$SYNC_MS"
	gw_start long "$g"
done
gw_conf slow 3 "$LONG_W" "$SLOW_SYNC_MS"
gw_start slow 3

# ---- 4. reset at gateway A reaches gateway B
CL=127.0.4.1
got=$(runs "$(burst "$CL" 2 $((LIMIT + 5)))")
is "$got" "200x$LIMIT 429x5" "reset: $CL refused by gateway B after $LIMIT admitted"
wait_until 2000 count_is "$CL" "$LIMIT"
is "$(count "$CL")" "$LIMIT" "reset: Redis counts $LIMIT for $CL (gateway B pushed them)"
out=$("$RLGATE_BIN" --config "$T/long-1.conf" --reset "$CL" 2>"$T/reset.err")
rc=$?
is "$rc" 0 "reset: rlgate --config A.conf --reset $CL exits 0"
[ "$rc" -eq 0 ] || diag "reset: $(head -3 "$T/reset.err")"
like "$out" "^rlgate: reset $CL: [1-9][0-9]* states? deleted\$" "reset: it deleted the client's state ($out)"
t0=$(now_ms)
t_ok=
for _ in $(seq 1 60); do
	req --interface "$CL" "${URL[2]}"
	if [ "$STATUS" = 200 ]; then
		t_ok=$(now_ms)
		break
	fi
	[ $(($(now_ms) - t0)) -ge 3000 ] && break
	sleep 0.02
done
if [ -n "$t_ok" ]; then
	diag "reset: gateway B admitted $CL again $((t_ok - t0)) ms after the reset (sync_ms $SYNC_MS)"
else
	diag "reset: gateway B still refused $CL $(($(now_ms) - t0)) ms after the reset (sync_ms $SYNC_MS)"
fi
between "$((${t_ok:-999999} - t0))" 0 1000 "reset: gateway B admits $CL again within 1 s"
wait_until 2000 count_is "$CL" 1
is "$(count "$CL")" 1 "reset: Redis counts 1 for $CL afterwards (the one admission, nothing of before)"

# ---- 5. a gateway SIGKILLed with unpushed units
pushed=1
for try in 1 2 3; do
	CL=127.0.5.$try
	# right after one of the gateway's pushes (a client of its own counted
	# in Redis), so that the next is some SLOW_SYNC_MS away
	tick=127.0.5.$((10 + try))
	req --interface "$tick" "${URL[3]}"
	wait_until $((2 * SLOW_SYNC_MS + 1000)) count_is "$tick" 1 ||
		diag "SIGKILL (try $try): no push of gateway 3 seen in $((2 * SLOW_SYNC_MS + 1000)) ms"
	got=$(runs "$(burst "$CL" 3 30)")
	c_before=$(count "$CL")
	# shellcheck disable=SC2046
	kill -KILL $(cat "$T/slow-3.pid")
	# shellcheck disable=SC2046
	wait_until 5000 pids_gone $(cat "$T/slow-3.pid") || bail_out "gateway 3's rlgate survived SIGKILL"
	c_kill=$(count "$CL")
	diag "SIGKILL (try $try): $CL got $got from gateway 3; Redis counted $c_before before the kill, $c_kill after it"
	is "$got" 200x30 "SIGKILL (try $try): 30 requests from $CL admitted by gateway 3"
	CURG[3]=
	t0=$(now_ms)
	gw_start slow 3 nocheck
	if [ "$c_kill" -lt 30 ]; then
		pushed=0
		break
	fi
	diag "SIGKILL (try $try): gateway 3 had pushed them before the kill; again with another client"
done
is "$pushed" 0 "SIGKILL: the kill came before gateway 3 pushed what it admitted (in 3 tries)"
wait_until $((3 * SLOW_SYNC_MS + 3000)) count_is "$CL" 30
t1=$(now_ms)
diag "SIGKILL: Redis counted $(count "$CL") for $CL $((t1 - t0)) ms after gateway 3 was started again (sync_ms $SLOW_SYNC_MS)"
is "$(count "$CL")" 30 "SIGKILL: started again on its table file, gateway 3 pushed the units: Redis counts 30"
req --interface "$CL" "${URL[3]}"
is "$STATUS|$(header RateLimit-Remaining)" "200|$((LIMIT - 31))" "SIGKILL: gateway 3 goes on counting $CL from 30"

# ---- 3. Redis down, and back
CL=127.0.3.1
NEW=127.0.3.2
got=$(runs "$(burst "$CL" 1 10)")
is "$got" 200x10 "Redis down: before, $CL admitted 10 times by gateway 1"
wait_until 2000 count_is "$CL" 10
is "$(count "$CL")" 10 "Redis down: before, Redis counts 10 for $CL"
kill -KILL "$REDIS_PID"
wait_until 5000 pid_gone "$REDIS_PID" || bail_out "redis-server (pid $REDIS_PID) survived SIGKILL"
wait "$REDIS_PID" 2>/dev/null
got=$(runs "$(burst "$CL" 1 $((LIMIT + 10)))")
is "$got" "200x$((LIMIT - 10)) 429x20" "Redis down: $CL, known to gateway 1, decided from its table: $((LIMIT - 10)) more 200s, then 429s"
req --interface "$NEW" "${URL[1]}"
is "$STATUS" 503 "Redis down: a new client, $NEW, gets 503 (on_error = closed)"
like "$BODY" "$(re_err 503)" "Redis down: the 503's JSON body"
start_test_redis "$RPORT"
t_up=$(now_ms)
wait_until $((BACKOFF_MAX_MS + 20 * SYNC_MS + 2000)) count_is "$CL" $((LIMIT - 10))
t1=$(now_ms)
diag "Redis down: $(count "$CL") of $CL's units in the restarted Redis $((t1 - t_up)) ms after it answered (backoff up to $BACKOFF_MAX_MS ms, sync_ms $SYNC_MS)"
is "$(count "$CL")" $((LIMIT - 10)) "Redis down: the $((LIMIT - 10)) units admitted in the outage reach the restarted, empty Redis"
t0=$(now_ms)
for _ in $(seq 1 50); do
	req --interface "$NEW" "${URL[1]}"
	[ "$STATUS" = 200 ] && break
	[ $(($(now_ms) - t0)) -ge $((BACKOFF_MAX_MS + 3000)) ] && break
	sleep 0.2
done
is "$STATUS" 200 "Redis back: $NEW is admitted ($(($(now_ms) - t0)) ms after the count arrived)"

# ============================================================================
# 6. two gateways on a Redis Cluster

start_cluster
BACKEND=redis_cluster
STORE_URL="redis://127.0.0.1:${PORTS[0]},127.0.0.1:${PORTS[1]},127.0.0.1:${PORTS[2]}"
for g in 1 2; do
	gw_conf cfast "$g" "$FAST_W" "$SYNC_MS"
	gw_start cfast "$g"
done
load cluster 1 2
check_load cluster "cluster, two gateways" 1 2

for g in 1 2 3; do
	[ -n "${CURG[g]}" ] && stop_rlgate_fcgi "${CURG[g]}"
	grep -hE 'rlgate\[[0-9]+\]: .*(error|lost|fail)' "$T"/*-"$g".log 2>/dev/null |
	    grep -v 'serving FastCGI' | head -5 |
	    while read -r line; do diag "gateway $g's log: $line"; done
done
done_testing
