#!/usr/bin/env bash
# apache.sh: rlgate behind Apache 2.4 (mod_proxy_fcgi, the shipped
# www/apache/rlgate.conf) and spawn-fcgi: the 200 -> 429 sequence with its
# headers, 404, 405, HEAD, query strings, distinct clients. Apache starts as
# root and serves as User/Group daemon, as it is usually deployed.
: "${RLGATE_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/integration/lib.sh
. "$RLGATE_SRCDIR/tests/integration/lib.sh" || { echo "Bail out! cannot read lib.sh"; exit 99; }

apache_available || skip_all "Apache 2.4 with mod_proxy_fcgi is not installed ($APACHE_BIN)"
setup_test spawn-fcgi sqlite3 curl openssl
timing_sensitive

make_rundir

LIMIT=5
WINDOW=2
conf="$T/rlgate.conf"
write_rlgate_conf "$conf" "$run/rlgate.db" $LIMIT $WINDOW
start_rlgate_fcgi rlgate "$sock" "$conf" 2 --threads 2

shipped_apache "$sock"
base=$AP
url="$base/api/v1/resources"

# --- 200 x LIMIT then 429, a query string, a distinct client: sent within
# one window, checked afterwards
# shellcheck disable=SC2317  # called through in_one_window
first_window() {
	local i
	local -a c2=()
	keep_many 127.0.0.1 r1 "$url" r2 "$url?x=1" r3 "$url" r4 "$url" r5 "$url" \
	    r6 "$url" r7 "$url?x=2"
	for i in $(seq 1 $((LIMIT + 1))); do
		c2+=("c2-$i")
	done
	keep_burst 127.0.0.2 "${c2[@]}"
}
in_one_window $WINDOW first_window
ok $? "the first $((2 * LIMIT + 3)) requests fit in one $WINDOW s window"
check_first_window $LIMIT $WINDOW
is "$(codes $(seq -f 'c2-%g' 1 $((LIMIT + 1))))" "200:4 200:3 200:2 200:1 200:0 429:0" \
    "client 127.0.0.2 gets its own $LIMIT"

# --- HEAD
hreq --interface 127.0.0.8 "$url"
is "$STATUS" 200 "HEAD: 200"
is "$(header RateLimit-Remaining)" $((LIMIT - 1)) "HEAD: RateLimit-Remaining $((LIMIT - 1))"

# --- 404, 405
check_404_405

# --- the window resets
wait_for_window_start $WINDOW
req "$url"
is "$STATUS" 200 "after the window: 200 again"
is "$(header RateLimit-Remaining)" $((LIMIT - 1)) "after the window: RateLimit-Remaining $((LIMIT - 1))"
between "$(header RateLimit-Reset)" 1 $WINDOW "after the window: RateLimit-Reset in 1..$WINDOW"

# --- Apache really served as the unprivileged user, through the socket
# the uids of Apache's children, from /proc (no procps needed)
daemon_uid=$(id -u daemon)
workers=
for st in /proc/[0-9]*/status; do
	ppid=$(awk '$1 == "PPid:" { print $2 }' "$st" 2>/dev/null)
	[ "$ppid" = "$APACHE_PID" ] || continue
	workers="$workers $(awk '$1 == "Uid:" { print $2 }' "$st" 2>/dev/null)"
done
like "$workers" " $daemon_uid( |\$)" "Apache's workers run as daemon (uid $daemon_uid) and reached the socket"
is "$(sql_flushed "$conf" "$run/rlgate.db" "SELECT count FROM rlg_state WHERE client = '127.0.0.1'")" 1 \
    "rlg_state holds 127.0.0.1's count in this window"

# --- a bearer token reaches rlgate (the snippet's CGIPassAuth): key =
# jwt:sub, 1 an hour; alice's token from two addresses is one client
stop_rlgate_fcgi rlgate
secret=0123456789abcdef0123456789abcdef-apache
printf '%s\n' "$secret" >"$T/jwt.secret"
chmod 600 "$T/jwt.secret"
cat >"$T/jwt.conf" <<EOF
[store]
path = $run/jwt.db
[client]
key_secret = 00112233445566778899aabbccddeeff
jwt_key = $T/jwt.secret
[policy default]
limit = 1
window = 3600
key = jwt:sub
EOF
check_conf jwt
start_rlgate_fcgi jwt "$sock" "$T/jwt.conf" 1 --threads 2
b64u() { openssl base64 -A | tr '+/' '-_' | tr -d '='; }
h=$(printf '{"alg":"HS256","typ":"JWT"}' | b64u)
p=$(printf '{"sub":"alice"}' | b64u)
tok="$h.$p.$(printf '%s.%s' "$h" "$p" | openssl dgst -sha256 -hmac "$secret" -binary | b64u)"
req --interface 127.0.0.11 -H "Authorization: Bearer $tok" "$url"
first=$STATUS
req --interface 127.0.0.12 -H "Authorization: Bearer $tok" "$url"
is "$first $STATUS" "200 429" "Apache hands rlgate the bearer token: alice from two addresses is one client"

done_testing
