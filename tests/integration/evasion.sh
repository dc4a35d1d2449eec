#!/usr/bin/env bash
# evasion.sh: a hostile client tries to get around its limit, through real
# front proxies and real Authorizer fronts. Each part reproduces a way
# around the quota that an earlier rlgate allowed, and checks it is shut:
#   1. look-alike headers: behind a trusted front proxy (Apache mod_proxy,
#      lighttpd mod_proxy) the client's X_Forwarded_For or X_API_Key
#      reaches rlgate beside the header the proxy set, under the same
#      parameter name; rlgate refuses the request (400), never picks one;
#   2. malformed forwarding headers: an unterminated Forwarded quote that
#      swallows the element the proxy appends, an X-Forwarded-For over
#      8 KiB; refused (400), never counted as the (exempt) proxy;
#   3. paths in the Authorizer role (lighttpd and Apache): routes match the
#      path the server serves (dot segments, repeated slashes, %2e), an
#      encoded '/' and an unreadable path are refused; GET routes take HEAD;
#      a route's spellings that backends serve as its resource (case, a
#      trailing slash, ;params, %3B) count under it, exact and prefix
#      routes alike, and "..;" is refused;
#   4. dry run: a dry_run policy never shows in the client's headers;
#   5. a key flood: one address minting API keys cannot fill the store and
#      lock every new client out (new_keys_per_ip).
# The database is read once the decision table (commit = behind, the
# default) is flushed to it (esql).
# Topology: client (127.0.0.x) -> front proxy on 127.0.0.1 -> backend
# lighttpd -> spawn-fcgi -> rlgate, whose peer is the front (127.0.0.1, a
# trusted proxy); or client -> lighttpd/Apache -> rlgate as Authorizer.
: "${RLGATE_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/integration/lib.sh
. "$RLGATE_SRCDIR/tests/integration/lib.sh" || { echo "Bail out! cannot read lib.sh"; exit 99; }

setup_test lighttpd spawn-fcgi sqlite3 curl

make_rundir
# every policy here counts in windows of an hour
WINDOW=3600

# use_conf NAME: write_store_conf NAME (its own database, the rejection
# cache off, the rest from stdin), then restart_rlgate on it, waiting for
# a fresh window when less than 30 s are left in this one.
use_conf() {
	write_store_conf "$1"
	restart_rlgate "$1" 30
}

# esql QUERY: QUERY on $DB once the decision table (commit = behind, the
# default) of its config is flushed to it: $DBCONF, else the running
# rlgate's.
DBCONF=
esql() {
	sql_flushed "${DBCONF:-$T/$CUR.conf}" "$DB" "$1"
}

# rows: every rlg_state row as "policy/client=count", sorted.
rows() {
	esql "SELECT policy || '/' || client || '=' || count FROM rlg_state ORDER BY 1" |
	    tr '\n' ' ' | sed 's/ $//'
}

# times N WORD: "WORD WORD ..." (N times).
times() {
	local out=
	for _ in $(seq 1 "$1"); do out="$out $2"; done
	printf '%s' "${out# }"
}

# ---- the backend: lighttpd + rlgate (responder), a 64 KiB header limit ----

BE_PORT=$(free_port) || bail_out "no free port"
write_lighttpd_demo_conf "$T/backend.conf" "$BE_PORT" "$run" "$sock"
echo 'server.max-request-field-size := 65536' >>"$T/backend.conf"

# ---- the fronts: lighttpd mod_proxy (X-Forwarded-For and, with
# proxy.forwarded, Forwarded: for=), Apache mod_proxy_http (X-Forwarded-For)

LF_PORT=$(free_port) || bail_out "no free port"
use_conf lookalike <<EOF
[client]
trusted_proxies = 127.0.0.1
exempt = 127.0.0.1, 198.51.100.1
key_secret = 00112233445566778899aabbccddeeff

[policy by_ip]
limit = 3
window = $WINDOW
key = ip

