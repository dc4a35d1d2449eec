#!/usr/bin/env bash
# caddy_auth.sh: rlgate as the side service of Caddy 2 (forward_auth style),
# with the shipped www/caddy/rlgate.caddy, guarding a static folder
# (file_server) and an HTTP backend (reverse_proxy to a small python3
# server that echoes the request it got):
#   - FastCGI (import rlgate unix//SOCKET, and HOST:PORT): admitted requests
#     get the backend's answer plus rlgate's rate-limit headers (only those
#     rlgate sent); over the limit, rlgate's 429 as it is (Retry-After,
#     headers, JSON body, its Content-Type for a .txt and a .html alike),
#     with no "Status:" header leaking; clients are
#     counted apart; forged headers change nothing; the original method
#     picks the route (a POST has its own policy, its body reaches the
#     backend); admin endpoints; a store failure gives 503 (closed) or
#     passes without headers (open); 200 requests from 8 parallel curls
#     against a limit of 50: exactly 50 admitted.
#   - HTTP (import rlgate_http): Caddy -> lighttpd with the shipped
#     www/lighttpd/forward_auth.conf -> rlgate, which takes the original
#     method, URI and client from X-Forwarded-* of its trusted front; a
#     client's X_Forwarded_* beside Caddy's header gets 400.
: "${RLGATE_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/integration/lib.sh
. "$RLGATE_SRCDIR/tests/integration/lib.sh" || { echo "Bail out! cannot read lib.sh"; exit 99; }

command -v caddy >/dev/null 2>&1 || skip_all "caddy is not installed"
setup_test caddy lighttpd spawn-fcgi curl python3 xargs

WINDOW=3600
LIMIT=3
HELLO='hello from a guarded static file'
make_rundir

# ---- the pieces -------------------------------------------------------------

# the site: a static folder, a free folder, nothing else
site="$T/site"
mkdir -p "$site/static" "$site/free"
printf '%s\n' "$HELLO" >"$site/static/hello.txt"
echo free >"$site/free/x.txt"
chmod -R a+rX "$site"

# the HTTP backend: answers any method with a JSON echo of the request
cat >"$T/backend.py" <<'EOF'
import sys, json, http.server
class H(http.server.BaseHTTPRequestHandler):
    def _do(self):
        n = int(self.headers.get('Content-Length') or 0)
        body = self.rfile.read(n).decode() if n else ''
        out = json.dumps({"backend": "python", "method": self.command,
                          "path": self.path, "body": body,
                          "headers": sorted(k.lower() for k in self.headers.keys())},
                         sort_keys=True).encode()
        self.send_response(200)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(out)))
        self.end_headers()
        if self.command != 'HEAD':
            self.wfile.write(out)
    do_GET = do_POST = do_PUT = do_HEAD = _do
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(('127.0.0.1', int(sys.argv[1])), H).serve_forever()
EOF
BPORT=$(free_port) || bail_out "no free port"
python3 "$T/backend.py" "$BPORT" >"$T/backend.log" 2>&1 &
track_pid $!
wait_for_port "$BPORT" 10 $! || bail_out "the python backend did not start: $(cat "$T/backend.log")"

