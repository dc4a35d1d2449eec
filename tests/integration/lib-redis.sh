# shellcheck shell=bash
# tests/integration/lib-redis.sh: the one redis-server and the two gateways
# on it of redis.sh and redis_outage.sh. Sourced after lib.sh and
# lib-gateways.sh; redis_gateways sets up both (the server on a free port,
# RPORT and REDIS_PID; the gateways' ports and configs). The constants
# below are read by the sourcing scripts.
# shellcheck disable=SC2034

# a missing Redis is a broken set-up (scripts/deps.sh installs redis-server
# and redis-tools), as for the unit tests: never a silent skip
setup_test lighttpd spawn-fcgi curl timeout "$REDIS_SERVER" "$REDIS_CLI"

LIMIT=50
WINDOW=3600
NREQ=100                # per gateway: 2 x NREQ requests against LIMIT
NPROC=2
NTHREADS=2
BACKOFF_MAX_MS=5000     # store_redis.c's longest reconnect backoff

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

# redis_gateways: the server started, then the two gateways' set-up
# (gateways_init: their ports, not yet the processes).
redis_gateways() {
	start_redis
	diag "redis-server $("$REDIS_SERVER" --version | awk '{ print $3 }') on 127.0.0.1:$RPORT, pid $REDIS_PID"
	gateways_init "$RPORT"
}

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
