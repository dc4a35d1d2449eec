#!/usr/bin/env bash
# sentinel.sh: the Redis store on a master its Redis Sentinels name
# ([store] url = redis+sentinel://...), against real servers, all on
# 127.0.0.1 at free ports in $T: one master, one replica (--replicaof),
# three sentinels (redis-sentinel: down-after-milliseconds 1000,
# failover-timeout 5000, quorum 2) and one gateway (lighttpd + spawn-fcgi,
# 2 processes x 2 threads, on_error = closed):
#
#   --check-config names the master the sentinels found (and warns, naming
#      the sentinel, when none answers); /rlgate/status says the store is
#      the master NAME via the sentinels; a request is
#      counted on it (HGET), and counting is exact (LIMIT admitted, the
#      rest 429); WAIT 1 makes the replica hold those counts.
#   The master SIGKILLed (by pid) under a bounded background load: every
#      answer during the switch is 200, 429 or the on_error 503 (closed)
#      with its JSON body, nothing else; the gateway follows the new
#      master within the sentinels' failover time plus one retry (the
#      longest backoff, 5 s; both measured and printed); the log says
#      which sentinel named the new master; the client that had used its
#      limit is still refused (its counts came over with the replica); a
#      new request is counted on the new master (HGET on it).
#
# REDIS_SERVER and REDIS_CLI name the binaries (default: from PATH);
# REDIS_SENTINEL the sentinel (default: redis-sentinel).
: "${RLGATE_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/integration/lib.sh
. "$RLGATE_SRCDIR/tests/integration/lib.sh" || { echo "Bail out! cannot read lib.sh"; exit 99; }

REDIS_SENTINEL=${REDIS_SENTINEL:-redis-sentinel}
# a missing redis-sentinel is a broken set-up (scripts/deps.sh installs
# it): never a silent skip
setup_test lighttpd spawn-fcgi curl timeout "$REDIS_SERVER" "$REDIS_CLI" \
    "$REDIS_SENTINEL"

LIMIT=20
WINDOW=3600
NAME=mymaster
DOWN_MS=1000
FAILOVER_MS=5000
BACKOFF_MAX_MS=5000     # store_redis_io.c's longest reconnect backoff

# rport PORT ARGS...: one redis-cli command to 127.0.0.1:PORT, bounded.
rport() {
	local p=$1
	shift
	timeout 5 "$REDIS_CLI" -h 127.0.0.1 -p "$p" "$@" 2>>"$T/redis-cli.err"
}

# start_node NAME PORT [ARGS...]: a redis-server child (no persistence)
# in $T/NAME, tracked; its pid in NODE_PID.
start_node() {
	local name=$1 port=$2
	shift 2
	mkdir -p "$T/$name"
	"$REDIS_SERVER" --port "$port" --bind 127.0.0.1 --save "" \
	    --appendonly no --dir "$T/$name" --daemonize no "$@" \
	    </dev/null >>"$T/$name.log" 2>&1 &
	NODE_PID=$!
	track_pid "$NODE_PID"
}

# up PORT: the server at PORT answers PING.
# shellcheck disable=SC2317  # called through wait_until
up() {
	[ "$(rport "$1" PING)" = PONG ]
}

# master_port SENTINEL_PORT: the port that sentinel names for $NAME.
master_port() {
	rport "$1" SENTINEL get-master-addr-by-name "$NAME" | sed -n 2p
}

# replica_synced: the replica's link to the master is up.
# shellcheck disable=SC2317  # called through wait_until
replica_synced() {
	rport "$PR" INFO replication | tr -d '\r' | grep -qx 'master_link_status:up'
}

# sentinels_ready: every sentinel sees the two others and the replica.
# shellcheck disable=SC2317  # called through wait_until
sentinels_ready() {
	local p
	for p in "${PS[@]}"; do
		rport "$p" SENTINEL ckquorum "$NAME" | grep -q '^OK 3 usable' ||
			return 1
		[ "$(rport "$p" SENTINEL replicas "$NAME" | grep -cx 'slave')" -ge 1 ] ||
			return 1
	done
}

PM=$(free_port) || bail_out "no free port"
PR=$(free_port) || bail_out "no free port"
PS=()
for i in 1 2 3; do
	p=$(free_port) || bail_out "no free port"
	PS+=("$p")
done
PW=$(free_port) || bail_out "no free port"

start_node master "$PM"
MASTER_PID=$NODE_PID
start_node replica "$PR" --replicaof 127.0.0.1 "$PM"
wait_until 10000 up "$PM" || bail_out "master did not answer on $PM: $(tail -5 "$T/master.log")"
wait_until 15000 replica_synced || bail_out "replica did not sync: $(tail -5 "$T/replica.log")"
for i in 0 1 2; do
	mkdir -p "$T/s$i"
	cat >"$T/s$i/sentinel.conf" <<EOF