[policy by_key]
limit = 3
window = $WINDOW
key = header:X-API-Key
EOF
start_lighttpd "$T/backend.conf" "$BE_PORT"
start_lighttpd_front "$T/lfront" "$LF_PORT" "$BE_PORT" <<'EOF'
proxy.forwarded      = ( "for" => 1 )
server.max-request-field-size = 65536
EOF
FRONTS="lighttpd=http://127.0.0.1:$LF_PORT"
if apache_available && [ -f "$APACHE_MODULES/mod_proxy_http.so" ]; then
	AF_PORT=$(free_port) || bail_out "no free port"
	write_apache_conf "$T/afront/httpd.conf" "$AF_PORT" "$T/afront" \
	    "$(_apache_module proxy_http)
ProxyPass / http://127.0.0.1:$BE_PORT/
ProxyPassReverse / http://127.0.0.1:$BE_PORT/"
	start_apache "$T/afront/httpd.conf" "$AF_PORT"
	FRONTS="$FRONTS apache=http://127.0.0.1:$AF_PORT"
else
	diag "Apache with mod_proxy_http is not installed: the Apache front is skipped"
fi

# ---- 1. look-alike headers ---------------------------------------------------

n=0
for f in $FRONTS; do
	name=${f%%=*}
	base=${f#*=}/api/v1/resources
	n=$((n + 1))
	c=127.0.0.$((10 + n))           # this front's honest client
	# X_Forwarded_For: a fresh address each time, a victim's, an exempt one
	got=
	for spoof in 203.0.113.1 203.0.113.2 203.0.113.3 203.0.113.4 198.51.100.1; do
		req --interface "$c" -H "X_Forwarded_For: $spoof" "$base"
		got="$got $STATUS"
	done
	is "${got# }" "$(times 5 400)" \
	    "$name front: X_Forwarded_For beside the proxy's X-Forwarded-For (fresh, exempt addresses): 5 x 400"
	req --interface "$c" -H "x-forwarded_for: 203.0.113.9" "$base"
	is "$STATUS" 400 "$name front: x-forwarded_for (another spelling): 400"
	like "$BODY" "$(re_err 400)" "$name front: the JSON 400 body"
	has_header RateLimit-Remaining
	ok $((! $?)) "$name front: no rate-limit header on the 400"
	# an API key look-alike, sent before the real one
	got=
	for i in 1 2 3 4 5; do
		req --interface "$c" -H "X_API_Key: victim-$i" -H "X-API-Key: mine-$n" "$base"
		got="$got $STATUS"
	done
	is "${got# }" "$(times 5 400)" "$name front: X_API_Key beside X-API-Key: 5 x 400"
	is "$(esql "SELECT count(*) FROM rlg_state WHERE client LIKE '203.0.113.%' OR client = '198.51.100.1'")" 0 \
	    "$name front: no row for any spoofed address"
	is "$(esql "SELECT count(*) FROM rlg_state WHERE policy = 'by_key'")" $((n - 1)) \
	    "$name front: no row for any look-alike API key"
	# the honest requests are keyed by the address the front saw
	is "$(seq_codes 4 --interface "$c" -H "X-API-Key: mine-$n" "$base")" "200:2 200:1 200:0 429:0" \
	    "$name front: the same client without look-alikes: its own 3, then 429"
	is "$(esql "SELECT count FROM rlg_state WHERE policy = 'by_ip' AND client = '$c'")" 3 \
	    "$name front: counted as $c, the address the front saw"
done
like "$(grep -m1 'reason=duplicate_header' "$T/lookalike.log")" \
    "^${LOG_RE}event=bad_request peer=127\.0\.0\.1 reason=duplicate_header header=X-Forwarded-For suppressed=0\$" \
    "look-alikes are logged as event=bad_request reason=duplicate_header"

# ---- 2. malformed forwarding headers -----------------------------------------

# An X-Forwarded-For over 8 KiB, through a front that allows big headers:
# once counted as the trusted (here exempt) peer, free for ever. (Apache
# refuses a header over 8 KiB itself, even joined from several lines.)
xff=$(printf '10.%d.%d.1, ' $(for i in $(seq 1 1000); do echo $((i / 200)) $((i % 200)); done) | head -c 9000)
xff="${xff%, *}"
[ ${#xff} -gt 8500 ] || bail_out "the X-Forwarded-For is only ${#xff} bytes"
got=
for i in 1 2 3 4 5; do
	req --interface 127.0.0.20 -H "X-Forwarded-For: $xff" "http://127.0.0.1:$LF_PORT/api/v1/resources"
	got="$got $STATUS"
done
is "${got# }" "$(times 5 400)" "lighttpd front: a 9 KB X-Forwarded-For: 5 x 400, never the exempt proxy's key"
like "$BODY" "$(re_err 400)" "lighttpd front: ... rlgate's JSON 400"

# From the trusted peer itself (127.0.0.1, exempt here): more hops than
# rlgate reads (64), all of them trusted: the client could be any of the
# ones left unread. Refused, never the 64th from the right (the exempt
# proxy's address).
hops=$(for i in $(seq 1 70); do printf '127.0.0.1, '; done)
req -H "X-Forwarded-For: 203.0.113.50, ${hops%, }" \
    "http://127.0.0.1:$BE_PORT/api/v1/resources"
is "$STATUS" 400 "backend: 70 trusted hops behind the client: 400 (64 are read, none is guessed)"
hops=$(for i in $(seq 1 62); do printf '127.0.0.1, '; done)
req -H "X-Forwarded-For: 203.0.113.50, ${hops%, }" \
    "http://127.0.0.1:$BE_PORT/api/v1/resources"
is "$STATUS:$(esql "SELECT count FROM rlg_state WHERE policy = 'by_ip' AND client = '203.0.113.50'")" "200:1" \
    "backend: the client left of 62 trusted hops (63 in the header): found and counted"

# trusted_proxies = 0.0.0.0/0 lets any client choose its key: warned about
printf '[client]\ntrusted_proxies = 0.0.0.0/0\n[store]\npath = %s\n' "$T/trust_all.db" \
    >"$T/trust_all.conf"
out=$("$RLGATE_BIN" --check-config --config "$T/trust_all.conf" 2>&1)
is "$?" 0 "--check-config: trusted_proxies = 0.0.0.0/0 is accepted"
like "$out" 'trust_all\.conf:2: warning: \[client\] trusted_proxies: 0\.0\.0\.0/0 trusts every peer' \
    "--check-config: ... with a warning on its line"

use_conf forwarded <<EOF
[client]
trusted_proxies = 127.0.0.1
forwarded_header = forwarded
exempt = 127.0.0.1

[policy by_ip]
limit = 3
window = $WINDOW
EOF
lf=http://127.0.0.1:$LF_PORT/api/v1/resources
got=
for i in 1 2 3 4 5; do
	req --interface 127.0.0.21 -H 'Forwarded: for="' "$lf"
	got="$got $STATUS"
done
is "${got# }" "$(times 5 400)" \
    "lighttpd front: Forwarded: for=\" swallowing the proxy's element: 5 x 400 (not the exempt proxy)"
req --interface 127.0.0.21 -H 'Forwarded: for="x, for=127.0.0.1' "$lf"
is "$STATUS" 400 "lighttpd front: a quoted string that ends in a fake trusted hop: 400"
is "$(seq_codes 4 --interface 127.0.0.21 "$lf")" "200:2 200:1 200:0 429:0" \
    "lighttpd front: the same client, well-formed: Forwarded: for=127.0.0.21, its own 3, then 429"
req --interface 127.0.0.21 -H 'Forwarded: for=192.0.2.1' "$lf"
is "$STATUS" 429 "lighttpd front: what the client wrote left of the proxy's element is ignored: 429"
is "$(rows)" "by_ip/127.0.0.21=3" "only the client's own row (nothing for the proxy or any spoof)"
like "$(grep -m1 'event=bad_request' "$T/forwarded.log")" \
    'peer=127\.0\.0\.1 reason=bad_forwarded header=Forwarded ' "logged: reason=bad_forwarded"

# ---- 3. the Authorizer role: the path the server serves ------------------------

AUTH_CONF=$(cat <<EOF
[client]
trusted_proxies = 127.0.0.1

[policy default]
limit = 3
window = $WINDOW

[policy login]
limit = 1
window = $WINDOW

[route public]
path = /static/public/*
policies = none

[route login]
path = /login
methods = GET
policies = login

[policy spell]
limit = 1
window = $WINDOW

[route search]
path = /api/search
policies = spell

[route private]
path = /private/*
policies = spell

[route api]
path = /api/*
policies = default
EOF
)

# make_docroot DIR: static/secret.txt (guarded), static/public/free.txt
# (exempt), login (a route of its own).
make_docroot() {
	mkdir -p "$1/static/public"
	echo secret >"$1/static/secret.txt"
	echo free >"$1/static/public/free.txt"
	echo login >"$1/login"
	chmod -R a+rX "$1"
}

# check_paths SERVER BASE: the sequence, for one server; client addresses
# 127.0.0.3x (lighttpd) or 127.0.0.4x (Apache): PREFIX.
check_paths() {
	local s=$1 base=$2 p=$3 got
	got=
	for _ in 1 2 3 4 5; do
		req --path-as-is --interface "${p}1" "$base/static/public/../secret.txt"
		got="$got $STATUS:$BODY"
	done
	is "${got# }" "200:secret 200:secret 200:secret 429:$BODY_429 429:$BODY_429" \
	    "$s: /static/public/../secret.txt: the guarded file's 3 under default, then 429"
	req --path-as-is --interface "${p}1" "$base/static/public/%2e%2e/secret.txt"
	is "$STATUS" 429 "$s: /static/public/%2e%2e/secret.txt: the same file, 429"
	req --path-as-is --interface "${p}1" "$base/static/public//../secret.txt"
	is "$STATUS" 429 "$s: /static/public//../secret.txt: 429"
	req --path-as-is --interface "${p}1" "$base/static/public/free.txt"
	is "$STATUS:$BODY" "200:free" "$s: the public route still serves its own files"
	req --path-as-is --interface "${p}1" "$base/static/public%2F..%2Fsecret.txt"
	isnt "$STATUS" 200 "$s: an encoded '/' is not served as exempt ($STATUS)"
	# an exact route, reached under other spellings of its path
	got=
	for v in /login //login /./login /x/../login /static/%2e%2e/login \
	    /login/ /LOGIN /Login '/login;jsessionid=x' '/login%3Bx' '/LOGIN;x/'; do
		req --path-as-is --interface "${p}2" "$base$v"
		got="$got $STATUS"
	done
	is "${got# }" "200 $(times 10 429)" \
	    "$s: /login, then //login, /./login, /x/../login, /static/%2e%2e/login, /login/, /LOGIN, /Login, ;jsessionid=x, %3Bx, /LOGIN;x/: all the login route's (1, then 429)"
	is "$(esql "SELECT count FROM rlg_state WHERE policy = 'login' AND client = '${p}2'")" 1 \
	    "$s: every spelling counted under the login route (limit 1: one admitted)"
	# an exact route before a prefix that takes it too, and a prefix
	# route: their spellings count under them (path_match = normalized)
	is "$(spellings "${p}5" "$base" /api/search /api/search/ '/api/search;x' \
	    /API/search /api/Search '/api/search%3Bx' '/api;v=1/SEARCH;x/')" \
	    "- 429 429 429 429 429 429" \
	    "$s: /api/search, then /api/search/, ;x, /API/search, /api/Search, %3Bx, /api;v=1/SEARCH;x/: the search route's (1, then 429), not /api/*'s"
	req --interface "${p}5" "$base/api/other"
	isnt "$STATUS" 429 "$s: ... /api/other, under /api/*, still passes ($STATUS)"
	is "$(spellings "${p}6" "$base" /private/a /PRIVATE/a '/private;x/a' /Private/ /private '/private;x' '/private%3Bx/b')" \
	    "- 429 429 429 429 429 429" \
	    "$s: /private/a, then /PRIVATE/a, /private;x/a, /Private/, /private, /private;x, %3Bx/b: the /private/* route's (1, then 429)"
	is "$(esql "SELECT group_concat(client || '=' || count, ' ') FROM (SELECT * FROM rlg_state WHERE policy = 'spell' AND client IN ('${p}5', '${p}6') ORDER BY client)")" \
	    "${p}5=1 ${p}6=1" "$s: one admitted request of each route under policy spell"
	req --path-as-is --interface "${p}7" "$base/private/..;/api/search"
	is "$STATUS:$(header Content-Type)" "400:application/json" \
	    "$s: /private/..;/api/search (the parent to Tomcat, a name elsewhere): rlgate's 400"
	# a malformed header from a trusted peer: denied with rlgate's 400
	req -H 'X-Forwarded-For: garbage' "$base/static/secret.txt"
	is "$STATUS:$(header Content-Type)" "400:application/json" \
	    "$s: a malformed X-Forwarded-For from the trusted peer: 400, application/json"
	like "$BODY" "$(re_err 400)" "$s: ... rlgate's JSON 400, not the file"
	# a GET route takes HEAD
	got=
	for _ in 1 2 3; do
		hreq --interface "${p}3" "$base/login"
		got="$got $STATUS"
	done
	is "${got# }" "200 429 429" "$s: HEAD on [route login] (methods = GET): limited as GET (1, then 429)"
}

lt="$T/lt-auth"
mkdir -p "$lt"
chmod 755 "$lt"
make_docroot "$lt/htdocs"
use_conf auth_lt <<<"$AUTH_CONF"
LA_PORT=$(free_port) || bail_out "no free port"
start_authorizer_lighttpd "$lt" "$LA_PORT" "$sock" / <<<'mimetype.assign      = ( "" => "text/plain" )'
check_paths lighttpd "http://127.0.0.1:$LA_PORT" 127.0.0.3

if apache_available && [ -f "$APACHE_MODULES/mod_authnz_fcgi.so" ]; then
	ap="$T/ap-auth"
	mkdir -p "$ap"
	chmod 755 "$ap"
	printf '; written by %s\n[store]\npath = %s\nrejection_cache = 0\n\n%s\n' \
	    "$(basename "$0")" "$ap/rlgate.db" "$AUTH_CONF" >"$ap/rlgate.conf"
	RP=$(free_port) || bail_out "no free port"
	start_rlgate_tcp rlgate-ap "$RP" "$ap/rlgate.conf" 2 --threads 2
	AA_PORT=$(free_port) || bail_out "no free port"
	write_apache_conf "$ap/httpd.conf" "$AA_PORT" "$ap" \
	    "$(for m in authn_core authz_user authnz_fcgi headers; do _apache_module $m; done)
Define RLGATE_PORT $RP
Define RLGATE_GUARD /
Include \"$RLGATE_SRCDIR/www/apache/authorizer.conf\""
	make_docroot "$ap/htdocs"
	start_apache "$ap/httpd.conf" "$AA_PORT"
	DB_LT=$DB
	DB="$ap/rlgate.db"
	DBCONF="$ap/rlgate.conf"
	check_paths apache "http://127.0.0.1:$AA_PORT" 127.0.0.4
	DB=$DB_LT
	DBCONF=
else
	diag "Apache with mod_authnz_fcgi is not installed: its Authorizer part is skipped"
fi

# A path rlgate cannot read fails closed in the Authorizer role: CGI mode
# hands it any length (lighttpd and Apache stop at 8 KiB themselves).
long=/static/public/$(head -c 9000 /dev/zero | tr '\0' a)
out=$(env -i PATH="$PATH" GATEWAY_INTERFACE=CGI/1.1 FCGI_ROLE=AUTHORIZER \
    REQUEST_METHOD=GET REMOTE_ADDR=127.0.0.50 REQUEST_URI="$long" \
    "$RLGATE_BIN" --config "$T/auth_lt.conf" 2>/dev/null </dev/null | head -1 | tr -d '\r')
is "$out" "Status: 400 Bad Request" "Authorizer: a 9 KB path under the exempt prefix: 400, not authorized"

# ---- 4. dry run: never in the client's headers ---------------------------------

use_conf dry <<EOF
[headers]
style = all

[policy hard]
limit = 2
window = 60

[policy trial]
mode = dry_run
limit = 1
window = 60
EOF
ensure_window_room 60 10
be=http://127.0.0.1:$BE_PORT/api/v1/resources
req --interface 127.0.0.60 "$be"
is "$STATUS:$(header RateLimit-Remaining):$(header X-RateLimit-Remaining)" "200:1:1" \
    "lighttpd: beside hard (2/60 s), a dry_run trial (1/60 s): the first answer says Remaining 1 (hard's)"
unlike "$(header RateLimit-Policy)" 'trial' "lighttpd: RateLimit-Policy does not name the trial"
unlike "$(header RateLimit)" 'trial' "lighttpd: RateLimit does not name the trial"
req --interface 127.0.0.60 "$be"
is "$STATUS:$(header RateLimit-Remaining)" "200:0" "lighttpd: the second: Remaining 0 (hard's)"
req --interface 127.0.0.60 "$be"
is "$STATUS" 429 "lighttpd: the third: 429 from hard"
grep -q 'event=dry_run_reject client=127.0.0.60 ' "$T/dry.log"
ok $? "the trial's would-be rejection is logged"
is "$(esql "SELECT count FROM rlg_state WHERE policy = 'trial' AND client = '127.0.0.60'")" 1 \
    "the trial is stored (count 1)"
if [ -n "${AF_PORT:-}" ]; then
	req --interface 127.0.0.61 "http://127.0.0.1:$AF_PORT/api/v1/resources"
	is "$STATUS:$(header RateLimit-Remaining)" "200:1" "through the Apache front: Remaining 1 too"
fi

# ---- 5. a key flood from one address -------------------------------------------

# The store holds state for at most 20 clients per policy; one address
# minting API keys used to fill it, and every new client after it got 503
# (or, with on_error = open, passed uncounted). Now an address starts at
# most new_keys_per_ip new keys per window.
use_conf flood <<EOF
[store]
max_clients = 20
[client]
trusted_proxies = 127.0.0.1
key_secret = 00112233445566778899aabbccddeeff

[policy per_key]
limit = 5
window = $WINDOW
key = ip, header:X-API-Key
new_keys_per_ip = 4
EOF
# flood URL ADDR N: N requests from ADDR, each with a fresh key; prints
# the statuses.
flood() {
	local out= i
	for i in $(seq 1 "$3"); do
		req --interface "$2" -H "X-API-Key: flood-$2-$i" "$1"
		out="$out $STATUS"
	done
	printf '%s' "${out# }"
}
n=70
for f in "lighttpd=http://127.0.0.1:$BE_PORT" $FRONTS; do
	name=${f%%=*}
	[ "$n" -gt 70 ] && name="$name front"
	a=127.0.0.$n b=127.0.0.$((n + 1))
	n=$((n + 2))
	u=${f#*=}/api/v1/resources
	is "$(flood "$u" "$a" 12)" "200 200 200 200 $(times 8 429)" \
	    "$name: 12 fresh keys from $a: 4 admitted, then 429 (new_keys_per_ip = 4)"
	between "$(header Retry-After)" 1 $WINDOW "$name: ... with Retry-After"
	is "$(header RateLimit-Limit)" 4 "$name: ... the 429 reports the bound (RateLimit-Limit 4)"
	req --interface "$a" -H "X-API-Key: flood-$a-1" "$u"
	is "$STATUS:$(header RateLimit-Remaining)" "200:3" "$name: a key $a already holds goes on (Remaining 3)"
	req --interface "$b" -H "X-API-Key: newcomer-$b" "$u"
	is "$STATUS" 200 "$name: a new client from $b with a new key: 200, not locked out"
done
nf=$(((n - 70) / 2))
is "$(esql "SELECT count(*) FROM rlg_state WHERE policy = 'per_key'")" $((nf * 5)) \
    "the store holds 4 keys per flooding address and 1 per newcomer ($((nf * 5)) of max_clients 20)"
want=
for i in $(seq 70 2 $((n - 1))); do want="$want 127.0.0.$i=4 127.0.0.$((i + 1))=1"; done
is "$(esql "SELECT group_concat(client || '=' || count, ' ') FROM (SELECT * FROM rlg_state WHERE policy = 'per_key.new_keys' ORDER BY client)")" \
    "${want# }" "the bound is counted per address, as policy per_key.new_keys"
grep -q 'event=reject client=127.0.0.70 route=- policy=per_key.new_keys ' "$T/flood.log"
ok $? "the refusals are logged as rejections by per_key.new_keys"

rlgate_pids_alive "$CUR"
ok $? "rlgate survived every attempt"

done_testing
