#!/usr/bin/env bash
# keys.sh: policies keyed by what the client sends besides its address,
# through lighttpd and rlgate (responder): key = cookie:NAME, query:NAME
# and global. A hostile client tries every spelling of one value to get a
# fresh bucket, and names the key twice to choose which one counts:
#   1. cookie:sid: one value is one bucket whatever its spelling (quotes,
#      %XX, spaces, the name's case) and whichever address sends it; the
#      name twice (sid and SID, two Cookie headers) is refused (400) and
#      counts nothing; no cookie keys by the address;
#   2. query:key: the same for a query parameter (Key, k%65y, %61lice,
#      '+' for a space); key twice is refused (400), logged as
#      reason=duplicate_param;
#   3. global: one bucket for every client;
#   4. jwt:sub: a bearer token verified with [client] jwt_key (HS256, then
#      RS256, tokens made with openssl as an issuer would) keys by its
#      claim; a forged, expired, not yet valid, alg "none" or alg-confused
#      token keys by the address, is logged (event=bad_token) and counted
#      (rlgate_bad_tokens_total);
#   5. the database holds hashes (k:...) and "*", never a value sent.
: "${RLGATE_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/integration/lib.sh
. "$RLGATE_SRCDIR/tests/integration/lib.sh" || { echo "Bail out! cannot read lib.sh"; exit 99; }

setup_test lighttpd spawn-fcgi sqlite3 curl openssl

make_rundir
WINDOW=3600
SECRET=00112233445566778899aabbccddeeff

# use KEY LIMIT [CLIENT_LINES]: rlgate restarted on a config of its own
# whose default policy is keyed by KEY, LIMIT per hour; CLIENT_LINES go
# into [client].
use() {
	local name=${1%%:*}
	write_store_conf "$name" <<EOF
[client]
key_secret = $SECRET
${3:-}

[headers]
style = draft03

[policy default]
algorithm = fixed_window
limit = $2
window = $WINDOW
key = $1
EOF
	restart_rlgate "$name" 30
	req "$base/rlgate/status"
	like "$BODY" "\"key\":\"$1\"" "$1: /status names the key"
}

# st [CURL_ARGS...]: the status of one request (to $url unless a URL is
# among the arguments).
st() {
	local a u=$url
	for a in "$@"; do
		case $a in http://*) u=;; esac
	done
	req "$@" ${u:+"$u"}
	printf '%s' "$STATUS"
}

demo_lighttpd

# ---- 1. cookie:sid --------------------------------------------------------

use cookie:sid 2
is "$(st -H 'Cookie: sid=alice') $(st -H 'Cookie: theme=dark; sid=alice')" \
    "200 200" "cookie: a value's quota"
is "$(st -H 'Cookie: sid=alice')" 429 "cookie: the third is refused"
is "$(st -H 'Cookie: sid="alice"') $(st -H 'Cookie: sid=%61lice') $(st -H 'Cookie:  SID = alice ')" \
    "429 429 429" "cookie: quotes, %XX, spaces and the name's case are the same value"
is "$(st --interface 127.0.0.3 -H 'Cookie: sid=alice')" 429 \
    "cookie: the same value from another address, the same bucket"
is "$(st -H 'Cookie: sid=bob')" 200 "cookie: another value, another bucket"
is "$(st -H 'Cookie: sid=carol; SID=dave')" 400 "cookie: the name twice is refused"
is "$(st -H 'Cookie: sid=carol' -H 'Cookie: sid=dave')" 400 \
    "cookie: two Cookie headers naming it are refused"
is "$(st -H 'Cookie: sid=carol') $(st -H 'Cookie: sid=carol') $(st -H 'Cookie: sid=carol')" \
    "200 200 429" "cookie: a refused request counted nothing"
is "$(st) $(st) $(st)" "200 200 429" "cookie: none, the address keys it"
like "$(grep -c 'reason=duplicate_header header=Cookie' "$T/cookie.log")" '^[1-9]' \
    "cookie: the refusal is logged"

# ---- 2. query:key -----------------------------------------------------------

use query:key 2
q="$base/api/v1/resources"
is "$(st "$q?key=alice") $(st "$q?x=1&key=alice&y=2")" "200 200" \
    "query: a value's quota"
is "$(st "$q?key=alice") $(st "$q?Key=alice") $(st "$q?k%65y=%61lice")" \
    "429 429 429" "query: the name's case and %XX are the same parameter"
is "$(st "$q?key=a+b") $(st "$q?key=a%20b") $(st "$q?key=a%20b")" \
    "200 200 429" "query: '+' is a space"
is "$(st "$q?key=carol&key=dave") $(st "$q?key=carol&Key=carol") $(st "$q?key=carol&k%65y=x")" \
    "400 400 400" "query: the name twice is refused, whatever its spelling"
is "$(st "$q?key=carol") $(st "$q?key=carol") $(st "$q?key=carol")" \
    "200 200 429" "query: a refused request counted nothing"
is "$(st "$q?keys=erin") $(st "$q?key=") $(st "$q")" "200 200 429" \
    "query: another name, an empty value, none: the address keys it"
like "$(grep -c 'reason=duplicate_param header=key' "$T/query.log")" '^[1-9]' \
    "query: the refusal is logged as a parameter twice"

# ---- 3. global --------------------------------------------------------------

use global 3
is "$(st) $(st --interface 127.0.0.3) $(st --interface 127.0.0.4 -H 'Cookie: sid=z')" \
    "200 200 200" "global: three clients share the quota"
req --interface 127.0.0.5 "$url"
is "$STATUS" 429 "global: a fourth client is refused"
like "$HDRS" 'RateLimit-Remaining: 0' "global: the refusal shows the shared quota"

# ---- 4. jwt:sub ------------------------------------------------------------