port ${PS[$i]}
bind 127.0.0.1
daemonize no
dir $T/s$i
sentinel monitor $NAME 127.0.0.1 $PM 2
sentinel down-after-milliseconds $NAME $DOWN_MS
sentinel failover-timeout $NAME $FAILOVER_MS
sentinel parallel-syncs $NAME 1
EOF
	"$REDIS_SENTINEL" "$T/s$i/sentinel.conf" </dev/null >>"$T/s$i.log" 2>&1 &
	track_pid "$!"
done
wait_until 30000 sentinels_ready ||
	bail_out "the sentinels did not see each other and the replica: $(tail -3 "$T/s0.log")"
diag "master 127.0.0.1:$PM (pid $MASTER_PID), replica :$PR, sentinels :${PS[0]} :${PS[1]} :${PS[2]}"

cat >"$T/gw.conf" <<EOF
; written by $(basename "$0")
[store]
backend = redis
url = redis+sentinel://127.0.0.1:${PS[0]},127.0.0.1:${PS[1]},127.0.0.1:${PS[2]}/$NAME
connect_timeout_ms = 300
timeout_ms = 500
on_error = closed

[admin]
allow = 127.0.0.4

[policy default]
algorithm = fixed_window
limit = $LIMIT
window = $WINDOW
key = ip
EOF

# ============================================================================
# Before: the master found, counting exact

check_conf gw
DEAD=$(free_port) || bail_out "no free port"
sed "s|^url = .*|url = redis+sentinel://127.0.0.1:$DEAD/$NAME|" "$T/gw.conf" >"$T/gw-down.conf"
out=$("$RLGATE_BIN" --check-config --config "$T/gw-down.conf" 2>&1)
rc=$?
is "$rc" 0 "--check-config with no sentinel answering: accepted (a warning, not a problem)"
like "$out" "gw-down\.conf: warning: redis: not reachable at master $NAME \(via sentinels\): redis master $NAME: no sentinel named it \(of 1; the last: redis sentinel 127\.0\.0\.1:$DEAD: connect: .*(refused|connect)" \
    "... and the warning says why: the sentinel that did not answer"
like "$(cat "$T/gw.check")" \
    "redis: sentinel 127\.0\.0\.1:${PS[0]} says master $NAME is at 127\.0\.0\.1:$PM: reachable, script loaded" \
    "--check-config names the master the first sentinel found"

run="$T/run"
mkdir -p "$run"
chmod 755 "$run"
write_lighttpd_demo_conf "$T/lighttpd.conf" "$PW" "$run"
URL="http://127.0.0.1:$PW/api/v1/resources"
start_rlgate_fcgi gw "$run/rlgate.sock" "$T/gw.conf" 2 --threads 2
start_lighttpd "$T/lighttpd.conf" "$PW"

ensure_window_room "$WINDOW" 120
n200=0
n429=0
nother=0
for ((i = 0; i < LIMIT + 5; i++)); do
	req --interface 127.0.0.2 "$URL"
	case $STATUS in
	200) n200=$((n200 + 1)) ;;
	429) n429=$((n429 + 1)) ;;
	*) nother=$((nother + 1)) ;;
	esac
done
is "$n200|$n429|$nother" "$LIMIT|5|0" "before: exactly $LIMIT of $((LIMIT + 5)) admitted, the rest 429"
K2='rlg:{127.0.0.2}:default'
is "$(rport "$PM" HGET "$K2" count)" "$LIMIT" "before: the count is on the master (HGET $K2 count)"
is "$(rport "$PM" WAIT 1 5000)" 1 "WAIT 1: the replica acknowledged the writes"
is "$(rport "$PR" HGET "$K2" count)" "$LIMIT" "the replica holds the count"
like "$(cat "$T/gw.log")" "store redis: sentinel 127\.0\.0\.1:[0-9]+ says master $NAME is at 127\.0\.0\.1:$PM" \
    "the log says which sentinel named the master"
req --interface 127.0.0.4 "http://127.0.0.1:$PW/rlgate/status"
like "$STATUS $BODY" "^200 .*\"store\":\{\"backend\":\"redis\",\"where\":\"redis sentinel master $NAME via 127\.0\.0\.1:${PS[0]},127\.0\.0\.1:${PS[1]},127\.0\.0\.1:${PS[2]}\",.*\"healthy\":true" \
    "/rlgate/status: the store is the master $NAME via the sentinels, healthy"