# rlgate_conf NAME STYLE ERRORS [STORE_LINES] [CLIENT_LINES]: $T/NAME.conf
# on $T/NAME.db: [policy default] $LIMIT per hour, [policy posts] 2 per
# hour for POST, /free/* not limited.
rlgate_conf() {
	cat >"$T/$1.conf" <<EOF
; written by $(basename "$0")
[store]
path = $T/$1.db
${4:-}

[headers]
style = $2

[response]
errors = $3

[client]
${5:-}

[policy default]
algorithm = fixed_window
limit = $LIMIT
window = $WINDOW
key = ip

[policy posts]
algorithm = fixed_window
limit = 2
window = $WINDOW
key = ip

[route post]
path = /*
methods = POST
policies = posts

[route free]
path = /free/*
policies = none

[route all]
path = /*
policies = default
EOF
}

# main: the FastCGI guard on a unix socket (ietf headers)
rlgate_conf main ietf json
restart_rlgate main 60

# load: the FastCGI guard on TCP (50 per hour, x-ratelimit, problem)
LOAD_LIMIT=50
{
	printf '; written by %s\n[store]\npath = %s\n\n' "$(basename "$0")" "$T/load.db"
	printf '[headers]\nstyle = x-ratelimit\n\n[response]\nerrors = problem\n\n'
	printf '[policy default]\nalgorithm = fixed_window\nlimit = %s\nwindow = %s\nkey = ip\n' \
	    $LOAD_LIMIT $WINDOW
} >"$T/load.conf"
check_conf load
RLPORT=$(free_port) || bail_out "no free port"
start_rlgate_tcp load "$RLPORT" "$T/load.conf" 2 --threads 2

# http: behind lighttpd (forward_auth.conf), Caddy's address trusted
rlgate_conf http draft03 json "" "trusted_proxies = 127.0.0.1/32"
check_conf http
start_rlgate_fcgi http "$run/http.sock" "$T/http.conf" 2 --threads 2

LPORT=$(free_port) || bail_out "no free port"
mkdir -p "$T/lighttpd/htdocs"
chmod 755 "$T/lighttpd" "$T/lighttpd/htdocs"
write_lighttpd_base "$T/lighttpd.conf" "$LPORT" "$T/lighttpd/htdocs" \
    "$T/lighttpd/lighttpd.pid" "$T/lighttpd/error.log" <<EOF
var.rlgate_forward_auth        = "/.rlgate/auth"
var.rlgate_forward_auth_socket = "$run/http.sock"
include "$RLGATE_SRCDIR/www/lighttpd/forward_auth.conf"
EOF
start_lighttpd "$T/lighttpd.conf" "$LPORT"

# Caddy: three sites, each on its own loopback port
CPORT=$(free_port) || bail_out "no free port"
CPORT2=$(free_port) || bail_out "no free port"
HPORT=$(free_port) || bail_out "no free port"
cat >"$T/Caddyfile" <<EOF
# written by $(basename "$0")
{
	admin off
	auto_https off
}
import $RLGATE_SRCDIR/www/caddy/rlgate.caddy

# the FastCGI guard on a unix socket: a static folder and an HTTP backend
http://127.0.0.1:$CPORT {
	bind 127.0.0.1
	import rlgate unix/$sock
	import rlgate_admin unix/$sock
	reverse_proxy /api/* 127.0.0.1:$BPORT
	root * $site
	file_server
}

# the FastCGI guard on TCP
http://127.0.0.1:$CPORT2 {
	bind 127.0.0.1
	import rlgate 127.0.0.1:$RLPORT
	root * $site
	file_server
}

# the HTTP guard, through lighttpd
http://127.0.0.1:$HPORT {
	bind 127.0.0.1
	import rlgate_http 127.0.0.1:$LPORT /.rlgate/auth
	reverse_proxy /api/* 127.0.0.1:$BPORT
	root * $site
	file_server
}
EOF
mkdir -p "$T/caddy-home"
HOME="$T/caddy-home" XDG_CONFIG_HOME="$T/caddy-home/config" \
    XDG_DATA_HOME="$T/caddy-home/data" \
    caddy run --config "$T/Caddyfile" --adapter caddyfile </dev/null >"$T/caddy.log" 2>&1 &
CADDY_PID=$!
track_pid $CADDY_PID
for p in "$CPORT" "$CPORT2" "$HPORT"; do
	wait_for_port "$p" 15 $CADDY_PID ||
		bail_out "caddy did not listen on $p: $(tail -5 "$T/caddy.log")"
done
C="http://127.0.0.1:$CPORT"
C2="http://127.0.0.1:$CPORT2"
H="http://127.0.0.1:$HPORT"

# count_headers NAME: how many header lines NAME the last answer has.
count_headers() {
	tr -d '\r' <"$T/last.headers" | grep -ci "^$1:"
}

# no_status_header WHAT: the last answer has no "Status:" header.
no_status_header() {
	is "$(count_headers Status)" 0 "$1: no Status header leaks to the client"
}

# rlgate_said NAME ERE: a line of $T/NAME.log matches ERE.
rlgate_said() {
	grep -qE -- "$2" "$T/$1.log"
}

# ---- FastCGI on a unix socket: a static folder ------------------------------

for i in 1 2 3; do
	req --interface 127.0.0.2 "$C/static/hello.txt?n=$i"
	is "$STATUS" 200 "static: request $i: 200"
	is "$BODY" "$HELLO" "static: request $i: the file's body"
	is "$(header RateLimit-Policy)" '"default";q=3;w=3600' "static: request $i: RateLimit-Policy"
	like "$(header RateLimit)" "^\"default\";r=$((LIMIT - i));t=[0-9]+\$" \
	    "static: request $i: RateLimit r=$((LIMIT - i))"
done
is "$(count_headers 'RateLimit-Limit')$(count_headers 'X-RateLimit-Limit')" 00 \
    "static: only the headers of the ietf style"
like "$(header Content-Type)" '^text/plain' "static: the file's Content-Type"
no_status_header "static 200"

req --interface 127.0.0.2 "$C/static/hello.txt"
is "$STATUS" 429 "static: request 4: 429"
is "$(header Content-Type)" application/json "static 429: Content-Type: application/json"
is "$(header Cache-Control)" no-store "static 429: Cache-Control: no-store"
between "$(header Retry-After)" 1 $WINDOW "static 429: Retry-After in 1..$WINDOW"
like "$(header RateLimit)" '^"default";r=0;t=[0-9]+$' "static 429: RateLimit r=0"
is "$(header RateLimit-Policy)" '"default";q=3;w=3600' "static 429: RateLimit-Policy"
is "$BODY" "$BODY_429" "static 429: rlgate's JSON body, not the file"
no_status_header "static 429"
# Caddy's built-in types (.txt, .html) never dress rlgate's refusal
req --interface 127.0.0.2 "$C/static/missing.html"
is "$STATUS:$(header Content-Type)" 429:application/json \
    "static: missing.html over the limit: 429, Content-Type: application/json"
is "$BODY" "$BODY_429" "static: missing.html 429: rlgate's JSON body"
hreq --interface 127.0.0.2 "$C/static/hello.txt"
is "$STATUS" 429 "static: HEAD over the limit: 429"

# a route with policies = none: served to the limited client, no headers
req --interface 127.0.0.2 "$C/free/x.txt"
is "$STATUS" 200 "/free/* (policies = none): served to a limited client"
is "$(count_headers 'RateLimit')$(count_headers 'RateLimit-Policy')" 00 \
    "/free/*: no rate-limit header (rlgate sent none)"

# a missing file counts, and Caddy's 404 carries the headers
req --interface 127.0.0.5 "$C/static/nothing-here.txt"
is "$STATUS" 404 "a missing file: Caddy's 404"
like "$(header RateLimit)" '^"default";r=2;' "a missing file is counted (r=2 on the 404)"

# ---- FastCGI: an HTTP backend; another client; forged headers --------------

req --interface 127.0.0.3 "$C/api/x?a=1"
is "$STATUS" 200 "backend: another client has its own quota"
like "$BODY" '"backend": "python"' "backend: the backend's answer"
like "$BODY" '"path": "/api/x\?a=1"' "backend: the backend got the original URI"
like "$(header RateLimit)" '^"default";r=2;' "backend: request 1: RateLimit r=2"
unlike "$BODY" '"ratelimit' "backend: the backend does not get rlgate's headers"

forged=(-H 'X-Forwarded-For: 127.0.0.9' -H 'X_Forwarded_For: 127.0.0.10'
	-H 'X-Forwarded-Uri: /free/x.txt' -H 'X_Forwarded_Uri: /free/x.txt'
	-H 'X-Forwarded-Method: POST' -H 'X_Forwarded_Method: POST'
	-H 'Forwarded: for=127.0.0.11' -H 'Rlgate-Role: none' -H 'Rlgate_Uri: /free/x.txt'
	-H 'RateLimit: "default";r=99;t=1' -H 'RateLimit-Policy: "default";q=99;w=1'
	-H 'X-RateLimit-Remaining: 99')
req --interface 127.0.0.3 "${forged[@]}" "$C/api/x"
is "$STATUS" 200 "forged headers: request 2: 200"
like "$(header RateLimit)" '^"default";r=1;' "forged headers: counted as the same client, route and policy (r=1)"
is "$(count_headers RateLimit)" 1 "forged headers: one RateLimit header, rlgate's"
is "$(header RateLimit-Policy)" '"default";q=3;w=3600' "forged headers: rlgate's RateLimit-Policy"
is "$(count_headers X-RateLimit-Remaining)" 0 "forged headers: a client's X-RateLimit-Remaining is not echoed"
like "$BODY" '"method": "GET"' "forged headers: the backend got a GET"
req --interface 127.0.0.3 "${forged[@]}" "$C/api/x"
like "$(header RateLimit)" '^"default";r=0;' "forged headers: request 3: r=0"
req --interface 127.0.0.3 "${forged[@]}" "$C/api/x"
is "$STATUS" 429 "forged headers: request 4: 429"
is "$BODY" "$BODY_429" "forged headers: 429: the JSON body"
rlgate_said main "event=reject client=127\.0\.0\.3 route=all policy=default .*method=GET path=/api/x"
ok $? "rlgate logged the reject for 127.0.0.3, route all, GET /api/x"
# (/free/* has policies = none: its requests are logged as event=unguarded)
rlgate_said main 'bad_request|event=reject client=127\.0\.0\.(9|10|11) |event=[a-z_]*reject .*route=(free|post) '
ok $((! $?)) "no bad request, no forged client, no other route in rlgate's log"

# ---- FastCGI: the original method picks the route ----------------------------

req --interface 127.0.0.4 -X POST -d 'a=1&b=2' "$C/api/p"
is "$STATUS" 200 "POST: 200"
like "$BODY" '"method": "POST"' "POST: the backend got a POST"
like "$BODY" '"body": "a=1&b=2"' "POST: the backend got the body"
is "$(header RateLimit-Policy)" '"posts";q=2;w=3600' "POST: counted under [policy posts]"
like "$(header RateLimit)" '^"posts";r=1;' "POST: r=1"
req --interface 127.0.0.4 -X PUT -d 'a=1' "$C/api/p"
is "$(header RateLimit-Policy)" '"default";q=3;w=3600' "PUT: [policy default]"
req --interface 127.0.0.4 -X POST -d 'a=1' "$C/api/p"
like "$(header RateLimit)" '^"posts";r=0;' "POST 2: r=0"
req --interface 127.0.0.4 -X POST -d 'a=1' "$C/api/p"
is "$STATUS" 429 "POST 3: 429"
is "$(header RateLimit-Policy)" '"posts";q=2;w=3600' "POST 3: the posts policy refused it"
rlgate_said main "event=reject client=127\.0\.0\.4 route=post policy=posts .*method=POST path=/api/p"
ok $? "rlgate logged the reject for 127.0.0.4, route post, POST /api/p"
req --interface 127.0.0.4 "$C/api/p"
like "$(header RateLimit)" '^"default";r=1;' "GET after the POSTs: [policy default] r=1 (the PUT and this)"

# ---- admin endpoints (rlgate_admin) -------------------------------------------

req --interface 127.0.0.1 "$C/rlgate/health"
is "$STATUS" 200 "admin: /rlgate/health from 127.0.0.1: 200"
is "$BODY" '{"status":"ok"}' "admin: the health body"
no_status_header "admin 200"
req --interface 127.0.0.6 "$C/rlgate/health"
is "$STATUS" 404 "admin: /rlgate/health from another client: rlgate's 404"
is "$(header Content-Type)" application/json "admin: 404: Content-Type: application/json"

# ---- the store fails ----------------------------------------------------------

rlgate_conf closed ietf problem "on_error = closed"
sed -i "s|^path = .*|path = $T/missing/closed.db|" "$T/closed.conf"
# the database's directory does not exist (--check-config would refuse
# it; rlgate starts and fails every request, as in store_failure.sh)
stop_rlgate_fcgi main
rm -f "$sock"
start_rlgate_fcgi closed "$sock" "$T/closed.conf" 2 --threads 2
req --interface 127.0.0.7 "$C/static/hello.txt"
is "$STATUS" 503 "store failure, on_error = closed: 503"
is "$(header Content-Type)" application/problem+json "503: Content-Type: application/problem+json"
between "$(header Retry-After)" 1 $WINDOW "503: Retry-After"
like "$BODY" '"status":503' "503: the problem body"
unlike "$BODY" "$HELLO" "503: the file is not served"
no_status_header "503"

rlgate_conf open ietf problem "on_error = open"
sed -i "s|^path = .*|path = $T/missing/open.db|" "$T/open.conf"
stop_rlgate_fcgi closed
rm -f "$sock"
start_rlgate_fcgi open "$sock" "$T/open.conf" 2 --threads 2
req --interface 127.0.0.7 "$C/static/hello.txt"
is "$STATUS" 200 "store failure, on_error = open: 200"
is "$BODY" "$HELLO" "open: the file is served"
is "$(count_headers RateLimit)$(count_headers RateLimit-Policy)" 00 "open: no rate-limit header"

# rlgate down: Caddy fails closed
stop_rlgate_fcgi open
req --interface 127.0.0.7 "$C/static/hello.txt"
is "$STATUS" 502 "rlgate stopped: 502 from Caddy"
unlike "$BODY" "$HELLO" "rlgate stopped: the file is not served"

# ---- FastCGI on TCP: 200 requests from 8 parallel curls, limit 50 -------------

ensure_window_room $WINDOW 30
seq 1 200 | xargs -P 8 -I{} curl -s -o /dev/null --max-time 10 --interface 127.0.0.8 \
    -w '%{http_code}\n' "$C2/static/hello.txt?n={}" >"$T/load.codes" 2>/dev/null
is "$(grep -c '^200$' "$T/load.codes")" $LOAD_LIMIT "load: exactly $LOAD_LIMIT x 200"
is "$(grep -c '^429$' "$T/load.codes")" $((200 - LOAD_LIMIT)) "load: exactly $((200 - LOAD_LIMIT)) x 429"
req --interface 127.0.0.8 "$C2/static/hello.txt"
is "$STATUS" 429 "load: 429 after the run"
is "$(header Content-Type)" application/problem+json "load 429: Content-Type: application/problem+json"
like "$BODY" '"status":429' "load 429: the problem body"
is "$(header X-RateLimit-Limit)" $LOAD_LIMIT "load 429: X-RateLimit-Limit $LOAD_LIMIT (x-ratelimit style)"
is "$(header X-RateLimit-Remaining)" 0 "load 429: X-RateLimit-Remaining 0"
between "$(header Retry-After)" 1 $WINDOW "load 429: Retry-After"
no_status_header "load 429"
req --interface 127.0.0.8 "$C2/static/missing.html"
is "$STATUS:$(header Content-Type)" 429:application/problem+json \
    "load: missing.html: 429, Content-Type: application/problem+json"
req --interface 127.0.0.9 "$C2/static/hello.txt"
is "$(header X-RateLimit-Remaining)" $((LOAD_LIMIT - 1)) "load: another client: X-RateLimit-Remaining $((LOAD_LIMIT - 1))"
is "$(count_headers RateLimit)$(count_headers RateLimit-Limit)" 00 "load: only the x-ratelimit headers"

# ---- HTTP through lighttpd (rlgate_http, forward_auth.conf) --------------------

ensure_window_room $WINDOW 20
req --interface 127.0.0.2 "$H/static/hello.txt"
is "$STATUS" 200 "http: request 1: 200"
is "$BODY" "$HELLO" "http: the file's body"
is "$(header RateLimit-Limit)" $LIMIT "http: RateLimit-Limit $LIMIT (draft03)"
is "$(header RateLimit-Remaining)" 2 "http: RateLimit-Remaining 2"
no_status_header "http 200"
is "$(count_headers Accept-Ranges)" 1 "http: lighttpd's own headers are not copied (one Accept-Ranges, Caddy's)"
req --interface 127.0.0.2 -H 'X-Forwarded-For: 127.0.0.9' -H 'Forwarded: for=127.0.0.10' \
    -H 'Rlgate-Role: none' "$H/static/hello.txt"
is "$(header RateLimit-Remaining)" 1 "http: forged X-Forwarded-For/Forwarded: the same client (Remaining 1)"
req --interface 127.0.0.3 "$H/static/hello.txt"
is "$(header RateLimit-Remaining)" 2 "http: the client comes from X-Forwarded-For (another client: Remaining 2)"
req --interface 127.0.0.2 -X POST -d 'a=1' "$H/api/p"
is "$STATUS" 200 "http: POST: 200"
like "$BODY" '"body": "a=1"' "http: POST: the backend got the body"
is "$(header RateLimit-Limit)" 2 "http: POST: [policy posts] (the method from X-Forwarded-Method)"
req --interface 127.0.0.2 "$H/free/x.txt"
is "$STATUS" 200 "http: /free/x.txt: 200"
is "$(count_headers RateLimit-Limit)" 0 "http: /free/*: not limited (the URI from X-Forwarded-Uri)"

for n in Uri Method For; do
	req --interface 127.0.0.4 -H "X_Forwarded_$n: /free/x.txt" "$H/static/hello.txt"
	is "$STATUS" 400 "http: a client's X_Forwarded_$n beside Caddy's X-Forwarded-$n: 400"
	is "$(header Content-Type)" application/json "http: 400 (X_Forwarded_$n): Content-Type: application/json"
	like "$BODY" "$(re_err 400)" "http: 400 (X_Forwarded_$n): the JSON body"
	unlike "$BODY" "$HELLO" "http: 400 (X_Forwarded_$n): the file is not served"
done
# bad requests are logged once, then at most once per 10 s per worker
# thread (the pacing of gate_log.c): the three may have reached one thread
rlgate_said http "event=bad_request peer=[0-9.]+ reason=duplicate_header header=X-Forwarded-Uri "
ok $? "http: rlgate logged duplicate_header X-Forwarded-Uri"
req --interface 127.0.0.4 "$H/static/hello.txt"
is "$(header RateLimit-Remaining)" 2 "http: the 400s were not counted (Remaining 2)"

req --interface 127.0.0.2 "$H/static/hello.txt"
is "$(header RateLimit-Remaining)" 0 "http: request 3: RateLimit-Remaining 0"
req --interface 127.0.0.2 "$H/static/hello.txt"
is "$STATUS" 429 "http: request 4: 429"
between "$(header Retry-After)" 1 $WINDOW "http 429: Retry-After"
is "$(header RateLimit-Remaining)" 0 "http 429: RateLimit-Remaining 0"
is "$(header Content-Type)" application/json "http 429: Content-Type: application/json"
is "$BODY" "$BODY_429" "http 429: the JSON body"
req --interface 127.0.0.2 "$H/static/missing.html"
is "$STATUS:$(header Content-Type)" 429:application/json \
    "http: missing.html over the limit: 429, Content-Type: application/json"

# rlgate down: lighttpd's 503, passed on by Caddy
stop_rlgate_fcgi http
req --interface 127.0.0.5 "$H/static/hello.txt"
is "$STATUS" 503 "http: rlgate stopped: lighttpd's 503 reaches the client"
unlike "$BODY" "$HELLO" "http: rlgate stopped: the file is not served"

done_testing