# b64u: stdin as base64url without padding.
b64u() { openssl base64 -A | tr '+/' '-_' | tr -d '='; }
# jwt HEADER PAYLOAD hs256|rs256: a token as an issuer makes it.
jwt() {
	local h p s
	h=$(printf '%s' "$1" | b64u)
	p=$(printf '%s' "$2" | b64u)
	case $3 in
	hs256) s=$(printf '%s.%s' "$h" "$p" |
	    openssl dgst -sha256 -hmac "$JWT_SECRET" -binary | b64u) ;;
	rs256) s=$(printf '%s.%s' "$h" "$p" |
	    openssl dgst -sha256 -sign "$T/rsa.pem" -binary | b64u) ;;
	none) s= ;;
	esac
	printf '%s.%s.%s' "$h" "$p" "$s"
}
HS='{"alg":"HS256","typ":"JWT"}'
RS='{"alg":"RS256","typ":"JWT"}'
NOW=$(date +%s)
JWT_SECRET=$(openssl rand -hex 32)
printf '%s\n' "$JWT_SECRET" >"$T/jwt.secret"
chmod 600 "$T/jwt.secret"
# bt TOKEN [CURL_ARGS...]: the status of a request with that bearer token
bt() { local tok=$1; shift; st "$@" -H "Authorization: Bearer $tok"; }

use jwt:sub 2 "jwt_key = $T/jwt.secret"
alice=$(jwt "$HS" "{\"sub\":\"alice\",\"exp\":$((NOW + 3600))}" hs256)
is "$(bt "$alice") $(bt "$alice" --interface 127.0.0.3) $(bt "$alice" --interface 127.0.0.4)" \
    "200 200 429" "jwt: alice's quota, from any address"
bob=$(jwt "$HS" '{"sub":"bob"}' hs256)
is "$(bt "$bob")" 200 "jwt: bob's own quota (no exp)"
JWT_SECRET_REAL=$JWT_SECRET
JWT_SECRET=$(openssl rand -hex 32)
forged=$(jwt "$HS" '{"sub":"bob"}' hs256)
JWT_SECRET=$JWT_SECRET_REAL
expired=$(jwt "$HS" "{\"sub\":\"bob\",\"exp\":$((NOW - 60))}" hs256)
early=$(jwt "$HS" "{\"sub\":\"bob\",\"nbf\":$((NOW + 3600))}" hs256)
none=$(jwt '{"alg":"none"}' '{"sub":"bob"}' none)
is "$(bt "$forged" --interface 127.0.0.5) $(bt "$expired" --interface 127.0.0.5) $(bt "$early" --interface 127.0.0.5) $(bt "$none" --interface 127.0.0.6)" \
    "200 200 429 200" \
    "jwt: forged, expired, early and alg none tokens key by the address (limit 2 each), never as bob"
is "$(bt "$bob")" 200 "jwt: bob's quota untouched by them"
wait_until 3000 grep -q 'event=bad_token' "$T/jwt.log"
like "$(grep -o 'event=bad_token peer=127.0.0.5 reason=[a-z_]*' "$T/jwt.log" | head -1)" \
    'reason=invalid' "jwt: the forged token is logged, the token itself never"
unlike "$(cat "$T/jwt.log")" "$forged" "jwt: no token in the log"
req "$base/rlgate/metrics"
like "$BODY" 'rlgate_bad_tokens_total\{reason="invalid"\} [1-9]' "jwt: counted: invalid"
like "$BODY" 'rlgate_bad_tokens_total\{reason="expired"\} [1-9]' "jwt: counted: expired"
like "$BODY" 'rlgate_bad_tokens_total\{reason="not_yet_valid"\} [1-9]' "jwt: counted: not yet valid"

# RS256: the issuer's public key; an HS256 token "signed" with it refused
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$T/rsa.pem" 2>/dev/null
openssl pkey -in "$T/rsa.pem" -pubout -out "$T/rsa.pub" 2>/dev/null
chmod 600 "$T/rsa.pub"
use jwt:sub 1 "jwt_key = $T/rsa.pub
jwt_algorithm = RS256"
carol=$(jwt "$RS" '{"sub":"carol"}' rs256)
is "$(bt "$carol") $(bt "$carol" --interface 127.0.0.3)" "200 429" "jwt RS256: carol's quota"
JWT_SECRET=$(cat "$T/rsa.pub"; printf x)
JWT_SECRET=${JWT_SECRET%x}     # the file's bytes, its newline too
confused=$(jwt "$HS" '{"sub":"carol"}' hs256)
JWT_SECRET=$JWT_SECRET_REAL
is "$(bt "$confused" --interface 127.0.0.7)" 200 \
    "jwt RS256: an HS256 token keyed with the public key is not carol's"
wait_until 3000 grep -q 'reason=algorithm' "$T/jwt.log"
like "$(grep -c 'event=bad_token peer=127.0.0.7 reason=algorithm' "$T/jwt.log")" '^[1-9]' \
    "jwt RS256: logged as the wrong algorithm"

# ---- 5. what the database holds ---------------------------------------------

stop_rlgate_fcgi jwt
CUR=
for n in cookie query global jwt; do
	rows=$(sql "$T/$n.db" "SELECT client FROM rlg_state ORDER BY 1" | tr '\n' ' ')
	unlike "$rows" 'alice|bob|carol|dave|erin' "$n: no value sent is stored ($rows)"
done
like "$(sql "$T/cookie.db" "SELECT client FROM rlg_state WHERE client LIKE 'k:%'" | head -1)" \
    '^k:[0-9a-f]{32}$' "cookie: a hash is stored"
is "$(sql "$T/global.db" "SELECT client || '=' || count FROM rlg_state")" "*=3" \
    "global: one row, client *"

done_testing
