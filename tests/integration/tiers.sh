#!/usr/bin/env bash
# tiers.sh: per-client tiers over HTTP, under lighttpd (the shipped demo
# config) in front of spawn-fcgi + rlgate, for each algorithm
# (fixed_window, sliding_window, token_bucket, sliding_log) on SQLite and
# on Redis:
#
#   1. [tier NAME] in the config: a tiered address gets the tier's limit
#      (RateLimit-Limit, RateLimit-Policy's q, RateLimit-Remaining count
#      it), a client outside gets the policy's, an exempt tier is not
#      limited, an API key named by its hash (rlgate --hash-key) gets its
#      tier from any address, and the rejection's log line names the tier
#      and the limit;
#   2. overrides while rlgate runs: a row inserted with the sqlite3 shell
#      (Redis: redis-cli HSET) applies one second later, to an address
#      and to an API key, and is gone one second after it is deleted
#      (HDEL); a bad row is skipped and logged.
#
# The window is long (600 s): nothing here waits for quota to come back,
# and a run starts with at least 30 s left in its aligned window.
: "${RLGATE_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/integration/lib.sh
. "$RLGATE_SRCDIR/tests/integration/lib.sh" || { echo "Bail out! cannot read lib.sh"; exit 99; }

setup_test lighttpd spawn-fcgi sqlite3 curl timeout "$REDIS_SERVER" "$REDIS_CLI"

make_rundir
demo_lighttpd_conf

SECRET=0123456789abcdef0123456789abcdef

# ---- Redis -------------------------------------------------------------------

start_test_redis

# ---- helpers -----------------------------------------------------------------

# hash_key KEY: the client key rlgate makes of API key KEY.
hash_key() {
	printf '%s\n' "$1" | "$RLGATE_BIN" --config "$T/hash.conf" --hash-key
}
printf '[store]\npath = %s/hash.db\n[client]\nkey_secret = %s\n' "$run" "$SECRET" >"$T/hash.conf"
GOLD_KEY=$(hash_key gold-key-1)
OTHER_KEY=$(hash_key other-key-2)
like "$GOLD_KEY" '^k:[0-9a-f]{32}$' "rlgate --hash-key prints k: and 32 hex digits"

# conf NAME BACKEND ALGORITHM: $T/NAME.conf, a fresh store, one policy of
# 3 per 600 s keyed by X-API-Key (the address without one), three tiers.
conf() {
	{
		echo "[store]"
		if [ "$2" = redis ]; then
			echo "backend = redis"
			echo "url = redis://127.0.0.1:$RPORT"
		else
			echo "path = $run/$1.db"
			echo "busy_timeout_ms = 5000"
		fi
		cat <<EOF
[headers]
style = all
[client]
key_secret = $SECRET
[policy default]
algorithm = $3
limit = 3
window = 600
key = header:X-API-Key
[tier gold]
clients = 127.0.0.2, $GOLD_KEY
default = limit=5
[tier free]
clients = 127.0.0.3/32
default = exempt
EOF
	} >"$T/$1.conf"
}

CUR=
use_rlgate() {
	[ -n "$CUR" ] && stop_rlgate_fcgi "$CUR"
	start_rlgate_fcgi "$1" "$sock" "$T/$1.conf" 2 --threads 2
	CUR=$1
}

# ask CLIENT [CURL_ARGS...]: one GET of the endpoint from CLIENT.
ask() {
	local from=$1
	shift
	req --interface "$from" "$@" "$url"
}

# expect CLIENT N_OK LIMIT WHAT [CURL_ARGS...]: N_OK answers 200 from
# CLIENT, RateLimit-Limit LIMIT and Remaining counting down to LIMIT -
# N_OK... (of a fresh client), then 429.
expect() {
	local from=$1 n=$2 limit=$3 what=$4 i got=""
	shift 4
	for i in $(seq 1 "$n"); do
		ask "$from" "$@"
		got="$got $STATUS/$(header RateLimit-Limit)/$(header RateLimit-Remaining)"
	done
	local want="" r
	for i in $(seq 1 "$n"); do
		r=$((limit - i))
		want="$want 200/$limit/$r"
	done
	is "$got" "$want" "$what: $n x 200, RateLimit-Limit $limit, Remaining down to $((limit - n))"
	ask "$from" "$@"
	is "$STATUS/$(header RateLimit-Limit)/$(header RateLimit-Remaining)" "429/$limit/0" "$what: then 429, RateLimit-Limit $limit"
}

# override_put BACKEND POLICY CLIENT SPEC / override_del BACKEND POLICY
# CLIENT: as an operator would, with the sqlite3 shell or redis-cli.
override_put() {
	if [ "$1" = redis ]; then
		rcli HSET rlg:overrides "$2 $3" "$4" >/dev/null
	else
		sql "$DB" "INSERT INTO rlg_override(policy, client, spec, note) VALUES ('$2', '$3', '$4', 'tiers.sh') ON CONFLICT(policy, client) DO UPDATE SET spec = excluded.spec;"
	fi
}
override_del() {
	if [ "$1" = redis ]; then
		rcli HDEL rlg:overrides "$2 $3" >/dev/null
	else
		sql "$DB" "DELETE FROM rlg_override WHERE policy = '$2' AND client = '$3';"
	fi
}

start_lighttpd "$T/lighttpd.conf" "$PORT"

