#!/usr/bin/env bash
# gateway.sh: the gateway features end to end, over HTTP, behind the real
# lighttpd (the shipped www/lighttpd/demo.conf + rlgate.conf, rlgate at
# /api/) and, for routes, behind Apache 2.4 too (the shipped
# www/apache/rlgate.conf on the same socket). One rlgate config and
# database per part; only rlgate restarts between parts:
#   1. routes: first match wins, methods, prefix routes, policies = none,
#      unrouted requests under [policy default] (one row per (policy,
#      client): routed and unrouted requests share it), through both servers;
#   2. client identity: [client] trusted_proxies, X-Forwarded-For and
#      Forwarded walked from the right, IPv6 grouped per /64, headers from
#      untrusted peers ignored, malformed and oversized headers;
#   3. API keys: key = header:X-API-Key stored as k:HEX only (never the raw
#      key, in the database, its WAL or the log), the IP fallback, the
#      composite key = ip, header:X-API-Key;
#   4. exemptions: [client] exempt, report_exempt = no | yes, a policy's
#      own exempt list;
#   5. dry run: mode = dry_run admits, reports and logs would-be rejections;
#      an enforcing policy beside it still rejects;
#   6. logging: one key=value line per rejection; [log] level = error
#      silences them; the rejection cache (commit = each: the decision
#      table has none) logs once per thread; level = info says at start
#      which commit applies, and why when auto chose each.
# The database is read once the decision table (commit = behind, the
# default) is flushed to it (gsql).
# Every policy here has a 3600 s fixed window: each part waits for a fresh
# hour only when it would start in the last seconds of one.
: "${RLGATE_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/integration/lib.sh
. "$RLGATE_SRCDIR/tests/integration/lib.sh" || { echo "Bail out! cannot read lib.sh"; exit 99; }

setup_test lighttpd spawn-fcgi sqlite3 curl

WINDOW=3600
make_rundir

# Each part writes its config with write_store_conf: the rejection cache
# is off (rejection_cache = $CACHE, default 0), so that every 429 is the
# store's decision and logs its event=reject line; part 6c turns it on.

# use_rlgate NAME: restart_rlgate on $T/NAME.conf (the socket lighttpd and
# Apache use), waiting for a fresh window when less than 20 s are left in
# this one; DB is its database.
use_rlgate() {
	: >"$T/statuses"
	restart_rlgate "$1" 20
	DB="$T/$1.db"
}

# gsql QUERY: QUERY on $DB once the running rlgate's decision table is
# flushed to it.
gsql() {
	sql_flushed "$T/$CUR.conf" "$DB" "$1"
}

# row POLICY CLIENT: the count of that rlg_state row (empty: no row).
row() {
	gsql "SELECT count FROM rlg_state WHERE policy = '$1' AND client = '$2'"
}

# rows_of CLIENT: "policy:count" of every row of CLIENT, sorted.
rows_of() {
	gsql "SELECT policy || ':' || count FROM rlg_state WHERE client = '$1' ORDER BY policy" | tr '\n' ' ' | sed 's/ $//'
}

# req: lib.sh's, and every status goes to $T/statuses (emptied by
# use_rlgate), so a part can count its 429s even from subshells.
eval "$(declare -f req | sed '1s/^req /lib_req /')"
req() {
	lib_req "$@"
	echo "$STATUS" >>"$T/statuses"
}

# n429: the 429s answered since rlgate was last (re)started.
n429() {
	grep -c '^429$' "$T/statuses"
}

# last_body: the body of the last answer (seq_codes runs in a subshell:
# its BODY does not come back, the file does).
last_body() {
	cat "$T/last.body"
}


# log_events NAME EVENT: the log lines of $T/NAME.log with event=EVENT.
log_events() {
	grep -E "^${LOG_RE}event=$2 " "$T/$1.log"
}

