#!/usr/bin/env bash
# nginx_auth.sh: rlgate guarding nginx locations through auth_request, with
# the shipped www/nginx/rlgate.conf (server level) and www/nginx/guard.conf
# (in each guarded location), on a real nginx and rlgate under spawn-fcgi
# (2 processes x 2 threads, unix socket). Guarded: a static directory and a
# proxy_pass to an HTTP backend (a second server block of the same nginx).
# Checks: the backend's content with the RateLimit headers before the
# limit; after it 429 with Retry-After, the headers, Cache-Control, the
# JSON body and its type (problem+json with [response] errors = problem);
# another client keeps its quota; the backend's and nginx's own 403 stay
# 403s; headers forged by the client change nothing; routes (policies =
# none not counted, a route's own policy counted apart; a route's
# spellings counted under it); the refusal's Content-Type on a file whose
# extension mime.types knows (nginx runs on Debian's stock nginx.conf); a
# store failure:
# 503 with Retry-After (closed) or the content (open); an exact count under
# parallel load; a bad RLGATE_ROLE: 500 and reason=bad_role; rlgate down:
# nginx's 500; and nginx never logs "auth request unexpected status" for
# rlgate's own refusals.
: "${RLGATE_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/integration/lib.sh
. "$RLGATE_SRCDIR/tests/integration/lib.sh" || { echo "Bail out! cannot read lib.sh"; exit 99; }

NGINX_BIN=${NGINX_BIN:-$(command -v nginx 2>/dev/null || echo /usr/sbin/nginx)}
[ -x "$NGINX_BIN" ] || skip_all "nginx not installed"
"$NGINX_BIN" -V 2>&1 | grep -q -- --with-http_auth_request_module ||
	skip_all "this nginx has no auth_request module"

setup_test spawn-fcgi curl xargs openssl

make_rundir

LIMIT=5
# a day: the fixed windows are aligned on multiples of it (UTC midnight),
# so the test practically never straddles two
WINDOW=86400
OWN_LIMIT=2
LOAD_LIMIT=50
LOAD_REQUESTS=200

# ---- the sites ------------------------------------------------------------------

H=$T/htdocs
mkdir -p "$H/static/free" "$H/static/own" "$H/static/load" "$H/static/cookie" \
    "$H/static/query" "$H/static/jwt" "$H/static/smooth" "$T/backend/app" \
    "$T/nginx-tmp"
echo 'hello from the static directory' >"$H/static/hello.txt"
echo 'free file' >"$H/static/free/a.txt"
echo 'own file' >"$H/static/own/a.txt"
echo 'cookie file' >"$H/static/cookie/a.txt"
echo 'query file' >"$H/static/query/a.txt"
echo 'jwt file' >"$H/static/jwt/a.txt"
echo 'smooth file' >"$H/static/smooth/a.txt"
# the HS256 secret of key = jwt:sub
JWT_SECRET=0123456789abcdef0123456789abcdef-nginx
printf '%s\n' "$JWT_SECRET" >"$T/jwt.secret"
chmod 600 "$T/jwt.secret"
echo 'load file' >"$H/static/load/a.txt"
echo 'secret' >"$H/static/secret.txt"
echo 'hello from the backend' >"$T/backend/app/hello.txt"
chmod -R a+rX "$H" "$T/backend"
# nginx's workers (nobody when started as root, else our own user) may not
# read it: nginx's own 403
chmod 000 "$H/static/secret.txt"

STATIC_BODY='hello from the static directory'
APP_BODY='hello from the backend'

# ---- rlgate's configs ---------------------------------------------------------------