for backend in sqlite redis; do
	for alg in fixed_window sliding_window token_bucket sliding_log; do
		name="$backend-$alg"
		w="$backend, $alg"
		DB="$run/$name.db"
		[ "$backend" = redis ] && rcli FLUSHALL >/dev/null
		conf "$name" "$backend" "$alg"
		use_rlgate "$name"
		# the first request of each process opens its store
		ask 127.0.0.250
		[ "$STATUS" = 200 ] || bail_out "rlgate $name does not answer: $STATUS $(tail -3 "$T/$name.log")"
		logpos=$(log_size "$name")
		# fixed and sliding windows are aligned on multiples of 600 s:
		# a run (about 10 s) stays in one
		ensure_window_room 600 30

		# --- 1. the config's tiers
		expect 127.0.0.1 3 3 "$w: no tier"
		expect 127.0.0.2 5 5 "$w: [tier gold] (127.0.0.2)"
		ask 127.0.0.2
		like "$(header RateLimit-Policy)" '"default";q=5;w=600' "$w: RateLimit-Policy says the tier's q=5"
		got=""
		for i in 1 2 3 4 5; do
			ask 127.0.0.3
			got="$got $STATUS:$(header RateLimit-Limit)"
		done
		is "$got" " 200: 200: 200: 200: 200:" "$w: [tier free] is exempt: 5 x 200, no RateLimit-Limit"
		# the gold API key from two addresses: one quota of 5
		got=""
		for i in 1 2 3 4 5 6; do
			ask "127.0.0.$((10 + i % 2))" -H "X-API-Key: gold-key-1"
			got="$got $STATUS/$(header RateLimit-Limit)"
		done
		is "$got" " 200/5 200/5 200/5 200/5 200/5 429/5" "$w: the gold API key (by its hash) gets 5 from any address"
		expect 127.0.0.12 3 3 "$w: another API key, no tier" -H "X-API-Key: other-key-2"
		sleep_ms 200
		lines=$(log_since "$name" "$logpos")
		like "$lines" 'event=reject client=127\.0\.0\.2 route=- policy=default retry_after_s=[0-9]+ tier=gold limit=5 method=GET' "$w: the rejection's line names the tier and its limit"
		like "$lines" "event=reject client=$GOLD_KEY route=- policy=default retry_after_s=[0-9]+ tier=gold limit=5 " "$w: ... for the API key too"
		unlike "$(grep 'client=127.0.0.1 ' <<<"$lines")" 'tier=' "$w: a client without tier: no tier= on its line"

		# --- 2. overrides while rlgate runs
		override_put "$backend" default 127.0.0.4 'limit=6'
		sleep_ms 1000
		ask 127.0.0.4
		is "$STATUS/$(header RateLimit-Limit)/$(header RateLimit-Remaining)" "200/6/5" "$w: an override put one second ago applies (limit=6)"
		ask 127.0.0.4
		is "$STATUS/$(header RateLimit-Remaining)" "200/4" "$w: ... counted under it"
		override_del "$backend" default 127.0.0.4
		sleep_ms 1000
		ask 127.0.0.4
		if [ "$alg" = token_bucket ]; then
			# two requests at the override's 100 s each are one
			# unit of the policy's 200 s: one left after this one
			is "$STATUS/$(header RateLimit-Limit)/$(header RateLimit-Remaining)" "200/3/1" "$w: deleted one second ago, the policy's limit again (the bucket's debt in time: 1 left)"
		else
			is "$STATUS/$(header RateLimit-Limit)/$(header RateLimit-Remaining)" "200/3/0" "$w: deleted one second ago, the policy's limit again (3rd of 3)"
			ask 127.0.0.4
			is "$STATUS" 429 "$w: ... and its 4th request refused"
		fi
		# an override of an API key, over the config's tier-less key
		override_put "$backend" default "$OTHER_KEY" 'limit=7'
		override_put "$backend" default 'not-an-address' 'limit=7'
		sleep_ms 1000
		ask 127.0.0.13 -H "X-API-Key: other-key-2"
		if [ "$alg" = token_bucket ]; then
			# its 3 requests at the policy's 200 s are 600 s of
			# debt: 7 units at the override's 85.7 s, none left
			is "$STATUS/$(header RateLimit-Limit)/$(header RateLimit-Remaining)" "429/7/0" "$w: an override of an API key (k:HASH) applies to its state (the bucket's debt in time: 600 s, all of 7 units)"
		else
			is "$STATUS/$(header RateLimit-Limit)/$(header RateLimit-Remaining)" "200/7/3" "$w: an override of an API key (k:HASH) applies to its state (4th of 7)"
		fi
		# an override before a tier
		override_put "$backend" default 127.0.0.2 'exempt'
		sleep_ms 1000
		ask 127.0.0.2
		is "$STATUS/$(header RateLimit-Limit)" "200/" "$w: an override (exempt) comes before the config's tier"
		sleep_ms 200
		like "$(log_since "$name" "$logpos")" 'event=bad_override policy=default client=not-an-address spec=[^ ]* reason=bad_client detail=client:%20' "$w: a bad row is skipped and logged, its text as tokens"
		override_del "$backend" default 127.0.0.2
		override_del "$backend" default "$OTHER_KEY"
		override_del "$backend" default 'not-an-address'
	done
done

stop_rlgate_fcgi "$CUR"
done_testing