# ============================================================================
# The master killed under load

# The loads: lib.sh's bg_load, from 200 clients 127.0.(10+J).X, for 40 s
# and 3000 requests at most; a line per answer in $T/bg.J: SENT_MS 1
# STATUS|... BODY (fields 3 and 4).

# bg_some: the loads have some answers (20).
# shellcheck disable=SC2317  # called through wait_until
bg_some() {
	[ "$(cat "$T"/bg.[0-9] 2>/dev/null | wc -l)" -ge 20 ]
}

# followed SINCE_MS: a request sent at or after SINCE_MS was admitted
# (a 200 with on_error = closed was counted on a master).
# shellcheck disable=SC2317  # called through wait_until
followed() {
	cat "$T"/bg.[0-9] | awk -v t="$1" '$1 >= t && $3 ~ /^200\|/ { f = 1 } END { exit !f }'
}

# promoted: a sentinel names the replica's port.
# shellcheck disable=SC2317  # called through wait_until
promoted() {
	[ "$(master_port "${PS[0]}")" = "$PR" ]
}

rm -f "$T/bg.stop"
BG=()
for j in 1 2; do
	bg_load "$j" 40 3000 200 "127.0.$((10 + j))" "$URL" &
	BG+=($!)
	track_pid "$!"
done
wait_until 20000 bg_some || bail_out "the background load got no answers"
LOG0=$(wc -c <"$T/gw.log")

t_kill=$(now_ms)
kill -KILL "$MASTER_PID"
wait "$MASTER_PID" 2>/dev/null
diag "master (pid $MASTER_PID) SIGKILLed at $t_kill"
wait_until $((FAILOVER_MS * 4)) promoted || diag "no sentinel named the replica within $((FAILOVER_MS * 4)) ms"
t_fo=$(now_ms)
promoted; ok $? "the sentinels promoted the replica (127.0.0.1:$PR)"
wait_until $((BACKOFF_MAX_MS + 10000)) followed "$t_kill" || true
# the first admitted answer to a request sent after the kill
t_follow=$(cat "$T"/bg.[0-9] | awk -v t="$t_kill" '$1 >= t && $3 ~ /^200\|/ { print $1 }' | sort -n | head -1)
# a little more load on the new master, then stop
sleep 1
touch "$T/bg.stop"
wait_until 15000 pids_gone "${BG[@]}" || stop_pids "${BG[@]}"
wait "${BG[@]}" 2>/dev/null

fo_ms=$((t_fo - t_kill))
follow_ms=$(( ${t_follow:-0} > 0 ? t_follow - t_kill : -1 ))
diag "failover: the sentinels named the new master $fo_ms ms after the kill (polled); rlgate admitted again $follow_ms ms after it"
[ "$follow_ms" -ge 0 ]; ok $? "rlgate admits again after the failover ($follow_ms ms after the kill)"
between "$follow_ms" 0 $((fo_ms + BACKOFF_MAX_MS + 1000)) \
    "rlgate follows within the failover time ($fo_ms ms) plus one retry (the longest backoff, $BACKOFF_MAX_MS ms, and 1 s of slack)"

bad=$(cat "$T"/bg.[0-9] | awk '{ split($3, f, "|") } !((f[1] == 200 && $4 == "ok") || (f[1] == 429 && $4 == "e429") || (f[1] == 503 && $4 == "e503"))' | head -3)
is "$bad" "" "every answer during the switch is 200, 429 or the on_error 503 with its JSON body"
diag "answers under load: $(cat "$T"/bg.[0-9] | awk '{ split($3, f, "|"); c[f[1]]++ } END { for (s in c) printf "%s x %d  ", s, c[s] }')"
like "$(log_since gw "$LOG0")" \
    "store redis: sentinel 127\.0\.0\.1:[0-9]+ says master $NAME is at 127\.0\.0\.1:$PR" \
    "the log says which sentinel named the new master"

# ============================================================================
# After: counts kept, counting on the new master

req --interface 127.0.0.2 "$URL"
is "$STATUS" 429 "after: the client that used its limit is still refused (its counts came over)"
ge=$(rport "$PR" HGET "$K2" count)
[ "${ge:-0}" -ge "$LIMIT" ]; ok $? "after: its count on the new master ($ge) >= the $LIMIT the replica had"
req --interface 127.0.0.3 "$URL"
is "$STATUS" 200 "after: a new client is admitted"
is "$(rport "$PR" HGET 'rlg:{127.0.0.3}:default' count)" 1 "after: and counted on the new master (HGET on 127.0.0.1:$PR)"
is "$(rport "$PR" ROLE | head -1)" master "the new master says ROLE master"

done_testing
