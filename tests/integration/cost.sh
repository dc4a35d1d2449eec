#!/usr/bin/env bash
# cost.sh: request cost over HTTP, for every algorithm on both stores. One
# lighttpd (the shipped www/lighttpd/demo.conf, rlgate as responder) and
# one lighttpd guarding /guarded/ with rlgate as its FastCGI Authorizer
# (the shipped www/lighttpd/authorizer.conf), both on one spawn-fcgi
# socket; one redis-server started here (127.0.0.1, a free port, no
# persistence). For each of fixed_window, sliding_window, token_bucket
# (burst 12) and sliding_log, on SQLite and on Redis, one policy of 12 per
# 3600 s and these routes of it:
#
#   GET /api/v1/resources   cost = 5
#   HEAD /api/v1/resources  cost 1 (a route of its own: methods = HEAD)
#   /api/search             cost = header:X-Cost, cost_max = 10 (404s,
#                           counted, with the rate-limit headers)
#   /guarded/*              the same header cost, in the Authorizer role
#
# and [client] trusted_proxies = 127.0.0.1/32:
#
#   1. fixed cost: GET 200 (RateLimit-Remaining 7), 200 (2), then 429 with
#      Retry-After and RateLimit-Remaining: 0 (2 units are left, which the
#      answer does not show), twice; nothing consumed: the HEAD route then
#      gets 200 twice (Remaining 1, 0), then 429. On SQLite, sqlite3 sees
#      the refused costly requests write nothing (the client's rlg_state
#      row and rlg_log rows unchanged);
#   2. header cost: from the trusted peer X-Cost: 4 charges 4 (Remaining
#      8); 0, 11, +3, "3 4", and X-Cost beside X_Cost are 400 with the JSON
#      body, counted by no policy (then X-Cost: 8 takes the 8 left), logged
#      reason=bad_cost header=X-Cost; behind the trusted proxy (an
#      X-Forwarded-For client) X-Cost: 4 charges 4 and no header charges
#      cost_max; from an untrusted peer X-Cost: 1 is ignored: cost_max (10,
#      Remaining 2), then 429;
#   3. the Authorizer role: the client's own X-Cost: 1 is ignored (the peer
#      is the client): 200, then 429 with Remaining 0; through the trusted
#      proxy X-Cost: 4 is believed: 200 x 3, then 429.
#
# REDIS_SERVER and REDIS_CLI name the binaries (default: from PATH).
: "${RLGATE_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/integration/lib.sh
. "$RLGATE_SRCDIR/tests/integration/lib.sh" || { echo "Bail out! cannot read lib.sh"; exit 99; }

setup_test lighttpd spawn-fcgi sqlite3 curl timeout "$REDIS_SERVER" "$REDIS_CLI"

LIMIT=12
WINDOW=3600

make_rundir

# ---- Redis -------------------------------------------------------------------

start_test_redis

# ---- rlgate ------------------------------------------------------------------