# kv LINE KEY: the value of KEY in a key=value log line.
kv() {
	local w
	for w in ${1#*]: }; do
		if [ "${w%%=*}" = "$2" ]; then
			printf '%s' "${w#*=}"
			return 0
		fi
	done
	return 1
}

# check_reject_lines NAME EVENT EXPECTED_COUNT CLIENT ROUTE POLICY DESC: the
# log of NAME has exactly EXPECTED_COUNT lines of EVENT for CLIENT and
# ROUTE, each exactly "event= client= route= policy= retry_after_s= method=
# path=" with these values, retry_after_s in 1..WINDOW, an upper-case method
# and a path.
check_reject_lines() {
	local name=$1 ev=$2 want=$3 cl=$4 rt=$5 pol=$6 d=$7 lines line bad=0 n=0 re
	lines=$(log_events "$name" "$ev" | while IFS= read -r line; do
		[ "$(kv "$line" client)" = "$cl" ] && [ "$(kv "$line" route)" = "$rt" ] &&
		    printf '%s\n' "$line"
	done)
	[ -n "$lines" ] && n=$(printf '%s\n' "$lines" | wc -l)
	is "$n" "$want" "$d: $want event=$ev line(s) for client $cl, route $rt"
	[ "$n" -gt 0 ] || return 0
	re="^${LOG_RE}event=[a-z_]+ client=[^ ]+ route=[^ ]+ policy=[^ ]+ retry_after_s=[0-9]+ method=[A-Z]+ path=/[^ ]*\$"
	while IFS= read -r line; do
		if ! [[ $line =~ $re ]] ||
		    [ "$(kv "$line" route)" != "$rt" ] ||
		    [ "$(kv "$line" policy)" != "$pol" ] ||
		    [ "$(kv "$line" retry_after_s)" -lt 1 ] ||
		    [ "$(kv "$line" retry_after_s)" -gt $WINDOW ]; then
			bad=1
			diag "bad line: $line"
		fi
	done <<<"$lines"
	ok $bad "$d: each is event=$ev client=$cl route=$rt policy=$pol retry_after_s=1..$WINDOW"
}

# ---- 1. routes ----------------------------------------------------------------

write_store_conf routes <<EOF
[policy default]
limit = 3
window = $WINDOW

[policy strict]
limit = 1
window = $WINDOW

[route strict]
path = /api/v1/resources
methods = POST
policies = strict

[route free]
path = /api/free/*
policies = none

[route res]
path = /api/v1/resources
policies = default
EOF
use_rlgate routes

LT_PORT=$(free_port) || bail_out "no free port"
write_lighttpd_demo_conf "$T/lighttpd.conf" "$LT_PORT" "$run" "$sock"
# a 10 KiB request header must reach rlgate (lighttpd's default limit is 8 KiB)
echo 'server.max-request-field-size := 65536' >>"$T/lighttpd.conf"
start_lighttpd "$T/lighttpd.conf" "$LT_PORT"
LT="http://127.0.0.1:$LT_PORT"
url="$LT/api/v1/resources"

is "$(seq_codes 4 "$url")" "200:2 200:1 200:0 429:0" \
    "lighttpd: GET /api/v1/resources (route res, default 3 per hour): 3 x 200, then 429"
is "$(header RateLimit-Limit)" 3 "lighttpd: route res: RateLimit-Limit 3"
between "$(header Retry-After)" 1 $WINDOW "lighttpd: route res: 429 with Retry-After"
is "$(last_body)" "$BODY_429" "lighttpd: route res: the JSON 429 body"

req -X POST -d x "$url"
is "$STATUS:$(header RateLimit-Limit):$(header RateLimit-Remaining)" "405:1:0" \
    "lighttpd: POST (route strict, limit 1, first match wins): admitted, the endpoint's 405, RateLimit-Limit 1, Remaining 0"
is "$(header Allow)" "GET, HEAD" "lighttpd: POST: 405 with Allow: GET, HEAD"
req -X POST -d x "$url"
is "$STATUS:$(header RateLimit-Limit)" "429:1" "lighttpd: the 2nd POST: 429 under strict"
is "$(rows_of 127.0.0.1)" "default:3 strict:1" \
    "lighttpd: rlg_state: (default, 127.0.0.1) = 3 and (strict, 127.0.0.1) = 1: the POSTs did not count under default"

req --interface 127.0.0.5 -X POST -d x "$url"
is "$STATUS" 405 "lighttpd: POST from a fresh client: 405"
is "$(seq_codes 3 --interface 127.0.0.5 "$url")" "200:2 200:1 200:0" \
    "lighttpd: its GETs still get the 3 of default (route strict takes POST only)"

codes=$(seq_codes 10 "$LT/api/free/x")
is "$codes" "$(printf '404:- %.0s' $(seq 1 10) | sed 's/ $//')" \
    "lighttpd: /api/free/x (policies = none) from the limited 127.0.0.1: 10 x 404, no RateLimit-Remaining"
has_header 'RateLimit-Limit' || has_header 'RateLimit-Reset' || has_header 'Retry-After'
ok $((! $?)) "lighttpd: /api/free/x: no RateLimit-Limit, RateLimit-Reset or Retry-After"
like "$(last_body)" "$(re_err 404)" "lighttpd: /api/free/x: rlgate's JSON 404"
req "$LT/api/free/deeper/y?q=1"
is "$STATUS:$(header RateLimit-Remaining)" "404:" "lighttpd: /api/free/deeper/y?q=1: the prefix route takes it (404, not counted)"
req "$LT/api/%66ree/x"
is "$STATUS:$(header RateLimit-Remaining)" "404:" "lighttpd: /api/%66ree/x: routed after percent-decoding (free, not limited)"
req "$LT/api/freeze"
is "$STATUS" 429 "lighttpd: /api/freeze is not under /api/free/*: default, 429 for 127.0.0.1"
seq_codes 10 --interface 127.0.0.8 "$LT/api/free/x" >/dev/null
is "$(rows_of 127.0.0.8)" "" "lighttpd: the free route writes no row"

# a request no route matches: [policy default], the same (default, client)
# row as route res
is "$(seq_codes 2 --interface 127.0.0.6 "$url")" "200:2 200:1" "lighttpd: 127.0.0.6: 2 GETs (route res)"
req --interface 127.0.0.6 "$LT/api/other"
is "$STATUS:$(header RateLimit-Limit):$(header RateLimit-Remaining)" "404:3:0" \
    "lighttpd: /api/other (no route): counted under default with the GETs (Remaining 0), 404"
req --interface 127.0.0.6 "$LT/api/other"
is "$STATUS" 429 "lighttpd: /api/other again: 429 (default exhausted by both)"
req --interface 127.0.0.6 "$url"
is "$STATUS" 429 "lighttpd: GET /api/v1/resources after it: 429 too"
is "$(rows_of 127.0.0.6)" "default:3" "lighttpd: rlg_state: one row (default, 127.0.0.6) = 3 counts routed and unrouted requests"


# ---- 1b. routes through Apache (same rlgate, same database) -------------------

if apache_available; then
	shipped_apache "$sock"
	is "$(seq_codes 4 --interface 127.0.0.7 "$AP/api/v1/resources")" "200:2 200:1 200:0 429:0" \
	    "Apache: GET /api/v1/resources (route res): 3 x 200, then 429"
	is "$(last_body)" "$BODY_429" "Apache: route res: the JSON 429 body"
	req --interface 127.0.0.9 -X POST -d x "$AP/api/v1/resources"
	is "$STATUS:$(header RateLimit-Limit)" "405:1" "Apache: POST (route strict): 405, RateLimit-Limit 1"
	req --interface 127.0.0.9 -X POST -d x "$AP/api/v1/resources"
	is "$STATUS" 429 "Apache: the 2nd POST: 429"
	is "$(seq_codes 10 --interface 127.0.0.7 "$AP/api/free/x")" "$(printf '404:- %.0s' $(seq 1 10) | sed 's/ $//')" \
	    "Apache: /api/free/x from the limited 127.0.0.7: 10 x 404, no RateLimit-Remaining"
	has_header 'RateLimit-Limit' || has_header 'Retry-After'
	ok $((! $?)) "Apache: /api/free/x: no RateLimit-Limit or Retry-After"
	like "$(last_body)" "$(re_err 404)" "Apache: /api/free/x: rlgate's JSON 404"
	is "$(rows_of 127.0.0.7)" "default:3" "Apache: rlg_state: (default, 127.0.0.7) = 3, nothing for the free route"
	is "$(rows_of 127.0.0.9)" "strict:1" "Apache: rlg_state: (strict, 127.0.0.9) = 1"
	check_reject_lines routes reject 1 127.0.0.7 res default "Apache: routes log"
	check_reject_lines routes reject 1 127.0.0.9 strict strict "Apache: routes log"
else
	diag "Apache 2.4 with mod_proxy_fcgi is not installed: routes checked through lighttpd only"
fi

# ---- 6a. logging of the routes part: one line per 429 --------------------------

check_reject_lines routes reject 1 127.0.0.1 res default "routes log: the 4th GET"
check_reject_lines routes reject 1 127.0.0.1 strict strict "routes log: the 2nd POST"
check_reject_lines routes reject 1 127.0.0.1 - default "routes log: /api/freeze (no route)"
check_reject_lines routes reject 1 127.0.0.6 - default "routes log: /api/other (no route)"
check_reject_lines routes reject 1 127.0.0.6 res default "routes log: the GET after it"
is "$(log_events routes reject | wc -l)" "$(n429)" "routes log: exactly one event=reject line per 429 answered"
is "$(grep -c 'event=' "$T/routes.log" | tr -d ' ')" "$(n429)" "routes log: no other event= lines at level warn"

# ---- 2. client identity -----------------------------------------------------------

# [client] forwarded_header names the one header the trusted proxies set
# (default x-forwarded-for); the other is never read, as a proxy that only
# passes it through would let the client choose its key.
write_store_conf identity <<EOF
[client]
trusted_proxies = 127.0.0.1/32

[policy default]
limit = 100
window = $WINDOW
EOF
use_rlgate identity

# via KEY DESC CURL_ARGS...: one GET of the endpoint; 200 and counted under
# client KEY (its row grew by one, the whole table by one).
via() {
	local want=$1 d=$2 before after total0 total1
	shift 2
	before=$(row default "$want")
	total0=$(gsql "SELECT coalesce(sum(count), 0) FROM rlg_state")
	req "$@" "$url"
	after=$(row default "$want")
	total1=$(gsql "SELECT coalesce(sum(count), 0) FROM rlg_state")
	if [ "$STATUS" = 200 ] && [ "$after" = $((${before:-0} + 1)) ] &&
	    [ "$total1" = $((total0 + 1)) ]; then
		pass "$d: counted as $want"
	else
		fail "$d: counted as $want" "status $STATUS; row $want: '${before}' -> '${after}'" \
		    "rows now: $(gsql "SELECT client || '=' || count FROM rlg_state" | tr '\n' ' ')"
	fi
}

via 198.51.100.7 "X-Forwarded-For: 198.51.100.7 from trusted 127.0.0.1" \
    -H 'X-Forwarded-For: 198.51.100.7'
via 198.51.100.9 "X-Forwarded-For: 198.51.100.9, 127.0.0.1 (a trusted hop on the right is skipped)" \
    -H 'X-Forwarded-For: 198.51.100.9, 127.0.0.1'
via 198.51.100.9 "X-Forwarded-For: 203.0.113.66, 198.51.100.9 (what the client wrote on the left is ignored)" \
    -H 'X-Forwarded-For: 203.0.113.66, 198.51.100.9'
via 2001:db8:9:1::/64 "X-Forwarded-For: 2001:db8:9:1::77 (IPv6 grouped per /64)" \
    -H 'X-Forwarded-For: 2001:db8:9:1::77'
via 127.0.0.1 "Forwarded from trusted 127.0.0.1 with forwarded_header = x-forwarded-for (default): ignored" \
    -H 'Forwarded: for=198.51.100.21'
is "$(row default 198.51.100.21)" "" "no row for the address in the ignored Forwarded"
via 127.0.0.2 "from untrusted 127.0.0.2 with X-Forwarded-For: the header is ignored (a client cannot pick its key)" \
    --interface 127.0.0.2 -H 'X-Forwarded-For: 198.51.100.10'
is "$(row default 198.51.100.10)" "" "no row for the address an untrusted peer claimed"
# refused DESC CURL_ARGS...: one GET of the endpoint from the trusted
# peer: 400, no rate-limit header, and nothing counted under anyone (a
# malformed header never makes the client the proxy, whose key every
# client behind it shares).
refused() {
	local d=$1 total0 total1
	shift
	total0=$(gsql "SELECT coalesce(sum(count), 0) FROM rlg_state")
	req "$@" "$url"
	total1=$(gsql "SELECT coalesce(sum(count), 0) FROM rlg_state")
	if [ "$STATUS" = 400 ] && [ "$total1" = "$total0" ] &&
	    ! has_header RateLimit-Remaining; then
		pass "$d: 400, counted by nobody"
	else
		fail "$d: 400, counted by nobody" "status $STATUS; counts $total0 -> $total1"
	fi
}
refused "malformed X-Forwarded-For 'garbage, ,,'" \
    -H 'X-Forwarded-For: garbage, ,,'
refused "X-Forwarded-For '198.51.100.11, garbage': a bad hop where the walk starts" \
    -H 'X-Forwarded-For: 198.51.100.11, garbage'
is "$(row default 198.51.100.11)" "" "no row for the hop left of the bad one"
is "$(row default 127.0.0.1)" 1 "... nor for the peer (only the one request that named nobody else)"
big=$(printf '198.51.100.%d, ' $(seq 1 250) $(seq 1 250) $(seq 1 250) | head -c 10230)
big="${big%, *}, 198.51.100.99"
[ ${#big} -gt 9000 ] || bail_out "the big header is only ${#big} bytes"
refused "a ${#big}-byte X-Forwarded-For (over 8 KiB)" \
    -H "X-Forwarded-For: $big"
is "$(row default 198.51.100.99)" "" "no row for the oversized header's last hop"
rlgate_pids_alive identity
ok $? "rlgate survived the malformed and oversized headers"
is "$(grep -c 'event=reject' "$T/identity.log" | tr -d ' ')" 0 "identity: nothing rejected"
like "$(grep -m1 'event=bad_request' "$T/identity.log")" 'event=bad_request peer=127\.0\.0\.1 reason=bad_forwarded header=X-Forwarded-For suppressed=0$' \
    "identity: the first refused request logged as event=bad_request, by the peer's address"

write_store_conf identity_fwd <<EOF
[client]
trusted_proxies = 127.0.0.1/32
forwarded_header = forwarded

[policy default]
limit = 100
window = $WINDOW
EOF
use_rlgate identity_fwd
via 198.51.100.8 "forwarded_header = forwarded: Forwarded: for=198.51.100.8" \
    -H 'Forwarded: for=198.51.100.8'
via 2001:db8:1:2::/64 'Forwarded: for="[2001:db8:1:2::5]:4711" (IPv6 grouped per /64)' \
    -H 'Forwarded: for="[2001:db8:1:2::5]:4711"'
via 2001:db8:1:2::/64 'Forwarded: for="[2001:db8:1:2:ffff::9]" (the same /64, the same key)' \
    -H 'Forwarded: for="[2001:db8:1:2:ffff::9]"'
via 198.51.100.30 "Forwarded: for=198.51.100.30;proto=http, for=127.0.0.1 (a trusted hop on the right is skipped)" \
    -H 'Forwarded: for=198.51.100.30;proto=http, for=127.0.0.1'
via unknown "Forwarded: for=unknown: the proxy hides the client: the shared key unknown, never the proxy's" \
    -H 'Forwarded: for=unknown'
via 127.0.0.1 "forwarded_header = forwarded: X-Forwarded-For is ignored" \
    -H 'X-Forwarded-For: 198.51.100.22'
is "$(row default 198.51.100.22)" "" "no row for the address in the ignored X-Forwarded-For"
via 127.0.0.2 "Forwarded from untrusted 127.0.0.2: ignored" \
    --interface 127.0.0.2 -H 'Forwarded: for=198.51.100.23'
rlgate_pids_alive identity_fwd
ok $? "rlgate survived the Forwarded headers"

# ---- 3. API keys --------------------------------------------------------------------

KEY_A=secret-key-value-A
KEY_B=secret-key-value-B
write_store_conf keys <<EOF
[client]
key_secret = 0123456789abcdef0123

[policy perkey]
limit = 2
window = $WINDOW
key = header:X-API-Key

[policy combo]
limit = 100
window = $WINDOW
key = ip, header:X-API-Key
EOF
use_rlgate keys

is "$(seq_codes 3 -H "X-API-Key: $KEY_A" "$url")" "200:1 200:0 429:0" "key A: its own 2, then 429"
is "$(seq_codes 3 -H "X-API-Key: $KEY_B" "$url")" "200:1 200:0 429:0" "key B from the same address: its own 2, then 429"
req --interface 127.0.0.2 -H "X-API-Key: $KEY_A" "$url"
is "$STATUS" 429 "key A from another address: still 429 (key = header: counts the key, not the address)"
is "$(seq_codes 3 "$url")" "200:1 200:0 429:0" "no X-API-Key from 127.0.0.1: counted under its IP key, 2 then 429"
req --interface 127.0.0.12 -H 'X-API-Key;' "$url"
is "$STATUS" 200 "an empty X-API-Key: 200"
is "$(rows_of 127.0.0.12)" "combo:1 perkey:1" "an empty X-API-Key falls back to the IP key 127.0.0.12"

perkey=$(gsql "SELECT client FROM rlg_state WHERE policy = 'perkey' AND client LIKE 'k:%' ORDER BY client")
is "$(printf '%s\n' "$perkey" | grep -cE '^k:[0-9a-f]{32}$')" 2 "perkey: two rows keyed k: + 32 hex digits"
is "$(row perkey 127.0.0.1)" 2 "perkey: the header-less requests: row 127.0.0.1 = 2"
for h in $perkey; do
	is "$(row perkey "$h")" 2 "perkey: $h = 2"
done
combo=$(gsql "SELECT client FROM rlg_state WHERE policy = 'combo' AND client LIKE '127.0.0.1|k:%' ORDER BY client")
is "$(printf '%s\n' "$combo" | grep -cE '^127\.0\.0\.1\|k:[0-9a-f]{32}$')" 2 "combo (key = ip, header:X-API-Key): two rows 127.0.0.1|k:HEX"
is "$(printf '%s\n' "$combo" | sed 's/^127\.0\.0\.1|//')" "$perkey" "combo: the same hashes as perkey, behind the address"
is "$(row combo 127.0.0.1)" 2 "combo: the header-less requests: row 127.0.0.1 = 2"
is "$(rows_of 127.0.0.2)" "" "combo: key A from 127.0.0.2 was rejected by perkey: no row written"
flush_table "$T/$CUR.conf"
is "$(sqlite3 "$DB" .dump | grep -c secret-key-value)" 0 "sqlite3 .dump holds no raw key"
is "$(cat "$DB" "$DB-wal" "$DB-journal" 2>/dev/null | grep -ac secret-key-value)" 0 "the .db and -wal files hold no raw key"
[ -f "$DB-table" ]
ok $? "the keys were decided in the decision table ($DB-table)"
is "$(grep -ac secret-key-value "$DB-table")" 0 "the decision table holds no raw key"
is "$(grep -c secret-key-value "$T/keys.log")" 0 "the log holds no raw key"
check_reject_lines keys reject 1 127.0.0.1 - perkey "keys log: the header-less 429 names the IP key"
n=0
for h in $perkey; do
	m=$(log_events keys reject | while IFS= read -r line; do [ "$(kv "$line" client)" = "$h" ] && echo x; done | wc -l)
	n=$((n + m))
done
is "$n" 3 "keys log: the 3 rejections of keys A and B name their k:HEX client"
is "$(log_events keys reject | wc -l)" "$(n429)" "keys log: one event=reject line per 429"

# ---- 4. exemptions -------------------------------------------------------------------

exempt_conf() {
	write_store_conf "$1" <<EOF
[headers]
report_exempt = $2

[client]
exempt = 127.0.0.3

[policy default]
limit = 2
window = $WINDOW
exempt = 127.0.0.4

[policy other]
limit = 3
window = $WINDOW
EOF
}
exempt_conf exempt no
use_rlgate exempt

is "$(seq_codes 5 --interface 127.0.0.3 "$url")" "200:- 200:- 200:- 200:- 200:-" \
    "report_exempt = no: [client] exempt 127.0.0.3: 5 x 200, no RateLimit-Remaining"
has_header RateLimit-Limit || has_header RateLimit-Reset
ok $((! $?)) "report_exempt = no: no RateLimit-Limit or RateLimit-Reset for 127.0.0.3"
is "$(rows_of 127.0.0.3)" "" "report_exempt = no: 127.0.0.3 is not counted (no row)"
is "$(seq_codes 4 --interface 127.0.0.4 "$url")" "200:2 200:1 200:0 429:0" \
    "policy exempt 127.0.0.4: only 'other' (3) limits it"
is "$(header RateLimit-Limit)" 3 "policy exempt 127.0.0.4: RateLimit-Limit 3 (other's)"
is "$(rows_of 127.0.0.4)" "other:3" "policy exempt 127.0.0.4: no row under default"
is "$(seq_codes 3 "$url")" "200:1 200:0 429:0" "127.0.0.1 (not exempt): default's 2, then 429"
check_reject_lines exempt reject 1 127.0.0.4 - other "exempt log"
check_reject_lines exempt reject 1 127.0.0.1 - default "exempt log"
is "$(grep -c 'event=' "$T/exempt.log" | tr -d ' ')" 2 "exempt log: nothing about 127.0.0.3"

exempt_conf exempt_report yes
use_rlgate exempt_report
codes=$(seq_codes 5 --interface 127.0.0.3 "$url")
is "$codes" "200:1 200:0 200:0 200:0 200:0" \
    "report_exempt = yes: 127.0.0.3: Remaining 1, 0, then 0 and still 200"
is "$(header RateLimit-Limit)" 2 "report_exempt = yes: RateLimit-Limit reported (default's 2)"
between "$(header RateLimit-Reset)" 1 $WINDOW "report_exempt = yes: RateLimit-Reset reported"
has_header Retry-After
ok $((! $?)) "report_exempt = yes: no Retry-After on the 200s"
is "$(rows_of 127.0.0.3)" "default:2 other:3" \
    "report_exempt = yes: counted (default 2: the would-be rejections use no quota; other 3, then it too would reject)"
is "$(seq_codes 4 --interface 127.0.0.4 "$url")" "200:1 200:0 200:0 429:0" \
    "report_exempt = yes: 127.0.0.4: default reported (Remaining 1, 0) but never refuses; other rejects the 4th"
is "$(rows_of 127.0.0.4)" "default:2 other:3" "report_exempt = yes: 127.0.0.4 counted under both"
check_reject_lines exempt_report reject 0 127.0.0.3 - default "report_exempt = yes log: the exempt client is never rejected"
check_reject_lines exempt_report reject 1 127.0.0.4 - other "report_exempt = yes log"
diag "report_exempt = yes: lines logged for exempt 127.0.0.3:" \
    "$(grep 'client=127.0.0.3 ' "$T/exempt_report.log" || echo '(none)')"

# ---- 5. dry run ---------------------------------------------------------------------

write_store_conf dry <<EOF
[policy trial]
mode = dry_run
limit = 2
window = $WINDOW
EOF
use_rlgate dry
is "$(seq_codes 5 "$url")" "200:- 200:- 200:- 200:- 200:-" \
    "dry_run trial (limit 2): 5 x 200, and no RateLimit-Remaining (a trial never shows)"
has_header Retry-After
ok $((! $?)) "dry_run: no Retry-After"
is "$(row trial 127.0.0.1)" 2 "dry_run: the would-be rejections use no quota (count 2)"
check_reject_lines dry dry_run_reject 3 127.0.0.1 - trial "dry_run log"
is "$(grep -c 'event=reject' "$T/dry.log" | tr -d ' ')" 0 "dry_run log: no event=reject"

write_store_conf dry2 <<EOF
[response]
errors = problem

[policy trial]
mode = dry_run
limit = 2
window = $WINDOW

[policy hard]
limit = 3
window = $WINDOW
EOF
use_rlgate dry2
is "$(seq_codes 5 "$url")" "200:2 200:1 200:0 429:0 429:0" \
    "dry_run beside enforcing hard (limit 3): the headers are hard's alone; hard rejects the 4th and 5th"
is "$(header RateLimit-Limit)" 3 "dry_run beside hard: the 429's RateLimit-Limit is hard's 3 (a dry_run policy never shows as the rejecting one)"
like "$(last_body)" '"violated-policies":\["hard"\]\}$' "dry_run beside hard: the 429's problem+json names only hard as violated"
is "$(rows_of 127.0.0.1)" "hard:3 trial:2" "dry_run beside hard: rows hard 3, trial 2"
check_reject_lines dry2 reject 2 127.0.0.1 - hard "dry_run beside hard log"
check_reject_lines dry2 dry_run_reject 3 127.0.0.1 - trial "dry_run beside hard log"

# ---- 6b. [log] level = error ------------------------------------------------------------

write_store_conf quiet <<EOF
[log]
level = error

[policy default]
limit = 1
window = $WINDOW
EOF
use_rlgate quiet
is "$(seq_codes 3 "$url" | sed 's/:[0-9-]*//g')" "200 429 429" "level = error: 200, then 429s"
is "$(grep -c 'event=' "$T/quiet.log" | tr -d ' ')" 0 "level = error: no event= line for the rejections"
rlgate_pids_alive quiet
ok $? "rlgate still runs"

# ---- 6c. the rejection cache and the log ----------------------------------------------
# With the cache on, a repeat 429 answered from memory is the decision
# already logged when the store took it: at level warn one line per worker
# thread that went to the store (2 processes x 2 threads: at most 4) for
# 20 rejections, at level info one per 429. The cache stands in front of a
# store that commits each decision (commit = each): the decision table
# answers repeats itself and has none.
for level in warn info; do
	CACHE=4096 write_store_conf "cached-$level" <<EOF
commit = each

[log]
level = $level

[policy default]
limit = 1
window = $WINDOW
EOF
	use_rlgate "cached-$level"
	codes=$(seq_codes 21 "$url" | sed 's/:[0-9-]*//g')
	is "$codes" "200$(printf ' 429%.0s' $(seq 1 20))" "cache, level $level: 200, then 20 429s"
	lines=$(grep -c 'event=reject' "$T/cached-$level.log" | tr -d ' ')
	commit_lines=$(grep -cE "^${LOG_RE}commit = " "$T/cached-$level.log" | tr -d ' ')
	if [ "$level" = warn ]; then
		between "$lines" 1 4 "cache, level warn: 1 to 4 event=reject lines for 20 429s (got $lines)"
		is "$commit_lines" 0 "level warn: no line about the commit at start"
	else
		is "$lines" 20 "cache, level info: one event=reject line per 429"
		is "$(grep -cE "^${LOG_RE}commit = each: one SQLite transaction per decision\$" "$T/cached-$level.log" | tr -d ' ')" 2 \
		    "level info: each process says at start that commit = each applies"
	fi
done
rlgate_pids_alive cached-info
ok $? "rlgate still runs"

# ---- 6d. level = info: which commit auto chose, and why -------------------------------
write_store_conf info-behind <<EOF
[log]
level = info
EOF
use_rlgate info-behind
is "$(grep -cE "^${LOG_RE}commit = behind \(auto\): decided in $DB-table, written to the database every 1000 ms\$" "$T/info-behind.log" | tr -d ' ')" 2 \
    "level info, no commit set: each process says commit = behind (auto) at start"
write_store_conf info-each <<EOF
[log]
level = info

[policy strict]
algorithm = sliding_log
limit = 5
window = $WINDOW
EOF
use_rlgate info-each
is "$(grep -cE "^${LOG_RE}commit = each \(auto: \[policy strict\] is a sliding_log, whose log lives in the database\): one SQLite transaction per decision\$" "$T/info-each.log" | tr -d ' ')" 2 \
    "level info, a sliding_log policy: each process says commit = each (auto) and why"
[ -e "$DB-table" ]
ok $((! $?)) "... and no decision table is made"

# ---- 6e. every log line starts with its time -----------------------------------------
is "$(grep -cvE "^${LOG_RE}" "$T/info-behind.log" "$T/cached-info.log" | awk -F: '{ s += $2 } END { print s }')" 0 \
    "every log line starts with the time (RFC 3339, UTC, milliseconds: 2026-12-03T23:15:08.123Z), then rlgate[PID]: "
first=$(head -1 "$T/info-behind.log" | cut -d' ' -f1)
age=$(( $(date -u +%s) - $(date -u -d "$(printf '%s' "$first" | tr T ' ' | tr -d Z)" +%s) ))
between "$age" 0 900 "the first line's time ($first) is UTC and of this run"

# ---- 6f. [log] format = json ----------------------------------------------------------
write_store_conf json <<EOF
[log]
format = json

[policy default]
limit = 1
window = $WINDOW
EOF
use_rlgate json
req "$url?a=1"
req "$url?a=2"
is "$STATUS" 429 "format = json: the 2nd request is rejected"
jre='^\{"time":"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z","pid":[0-9]+,"(message|event)":"[^"]*"(,"[a-z_]+":("[^"]*"|[0-9]+))*\}$'
is "$(grep -cvE "$jre" "$T/json.log")" 0 \
    "format = json: every line is one JSON object, time and pid first"
like "$(grep '"event":"reject"' "$T/json.log")" \
    '"client":"127\.0\.0\.1","route":"-","policy":"default","retry_after_s":[0-9]+,"method":"GET","path":"/api/v1/resources"\}$' \
    "format = json: the rejection's pairs as members, the path without its query"
like "$(head -1 "$T/json.log")" '"message":"rlgate [0-9.]+ serving FastCGI' \
    "format = json: the start-up line as a message"

done_testing