# rl_conf NAME DB ON_ERROR ERRORS [STYLE [STATUS]]: $T/NAME.conf on
# database DB.
rl_conf() {
	cat >"$T/$1.conf" <<EOF
; written by $(basename "$0")
[store]
path = $2
on_error = $3
busy_timeout_ms = 200

[client]
key_secret = 00112233445566778899aabbccddeeff
jwt_key = $T/jwt.secret

[headers]
style = ${5:-draft03}

[response]
errors = $4
status = ${6:-429}

[policy default]
algorithm = fixed_window
limit = $LIMIT
window = $WINDOW
key = ip

[policy own]
algorithm = fixed_window
limit = $OWN_LIMIT
window = $WINDOW
key = ip

[policy load]
algorithm = fixed_window
limit = $LOAD_LIMIT
window = $WINDOW
key = ip

[fastcgi]
; long: a request waiting behind an idle kept connection would wait this
read_timeout_ms = 60000

[route free]
path = /static/free/*
policies = none

[route own]
path = /static/own/*
policies = own

; keys the client sends: a cookie, a query parameter
[policy bycookie]
limit = 2
window = $WINDOW
key = cookie:sid

[policy byquery]
limit = 2
window = $WINDOW
key = query:key

[policy byjwt]
limit = 2
window = $WINDOW
key = jwt:sub

[route cookie]
path = /static/cookie/*
policies = bycookie

[route jwt]
path = /static/jwt/*
policies = byjwt

; smoothing: 5 a second, burst 10, held for their turn (delay = 0)
[policy smooth]
algorithm = token_bucket
limit = 5
window = 1
burst = 10
delay = 0

[route smooth]
path = /static/smooth/*
policies = smooth

[route query]
path = /static/query/*
policies = byquery

[route load]
path = /static/load/*
policies = load

; a route's spellings (path_match = normalized)
[policy spell]
algorithm = fixed_window
limit = 1
window = $WINDOW
key = ip

[route search]
path = /api/search
policies = spell

[route login]
path = /login
methods = POST
policies = spell

[route private]
path = /private/*
policies = spell

[route api]
path = /api/*
policies = default
EOF
}
rl_conf main "$T/main.db" closed json
rl_conf problem "$T/problem.db" closed problem all
rl_conf status "$T/status.db" closed json draft03 403
# the store's directory does not exist: every request is a store failure
rl_conf closed "$T/missing/closed.db" closed json
rl_conf open "$T/missing/open.db" open json

# ---- nginx ---------------------------------------------------------------------------

PORT=$(free_port) || bail_out "no free port"
BPORT=$(free_port) || bail_out "no free port"
[ "$PORT" != "$BPORT" ] || BPORT=$(free_port) || bail_out "no free port"
# nginx runs on Debian's stock nginx.conf, as operators do (include
# mime.types, default_type application/octet-stream, sendfile, gzip...),
# with only what a test must change: no user (as started: nobody under
# root), the pid, the logs, daemon off, and the test's http{} part (temp
# paths, the upstream, the servers) in place of conf.d and sites-enabled.
# nginx keeps its own prefix (no -p), where modules-enabled's relative
# load_module paths lead.
NGINX_STOCK=${NGINX_STOCK:-/etc/nginx/nginx.conf}
[ -r "$NGINX_STOCK" ] || bail_out "no stock nginx.conf at $NGINX_STOCK"
grep -q '^[[:space:]]*include /etc/nginx/mime.types;' "$NGINX_STOCK" ||
	bail_out "$NGINX_STOCK does not include /etc/nginx/mime.types"
N=$T/nginx.conf
NS=$T/nginx-servers.conf
{
	echo "# written by $(basename "$0") from $NGINX_STOCK"
	echo "daemon off;"
	sed -e 's|^\([[:space:]]*\)user [^;]*;|\1# user: as started|' \
	    -e "s|^\\([[:space:]]*\\)pid [^;]*;|\\1pid $T/nginx.pid;|" \
	    -e "s|^\\([[:space:]]*\\)error_log [^;]*;|\\1error_log $T/nginx-error.log info;|" \
	    -e "s|^\\([[:space:]]*\\)access_log [^;]*;|\\1access_log $T/nginx-access.log;|" \
	    -e "s|^\\([[:space:]]*\\)include /etc/nginx/conf.d/\\*.conf;|\\1include $NS;|" \
	    -e 's|^\([[:space:]]*\)include /etc/nginx/sites-enabled/\*;|\1# sites-enabled: not here|' \
	    "$NGINX_STOCK"
} >"$N"
grep -q "include $NS;" "$N" || bail_out "no conf.d include in $NGINX_STOCK to put the servers in"
grep -q "^[[:space:]]*include /etc/nginx/mime.types;" "$N" || bail_out "mime.types include lost"
cat >"$NS" <<EOF
# written by $(basename "$0"): the http{} part of $N
client_body_temp_path $T/nginx-tmp/body;
proxy_temp_path $T/nginx-tmp/proxy;
fastcgi_temp_path $T/nginx-tmp/fastcgi;
uwsgi_temp_path $T/nginx-tmp/uwsgi;
scgi_temp_path $T/nginx-tmp/scgi;

upstream rlgate {
    server unix:$sock;
    keepalive 16;
}

# the HTTP backend
server {
    listen 127.0.0.1:$BPORT;
    root $T/backend;
    location = /app/forbidden {
        return 403 "the backend says no\n";
    }
}

# the front
server {
    listen 127.0.0.1:$PORT;
    root $H;
    include $RLGATE_SRCDIR/www/nginx/rlgate.conf;

    location /static/ {
        include $RLGATE_SRCDIR/www/nginx/guard.conf;
    }
    location /app/ {
        include $RLGATE_SRCDIR/www/nginx/guard.conf;
        proxy_pass http://127.0.0.1:$BPORT;
    }
    location /open/ {
        alias $H/static/;
    }
    # every other path: the routes' spellings (nginx's locations are
    # case-sensitive: /API/search would miss a location /api/)
    location / {
        include $RLGATE_SRCDIR/www/nginx/guard.conf;
    }

    # a bad RLGATE_ROLE
    location /bogus/ {
        auth_request /.rlgate/bogus;
        alias $H/static/;
    }
    location = /.rlgate/bogus {
        internal;
        fastcgi_pass rlgate;
        fastcgi_pass_request_body off;
        fastcgi_param RLGATE_ROLE    bogus;
        fastcgi_param REQUEST_METHOD \$request_method;
        fastcgi_param REQUEST_URI    \$request_uri;
        fastcgi_param REMOTE_ADDR    \$remote_addr;
        fastcgi_param CONTENT_LENGTH "";
    }
}
EOF
"$NGINX_BIN" -t -q -e "$T/nginx-error.log" -c "$N" >"$T/nginx.out" 2>&1 ||
	bail_out "nginx rejects its config: $(head -5 "$T/nginx.out")"
"$NGINX_BIN" -e "$T/nginx-error.log" -c "$N" </dev/null >>"$T/nginx.out" 2>&1 &
NGINX_PID=$!
track_pid "$NGINX_PID"
wait_for_port "$PORT" 10 "$NGINX_PID" ||
	bail_out "nginx did not listen on $PORT: $(tail -5 "$T/nginx-error.log")"
wait_for_port "$BPORT" 10 "$NGINX_PID" ||
	bail_out "nginx did not listen on $BPORT: $(tail -5 "$T/nginx-error.log")"
base="http://127.0.0.1:$PORT"
ok_static="$base/static/hello.txt"
ok_app="$base/app/hello.txt"

# no_unexpected WHEN: nginx's error log has no "auth request unexpected
# status" line (rlgate's refusals all reach nginx as 403)
no_unexpected() {
	is "$(grep -c 'auth request unexpected status' "$T/nginx-error.log")" 0 \
	    "$1: no \"auth request unexpected status\" in nginx's error log" \
	    "$(grep 'auth request unexpected status' "$T/nginx-error.log" | head -3)"
}

# check_rl_429 LIMIT WHAT: the last answer is rlgate's 429 through nginx.
check_rl_429() {
	is "$STATUS" 429 "$2: 429"
	is "$(header Content-Type)" application/json "$2: Content-Type: application/json"
	between "$(header Retry-After)" 1 $WINDOW "$2: Retry-After in 1..$WINDOW"
	is "$(header RateLimit-Limit)" "$1" "$2: RateLimit-Limit $1"
	is "$(header RateLimit-Remaining)" 0 "$2: RateLimit-Remaining 0"
	between "$(header RateLimit-Reset)" 1 $WINDOW "$2: RateLimit-Reset in 1..$WINDOW"
	is "$(header Cache-Control)" no-store "$2: Cache-Control: no-store"
	is "$BODY" "$BODY_429" "$2: the JSON body"
}

# remaining_seq N URL [CURL_ARGS...]: N requests; "STATUS:Remaining ...".
remaining_seq() {
	local n=$1 url=$2
	shift 2
	seq_codes "$n" "$@" "$url"
}

# expected_seq LIMIT N: "200:LIMIT-1 ... 200:0" for the first N <= LIMIT.
expected_seq() {
	local i out=
	for i in $(seq 1 "$2"); do
		out="$out 200:$(($1 - i))"
	done
	printf '%s' "${out# }"
}

# switch_rlgate NAME ROOM_S: as lib.sh's restart_rlgate, without
# --check-config (which refuses the store failure's missing directory:
# that is the point of those configs).
switch_rlgate() {
	[ -n "$CUR" ] && stop_rlgate_fcgi "$CUR"
	rm -f "$sock"
	start_rlgate_fcgi "$1" "$sock" "$T/$1.conf" 2 --threads 2
	CUR=$1
	ensure_window_room "$WINDOW" "$2"
}

check_conf main
check_conf problem
check_conf status
restart_rlgate main 30

# ============================================================================
# the static directory, one client (127.0.0.2)
for i in $(seq 1 $LIMIT); do
	keep "s$i" --interface 127.0.0.2 "$ok_static"
done
keep s6 --interface 127.0.0.2 "$ok_static"
for i in $(seq 1 $LIMIT); do
	recall "s$i"
	is "$STATUS:$BODY" "200:$STATIC_BODY" "static, request $i: 200 and the file"
	is "$(header RateLimit-Limit)" $LIMIT "static, request $i: RateLimit-Limit $LIMIT"
	is "$(header RateLimit-Remaining)" $((LIMIT - i)) "static, request $i: RateLimit-Remaining $((LIMIT - i))"
	between "$(header RateLimit-Reset)" 1 $WINDOW "static, request $i: RateLimit-Reset in 1..$WINDOW"
done
recall s1
is "$(header Content-Type)" text/plain "static 200: the file's Content-Type"
has_header Retry-After
ok $((! $?)) "static 200: no Retry-After"
has_header X-Rlgate-Status
ok $((! $?)) "static 200: no X-Rlgate-Status leaks to the client"
recall s6
check_rl_429 $LIMIT "static, request $((LIMIT + 1))"
has_header X-Rlgate-Body
ok $((! $?)) "static 429: no X-Rlgate-* header leaks to the client"
# the refusal's type is rlgate's whatever the file's extension
# (mime.types has txt and html)
req --interface 127.0.0.2 "$base/static/missing.html"
is "$STATUS:$(header Content-Type)" 429:application/json \
    "static, missing.html over the limit: 429, Content-Type: application/json"
is "$BODY" "$BODY_429" "static, missing.html: the JSON body"
hreq --interface 127.0.0.2 "$ok_static"
is "$STATUS" 429 "static, HEAD over the limit: 429"
between "$(header Retry-After)" 1 $WINDOW "static, HEAD 429: Retry-After"
req --interface 127.0.0.2 "$base/open/hello.txt"
is "$STATUS:$BODY" "200:$STATIC_BODY" "an unguarded location still serves the client"
has_header RateLimit-Limit
ok $((! $?)) "... without rate-limit headers"

# another client keeps its quota
req --interface 127.0.0.3 "$ok_static"
is "$STATUS:$(header RateLimit-Remaining)" "200:$((LIMIT - 1))" "another client (127.0.0.3) keeps its quota"

# ============================================================================
# the proxied HTTP backend (127.0.0.4)
for i in $(seq 1 $((LIMIT + 1))); do
	keep "a$i" --interface 127.0.0.4 "$ok_app"
done
for i in $(seq 1 $LIMIT); do
	recall "a$i"
	is "$STATUS:$BODY:$(header RateLimit-Remaining)" "200:$APP_BODY:$((LIMIT - i))" \
	    "proxied, request $i: 200, the backend's content, RateLimit-Remaining $((LIMIT - i))"
done
recall a1
is "$(header RateLimit-Limit)" $LIMIT "proxied 200: RateLimit-Limit $LIMIT"
recall "a$((LIMIT + 1))"
check_rl_429 $LIMIT "proxied, request $((LIMIT + 1))"

# ============================================================================
# 403s that are not rlgate's stay 403s (127.0.0.5)
req --interface 127.0.0.5 "$base/static/secret.txt"
is "$STATUS" 403 "static, a file nginx may not read: 403"
like "$(header Content-Type)" '^text/html' "... nginx's own 403 page"
like "$BODY" '403 Forbidden' "... its body"
has_header Retry-After
ok $((! $?)) "... no Retry-After"
req --interface 127.0.0.5 "$base/app/forbidden"
is "$STATUS" 403 "proxied, the backend's 403: 403"
is "$BODY" "the backend says no" "... with the backend's body"
is "$(header RateLimit-Remaining)" $((LIMIT - 2)) "... and the rate-limit headers (both were counted)"
req --interface 127.0.0.5 "$base/.rlgate/auth"
is "$STATUS" 404 "the auth location is internal: 404 to a client"

# ============================================================================
# forged headers change nothing (127.0.0.6): the same client, the same route
forged=(-H 'X-Forwarded-For: 127.0.0.7' -H 'Forwarded: for=127.0.0.7'
    -H 'X-Real-IP: 127.0.0.7' -H 'X-Forwarded-Uri: /static/free/a.txt'
    -H 'X_Forwarded_Uri: /static/free/a.txt' -H 'X-Forwarded-Method: POST'
    -H 'Rlgate-Role: bogus' -H 'RLGATE_ROLE: bogus' -H 'X-Rlgate-Status: 200'
    -H 'X-Rlgate-Type: json' -H 'X-Original-URI: /static/free/a.txt')
got=$(remaining_seq $LIMIT "$ok_static" --interface 127.0.0.6 "${forged[@]}")
is "$got" "$(expected_seq $LIMIT $LIMIT)" "forged headers: the client is counted as itself, on the default route"
req --interface 127.0.0.6 "${forged[@]}" "$ok_static"
is "$STATUS" 429 "forged headers: 429 over the limit"
req --interface 127.0.0.6 "$ok_static"
is "$STATUS" 429 "... and a plain request of that client: 429"
req --interface 127.0.0.7 "$ok_static"
is "$STATUS:$(header RateLimit-Remaining)" "200:$((LIMIT - 1))" "the address in the forged headers was not counted"

# ============================================================================
# routes (127.0.0.8)
got=$(remaining_seq $((LIMIT + 2)) "$base/static/free/a.txt" --interface 127.0.0.8)
is "$got" "$(printf '200:- %.0s' $(seq 1 $((LIMIT + 2))) | sed 's/ $//')" \
    "route with policies = none: every request 200, no rate-limit headers"
got=$(remaining_seq $((OWN_LIMIT + 1)) "$base/static/own/a.txt" --interface 127.0.0.8)
is "$got" "$(expected_seq $OWN_LIMIT $OWN_LIMIT) 429:0" "route with its own policy: $OWN_LIMIT, then 429"
is "$(header RateLimit-Limit)" $OWN_LIMIT "... its 429 names its own limit"
req --interface 127.0.0.8 "$ok_static"
is "$STATUS:$(header RateLimit-Remaining)" "200:$((LIMIT - 1))" "... counted apart from the default policy"

# ============================================================================
# keys the client sends, through the snippet (the original request's
# Cookie header and query string): one value one bucket whatever its
# spelling or address; the name twice is refused (400), nothing served
c="$base/static/cookie/a.txt"
is "$(for a in 9 9 9 10; do req --interface 127.0.0.$a -H 'Cookie: sid=alice' "$c"; printf '%s ' "$STATUS"; done)" \
    "200 200 429 429 " "cookie:sid: alice's quota, from any address"
req --interface 127.0.0.9 -H 'Cookie: SID="%61lice"' "$c"
is "$STATUS" 429 "cookie:sid: another spelling of alice is alice"
req --interface 127.0.0.9 -H 'Cookie: sid=bob' "$c"
is "$STATUS:$BODY" "200:cookie file" "cookie:sid: bob is served"
req --interface 127.0.0.9 -H 'Cookie: sid=carol; Sid=bob' "$c"
is "$STATUS" 400 "cookie:sid: the name twice is refused"
unlike "$BODY" 'cookie file' "cookie:sid: ... and nothing served"
q="$base/static/query/a.txt"
is "$(for u in "$q?key=alice" "$q?x=1&Key=alice" "$q?k%65y=alice"; do req --interface 127.0.0.9 "$u"; printf '%s ' "$STATUS"; done)" \
    "200 200 429 " "query:key: alice's quota, whatever the name's spelling"
req --interface 127.0.0.9 "$q?key=bob&key=alice"
is "$STATUS" 400 "query:key: the name twice is refused"
unlike "$BODY" 'query file' "query:key: ... and nothing served"
# jwt:sub: the snippet passes the Authorization header on
b64u() { openssl base64 -A | tr '+/' '-_' | tr -d '='; }
hs256() {
	local h p
	h=$(printf '{"alg":"HS256","typ":"JWT"}' | b64u)
	p=$(printf '%s' "$1" | b64u)
	printf '%s.%s.%s' "$h" "$p" "$(printf '%s.%s' "$h" "$p" |
	    openssl dgst -sha256 -hmac "$2" -binary | b64u)"
}
j="$base/static/jwt/a.txt"
tok=$(hs256 '{"sub":"alice"}' "$JWT_SECRET")
is "$(for a in 9 10 11; do req --interface 127.0.0.$a -H "Authorization: Bearer $tok" "$j"; printf '%s ' "$STATUS"; done)" \
    "200 200 429 " "jwt:sub: alice's quota, from any address"
tok=$(hs256 '{"sub":"bob"}' "not-the-secret-of-this-gateway-at-all")
is "$(for a in 1 2; do req --interface 127.0.0.11 -H "Authorization: Bearer $tok" "$j"; printf '%s ' "$STATUS"; done)" \
    "200 200 " "jwt:sub: a forged token keys by its address (127.0.0.11: its own quota)"
# expired, and alg none, claiming alice (whose quota is spent): each keys
# by its own address, so it is served, never refused as alice
tok=$(hs256 "{\"sub\":\"alice\",\"exp\":$(($(date +%s) - 60))}" "$JWT_SECRET")
req --interface 127.0.0.27 -H "Authorization: Bearer $tok" "$j"
is "$STATUS:$BODY" "200:jwt file" "jwt:sub: an expired token of alice's keys by its address"
tok="$(printf '{"alg":"none"}' | b64u).$(printf '{"sub":"alice"}' | b64u)."
req --interface 127.0.0.28 -H "Authorization: Bearer $tok" "$j"
is "$STATUS:$BODY" "200:jwt file" "jwt:sub: an alg none token of alice's keys by its address"

# ============================================================================
# smoothing (delay = 0, 5 a second, burst 10): 20 at once; auth_request's
# yes comes at each one's turn, so nginx holds the client: 10 served one
# turn (200 ms) apart, 10 refused at once
for i in $(seq 1 20); do
	printf 'url = "%s/static/smooth/a.txt"\noutput = /dev/null\n' "$base"
done >"$T/smooth.cfg"
curl -sS -Z --parallel-immediate --parallel-max 20 -m 20 -K "$T/smooth.cfg" \
    --interface 127.0.0.29 -D "$T/smooth.h" -w '%{http_code} %{time_total}\n' \
    2>/dev/null | awk '{ printf "%s %d\n", $1, $2 * 1000 }' | sort -n -k2 \
    >"$T/smooth.out"
is "$(grep -c '^200 ' "$T/smooth.out") $(grep -c '^429 ' "$T/smooth.out")" "10 10" \
    "delay: 10 served, 10 refused"
diag "delay: ms until each answer: $(tr '\n' ' ' <"$T/smooth.out")"
k=0 spread=1
while read -r ms; do
	if [ "$ms" -lt $((k * 200 - 40)) ] || [ "$ms" -gt $((k * 200 + 600)) ]; then
		spread=0
	fi
	k=$((k + 1))
done < <(awk '$1 == 200 { print $2 }' "$T/smooth.out")
is "$spread" 1 "delay: nginx serves each at its turn, 200 ms apart"
is "$(awk '$1 == 429 && $2 > 1000' "$T/smooth.out" | wc -l)" 0 \
    "delay: the refused are answered at once"
is "$(grep -ci '^X-Rlgate-Delay: [0-9]' "$T/smooth.h")" 9 \
    "delay: the snippet passes X-Rlgate-Delay on to the client (9 held)"

# ============================================================================
# a route's spellings count under it (limit 1: the first passes, nginx's
# 404 or 405, then 429), exact and prefix routes, the %3B of a ';' too;
# "..;" is refused
is "$(spellings 127.0.0.16 "$base" /api/search /api/search/ '/api/search;x' \
    /API/search /api/Search '/api/search%3Bx' '/api;v=1/SEARCH;x/')" \
    "- 429 429 429 429 429 429" \
    "exact route: /api/search/, ;x, /API, /Search, %3Bx, /api;v=1/SEARCH;x/: all 429 after the first"
is "$(header Content-Type)" application/json "... rlgate's 429"
req --interface 127.0.0.16 "$base/api/other"
is "$STATUS" 404 "... another path under /api/* still passes (another route)"
is "$(spellings 127.0.0.17 "$base" -X POST /login /login/ /LOGIN '/login;jsessionid=x' '/Login%3bx')" \
    "- 429 429 429 429" "exact route, POST: /login/, /LOGIN, ;jsessionid=x, %3b: all 429 after the first"
is "$(spellings 127.0.0.18 "$base" /private/a /PRIVATE/a '/private;x/a' /Private/ /private '/private;x' '/private%3Bx/b')" \
    "- 429 429 429 429 429 429" "prefix route: /PRIVATE/a, /private;x/a, /Private/, /private, /private;x, %3Bx/b: all 429 after the first"
wait_until 3000 grep -q 'route=search policy=spell .*path=/api/search/$' "$T/main.log"
like "$(grep 'client=127.0.0.16 route=search ' "$T/main.log" | head -1)" \
    'path=/api/search/$' "the log shows the path as the client spelled it"
req --path-as-is --interface 127.0.0.19 "$base/private/..;/api/search"
is "$STATUS:$(header Content-Type)" 400:application/json "/private/..;/api/search: rlgate's 400"

# ============================================================================
# exactness under parallel load: one client (127.0.0.9), 8 connections at
# a time, 200 requests against a limit of 50
seq 1 $LOAD_REQUESTS | xargs -P 8 -I{} curl -s -o /dev/null --max-time 10 \
    --interface 127.0.0.9 -w '%{http_code}\n' "$base/static/load/a.txt?n={}" \
    >"$T/load.codes" 2>"$T/load.err"
is "$(grep -c '^200$' "$T/load.codes")" $LOAD_LIMIT "parallel load: exactly $LOAD_LIMIT answers 200"
is "$(grep -c '^429$' "$T/load.codes")" $((LOAD_REQUESTS - LOAD_LIMIT)) "parallel load: exactly $((LOAD_REQUESTS - LOAD_LIMIT)) answers 429"
is "$(wc -l <"$T/load.codes")" $LOAD_REQUESTS "parallel load: $LOAD_REQUESTS answers in all"

# ============================================================================
# kept connections: the shipped /rlgate/ location (fastcgi_keep_conn on)
# and the upstream's keepalive 16 per nginx worker keep more connections
# than rlgate's 4 threads in all. Rounds of 40 requests at once: every one
# answered, none waiting behind an idle kept connection (for rlgate's 60 s
# read deadline, with a worker waiting on each).
# bursts of 60 at once until nginx keeps more than 4 (its two workers
# open one per request in flight, and keep up to 16 each)
nkept=0
for _ in 1 2 3 4 5 6 7 8 9 10; do
	seq 1 60 | xargs -P 60 -I{} curl -s -o /dev/null --max-time 10 \
	    "$base/rlgate/status" 2>/dev/null
	nkept=$(ss -xH state connected 2>/dev/null | awk -v s="$sock" '$5 == s' | wc -l)
	[ "$nkept" -ge 6 ] && break
done
between "$nkept" 6 64 "kept connections: nginx keeps $nkept to rlgate, more than its 4 threads"
for round in 1 2 3; do
	seq 1 40 | xargs -P 40 -I{} curl -s -o /dev/null --max-time 10 \
	    -w '%{http_code}\n' "$base/rlgate/health" >"$T/kept.codes" 2>"$T/kept.err"
	is "$(grep -c '^200$' "$T/kept.codes")" 40 "kept connections, round $round: 40 requests at once, 40 answered 200"
done
nkept=$(ss -xH state connected 2>/dev/null | awk -v s="$sock" '$5 == s' | wc -l)
# an auth_request subrequest's connection is never kept (nginx reads only
# the head of the answer): none stays open after guarded requests
for i in 1 2 3; do
	req --interface 127.0.4.1 "$base/static/hello.txt"
done
nkept2=$(ss -xH state connected 2>/dev/null | awk -v s="$sock" '$5 == s' | wc -l)
ok "$([ "$nkept2" -le "$nkept" ] && echo 0 || echo 1)" \
    "guarded requests add no kept connection ($nkept2, $nkept before)"
is "$(grep -c 'event=read_deadline' "$T/main.log")" 0 "kept connections: no read deadline passed"

# ============================================================================
# admin endpoints through the /rlgate/ location
req "$base/rlgate/health"
is "$STATUS" 200 "admin: /rlgate/health from 127.0.0.1: 200"
req "$base/rlgate/metrics"
like "$BODY" 'rlgate_requests_total' "admin: /rlgate/metrics has the counters"
req --interface 127.0.0.10 "$base/rlgate/health"
is "$STATUS" 404 "admin: from a client not in [admin] allow: 404"

no_unexpected "json, 429s"

# ============================================================================
# [response] errors = problem (127.0.0.11)
restart_rlgate problem 20
for i in $(seq 1 $((LIMIT + 1))); do
	keep "p$i" --interface 127.0.0.11 "$ok_static"
done
recall "p$LIMIT"
is "$STATUS:$(header RateLimit-Remaining)" "200:0" "problem: request $LIMIT: 200"
is "$(header X-RateLimit-Remaining)" 0 "style all, 200: X-RateLimit-Remaining 0"
like "$(header RateLimit-Policy)" "^\"?default\"?;q=$LIMIT;w=$WINDOW" "style all, 200: RateLimit-Policy"
like "$(header RateLimit)" "^\"?default\"?;r=0;t=[0-9]+" "style all, 200: RateLimit"
recall "p$((LIMIT + 1))"
is "$STATUS" 429 "problem: request $((LIMIT + 1)): 429"
is "$(header Content-Type)" application/problem+json "problem: Content-Type: application/problem+json"
req --interface 127.0.0.11 "$base/static/missing.html"
is "$STATUS:$(header Content-Type)" 429:application/problem+json \
    "problem: missing.html over the limit: 429, Content-Type: application/problem+json"
recall "p$((LIMIT + 1))"
between "$(header Retry-After)" 1 $WINDOW "problem: Retry-After"
is "$(header RateLimit-Remaining)" 0 "problem: RateLimit-Remaining 0"
is "$(header X-RateLimit-Limit)" $LIMIT "style all, 429: X-RateLimit-Limit $LIMIT"
like "$(header RateLimit-Policy)" "^\"?default\"?;q=$LIMIT;w=$WINDOW" "style all, 429: RateLimit-Policy"
diag "problem 429: $BODY"
diag "ietf headers: RateLimit-Policy: $(header RateLimit-Policy); RateLimit: $(header RateLimit)"
like "$BODY" '^\{.*"status":429' "problem: a problem body with status 429"
like "$BODY" 'quota-exceeded' "problem: of type quota-exceeded"
no_unexpected "problem"

# ============================================================================
# [response] status = 403 (127.0.0.15): the refusal's own code, which the
# include answers like any other, though 403 is also how rlgate says no to
# nginx
restart_rlgate status 20
for i in $(seq 1 $((LIMIT + 1))); do
	keep "s$i" --interface 127.0.0.15 "$ok_static"
done
recall "s$LIMIT"
is "$STATUS:$BODY" "200:$STATIC_BODY" "status = 403: request $LIMIT: 200 and the file"
recall "s$((LIMIT + 1))"
is "$STATUS" 403 "status = 403: request $((LIMIT + 1)): 403"
is "$(header Content-Type)" application/json "status = 403: Content-Type: application/json"
between "$(header Retry-After)" 1 $WINDOW "status = 403: Retry-After"
is "$(header RateLimit-Remaining)" 0 "status = 403: RateLimit-Remaining 0"
like "$BODY" '^\{"error":\{"code":403,' "status = 403: the JSON body says 403"
unlike "$BODY" "$STATIC_BODY" "status = 403: the file is not served"
no_unexpected "status = 403"

# ============================================================================
# a store failure, on_error = closed (127.0.0.12)
switch_rlgate closed 30
req --interface 127.0.0.12 "$ok_static"
is "$STATUS" 503 "store failure, closed: 503"
is "$(header Content-Type)" application/json "store failure, closed: Content-Type: application/json"
between "$(header Retry-After)" 1 60 "store failure, closed: Retry-After in 1..60"
like "$BODY" "$(re_err 503)" "store failure, closed: the JSON error body"
unlike "$BODY" "$STATIC_BODY" "store failure, closed: the file is not served"
req --interface 127.0.0.12 "$ok_app"
is "$STATUS" 503 "store failure, closed, proxied: 503"
no_unexpected "store failure, closed"

# ... on_error = open
switch_rlgate open 30
req --interface 127.0.0.12 "$ok_static"
is "$STATUS:$BODY" "200:$STATIC_BODY" "store failure, open: 200 and the file"
has_header RateLimit-Limit
ok $((! $?)) "store failure, open: no rate-limit headers"
req --interface 127.0.0.12 "$ok_app"
is "$STATUS:$BODY" "200:$APP_BODY" "store failure, open, proxied: 200 and the backend's content"
no_unexpected "store failure, open"

# ============================================================================
# a bad RLGATE_ROLE: rlgate's 500, nginx's 500
req --interface 127.0.0.13 "$base/bogus/hello.txt"
is "$STATUS" 500 "RLGATE_ROLE bogus: 500"
unlike "$BODY" "$STATIC_BODY" "RLGATE_ROLE bogus: nothing served"
wait_until 3000 grep -q 'reason=bad_role' "$T/open.log"
like "$(grep 'reason=bad_role' "$T/open.log" | head -1)" 'event=bad_request .*reason=bad_role' \
    "rlgate logs event=bad_request reason=bad_role"
like "$(grep 'auth request unexpected status' "$T/nginx-error.log" | head -1)" 'unexpected status: 500' \
    "nginx logs \"auth request unexpected status: 500\""

# ============================================================================
# rlgate down: nginx's 500, nothing served (fails closed)
stop_rlgate_fcgi open
CUR=
req --interface 127.0.0.14 "$ok_static"
is "$STATUS" 500 "rlgate down: nginx's 500"
unlike "$BODY" "$STATIC_BODY" "rlgate down: the file is not served"

pid_alive "$NGINX_PID"
ok $? "nginx still runs"

done_testing