# conf NAME STORE ALG: $T/NAME.conf, the policy and routes above on STORE
# (sqlite: the fresh file $run/NAME.db, the default commit; redis: our
# server, emptied first); DB is the SQLite file.
conf() {
	local store burst=
	[ "$3" = token_bucket ] && burst="burst = $LIMIT"
	DB="$run/$1.db"
	if [ "$2" = sqlite ]; then
		store="path = $DB"
	else
		store="backend = redis
url = redis://127.0.0.1:$RPORT"
		rcli FLUSHALL >/dev/null
	fi
	cat >"$T/$1.conf" <<EOF
; written by $(basename "$0")
[store]
$store

[client]
trusted_proxies = 127.0.0.1/32

[policy default]
limit = 1000

[policy p]
algorithm = $3
limit = $LIMIT
window = $WINDOW
$burst

[route cheap]
path = /api/v1/resources
methods = HEAD
policies = p

[route costly]
path = /api/v1/resources
cost = 5
policies = p

[route search]
path = /api/search
cost = header:X-Cost
cost_max = 10
policies = p

[route guarded]
path = /guarded/*
cost = header:X-Cost
cost_max = 10
policies = p
EOF
	check_conf "$1"
}

# use_rlgate NAME: stops the running rlgate and starts NAME on $sock, 2
# processes x 2 threads.
CUR=
use_rlgate() {
	[ -n "$CUR" ] && stop_rlgate_fcgi "$CUR"
	rm -f "$sock"
	start_rlgate_fcgi "$1" "$sock" "$T/$1.conf" 2 --threads 2
	CUR=$1
}

# state CLIENT: on SQLite, the client's rlg_state row and its rlg_log rows
# ("count|prev_count|tat_us|rows"), once the decision table is flushed.
state() {
	[ -e "$DB-table" ] && flush_table "$T/$CUR.conf"
	sql "$DB" "SELECT (SELECT group_concat(count || '|' || prev_count || '|' || tat_us)
	    FROM rlg_state WHERE policy = 'p' AND client = '$1') || '|' ||
	    (SELECT count(*) FROM rlg_log WHERE policy = 'p' AND client = '$1')"
}

# rc NAME: "STATUS:RateLimit-Remaining" of the last answer.
rc() {
	echo "$STATUS:$(header RateLimit-Remaining)"
}

demo_lighttpd_conf

# The guarding lighttpd: /guarded/ served from its docroot once rlgate
# says yes.
gdir="$T/guard"
mkdir -p "$gdir/htdocs/guarded"
chmod -R 755 "$gdir"
echo served >"$gdir/htdocs/guarded/x.txt"
GPORT=$(free_port) || bail_out "no free port"
gurl="http://127.0.0.1:$GPORT/guarded/x.txt"

first=1
for store in sqlite redis; do
for alg in fixed_window sliding_window token_bucket sliding_log; do
	lab="$alg, $store"
	conf "$alg-$store" "$store" "$alg"
	use_rlgate "$alg-$store"
	if [ $first = 1 ]; then
		start_lighttpd "$T/lighttpd.conf" "$PORT"
		start_authorizer_lighttpd "$gdir" "$GPORT" "$sock" "/guarded/" </dev/null
		first=0
	fi
	# the fixed and sliding windows count by aligned hour: a run needs
	# ~10 s of it
	ensure_window_room "$WINDOW" 30

	# ---- 1. a fixed cost of 5, then cost 1 on the same policy
	C=127.0.0.2
	req --interface $C "$url"
	is "$(rc)" 200:7 "$lab: GET, cost 5: 200, RateLimit-Remaining 7"
	like "$BODY" "$RE_BODY_200" "$lab: the success body"
	req --interface $C "$url"
	is "$(rc)" 200:2 "$lab: GET, cost 5: 200, RateLimit-Remaining 2"
	[ "$store" = sqlite ] && before=$(state $C)
	req --interface $C "$url"
	is "$(rc)" 429:0 "$lab: GET, cost 5, 2 left: 429 with RateLimit-Remaining 0"
	# a sliding window's 10 units go on weighing in the next window: 5
	# more fit once they weigh under 8, 0.2 of it in (below 2 windows)
	maxra=$WINDOW
	[ "$alg" = sliding_window ] && maxra=$((2 * WINDOW))
	between "$(header Retry-After)" 1 $maxra "$lab: the 429 has Retry-After ($(header Retry-After) s, at most $maxra)"
	is "$BODY" "$BODY_429" "$lab: the seed's 429 body"
	req --interface $C "$url"
	is "$(rc)" 429:0 "$lab: again: 429, RateLimit-Remaining 0"
	if [ "$store" = sqlite ]; then
		after=$(state $C)
		is "$after" "$before" "$lab: sqlite3: the refused requests wrote nothing ($after)"
		# count|prev_count|tat_us|log rows: 10 counted, or a tat 10
		# emission intervals (3000 s) ahead of the first request
		case $alg in
		fixed_window | sliding_window) want='^10\|0\|0\|0$' ;;
		token_bucket) want='^0\|0\|[0-9]+\|0$' ;;
		sliding_log) want='^10\|0\|0\|10$' ;;
		esac
		like "$after" "$want" "$lab: sqlite3: 10 units taken"
		if [ $alg = token_bucket ]; then
			tat_s=$(($(echo "$after" | cut -d'|' -f3) / 1000000))
			between $((tat_s - $(now_ms) / 1000)) 2990 3000 \
			    "$lab: sqlite3: tat 10 x 300 s after the first request"
		fi
	fi
	out=
	for i in 1 2 3; do
		hreq --interface $C "$url"
		out="$out $(rc)"
	done
	is "${out# }" "200:1 200:0 429:0" "$lab: HEAD, cost 1: the 2 units left: 200, 200, then 429"

	# ---- 2. the header cost
	search="$base/api/search"
	req --interface 127.0.0.1 -H 'X-Cost: 4' "$search"
	is "$(rc)" 404:8 "$lab: trusted peer, X-Cost: 4: charged 4 (Remaining 8)"
	for v in 0 11 +3 '3 4' 0x3; do
		req --interface 127.0.0.1 -H "X-Cost: $v" "$search"
		is "$STATUS:$(header RateLimit-Remaining)" 400: "$lab: trusted peer, X-Cost: $v: 400, no rate-limit header"
	done
	like "$BODY" "$(re_err 400)" "$lab: the 400 has the JSON error body"
	req --interface 127.0.0.1 -H 'X-Cost: 2' -H 'X_Cost: 2' "$search"
	is "$STATUS" 400 "$lab: X-Cost beside X_Cost: 400"
	req --interface 127.0.0.1 -H 'X-Cost: 8' "$search"
	is "$(rc)" 404:0 "$lab: then X-Cost: 8 takes the 8 left: nothing was counted"
	req --interface 127.0.0.1 -H 'X-Cost: 4' -H 'X-Forwarded-For: 192.0.2.40' "$search"
	is "$(rc)" 404:8 "$lab: behind the trusted proxy, X-Cost: 4: charged 4"
	req --interface 127.0.0.1 -H 'X-Forwarded-For: 192.0.2.41' "$search"
	is "$(rc)" 404:2 "$lab: behind the trusted proxy, no X-Cost: charged cost_max (10)"
	req --interface 127.0.0.3 -H 'X-Cost: 1' "$search"
	is "$(rc)" 404:2 "$lab: untrusted peer, X-Cost: 1: ignored, charged cost_max (Remaining 2)"
	req --interface 127.0.0.3 -H 'X-Cost: 1' "$search"
	is "$(rc)" 429:0 "$lab: untrusted peer, X-Cost: 1 again: 429, Remaining 0"

	# ---- 3. the Authorizer role
	req --interface 127.0.0.4 -H 'X-Cost: 1' "$gurl"
	is "$STATUS:$BODY" 200:served "$lab: Authorizer, the client's X-Cost: 1: served"
	req --interface 127.0.0.4 -H 'X-Cost: 1' "$gurl"
	is "$(rc)" 429:0 "$lab: Authorizer: ... but it cost 10: the second is 429, Remaining 0"
	out=
	for i in 1 2 3 4; do
		req --interface 127.0.0.1 -H 'X-Cost: 4' -H 'X-Forwarded-For: 192.0.2.42' "$gurl"
		out="$out $STATUS"
	done
	is "${out# }" "200 200 200 429" "$lab: Authorizer behind the trusted proxy: X-Cost: 4 believed: 3 served, then 429"

	rlgate_pids_alive "$CUR"
	ok $? "$lab: every rlgate process survived"
	n=$(grep -c 'event=bad_request peer=127.0.0.1 reason=bad_cost header=X-Cost ' "$T/$CUR.log")
	between "$n" 1 4 "$lab: logged reason=bad_cost header=X-Cost (paced: once per thread)"
done
done

stop_rlgate_fcgi "$CUR"
done_testing
