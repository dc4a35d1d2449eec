#!/usr/bin/env bash
# cgi.sh: rlgate as a CGI program: run directly with a CGI environment (one
# request per process, all sharing the SQLite file), then under a real
# lighttpd with mod_cgi. [store] commit = auto is each in a CGI process
# (no decision table); an explicit behind is kept.
: "${RLGATE_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/integration/lib.sh
. "$RLGATE_SRCDIR/tests/integration/lib.sh" || { echo "Bail out! cannot read lib.sh"; exit 99; }

setup_test sqlite3 timeout

# A long window, so the sequence never crosses a boundary (we still make
# sure that 10 s are left in it).
LIMIT=3
WINDOW=3600
conf="$T/cgi.conf"
db="$T/cgi.db"
write_rlgate_conf "$conf" "$db" $LIMIT $WINDOW

# cgi METHOD URI [REMOTE_ADDR [ENV=VALUE...]]: one CGI run. REMOTE_ADDR "-"
# leaves it unset. Sets RC, STATUS (from the Status: line,
# 200 when absent), BODY, and $T/last.headers for header().
cgi() {
	local method=$1 uri=$2 addr=${3:--}
	shift 2
	[ $# -gt 0 ] && shift
	local envs=(PATH="$PATH" GATEWAY_INTERFACE=CGI/1.1 SERVER_PROTOCOL=HTTP/1.1
	    SERVER_SOFTWARE=cgi.sh SERVER_NAME=127.0.0.1 SERVER_PORT=80
	    REQUEST_METHOD="$method")
	[ "$uri" != - ] && envs+=(REQUEST_URI="$uri")
	[ "$addr" != - ] && envs+=(REMOTE_ADDR="$addr")
	case $uri in
	*\?*) envs+=(QUERY_STRING="${uri#*\?}") ;;
	esac
	env -i "${envs[@]}" "$@" timeout 10 "$RLGATE_BIN" --config "$conf" \
	    </dev/null >"$T/cgi.out" 2>"$T/cgi.err"
	RC=$?
	# header block: up to the first empty line (CRLF or LF)
	awk '{ sub(/\r$/, "") } /^$/ { exit } { print }' "$T/cgi.out" >"$T/last.headers"
	BODY=$(awk 'h { print; next } { sub(/\r$/, "") } /^$/ { h = 1 }' "$T/cgi.out")
	local st
	st=$(header Status)
	STATUS=${st%% *}
	[ -n "$STATUS" ] || STATUS=200
	[ -s "$T/cgi.err" ] && diag "stderr: $(cat "$T/cgi.err")"
}

ensure_window_room $WINDOW 10

# --- 200s then 429, every header
for i in $(seq 1 $LIMIT); do
	cgi GET /api/v1/resources 127.0.0.1
	is "$RC" 0 "request $i: exits 0"
	is "$STATUS" 200 "request $i: Status 200"
	like "$(header Status)" '^200 OK$' "request $i: 'Status: 200 OK'"
	check_200_headers "$i" $LIMIT $WINDOW
	like "$BODY" "$RE_BODY_200" "request $i: success JSON body"
done
reset_before=$(header RateLimit-Reset)

cgi GET /api/v1/resources 127.0.0.1
is "$RC" 0 "over the limit: exits 0"
like "$(header Status)" '^429 ' "over the limit: Status 429"
is "$(header Content-Type)" application/json "429: Content-Type: application/json"
is "$(header RateLimit-Limit)" $LIMIT "429: RateLimit-Limit $LIMIT"
is "$(header RateLimit-Remaining)" 0 "429: RateLimit-Remaining 0"
between "$(header RateLimit-Reset)" 1 "$reset_before" "429: RateLimit-Reset in 1..$reset_before"
between "$(header Retry-After)" 1 $WINDOW "429: Retry-After in 1..$WINDOW"
is "$BODY" "$BODY_429" "429: the seed's JSON error body"

cgi GET /api/v1/resources 127.0.0.1
like "$(header Status)" '^429 ' "still 429 (a rejected request consumes no quota, but none is left)"

# the database holds the count
is "$(sql "$db" "SELECT count FROM rlg_state WHERE client = '127.0.0.1'")" $LIMIT \
    "rlg_state holds count $LIMIT for 127.0.0.1"
# commit = auto (the file sets none): each in a CGI process
[ -e "$db-table" ]
ok $((! $?)) "commit = auto in a CGI process is each: no decision table beside the database"

# --- an explicit commit = behind is kept in CGI: the table decides, and the
# process flushes it as it exits
conf_each=$conf
conf="$T/cgi-behind.conf"
COMMIT=behind write_rlgate_conf "$conf" "$T/cgi-behind.db" $LIMIT $WINDOW
cgi GET /api/v1/resources 127.0.0.1
cgi GET /api/v1/resources 127.0.0.1
is "$STATUS:$(header RateLimit-Remaining)" "200:$((LIMIT - 2))" "commit = behind in CGI: counted in the table"
[ -f "$T/cgi-behind.db-table" ]
ok $? "commit = behind in CGI: the table beside the database"
is "$(sql "$T/cgi-behind.db" "SELECT count FROM rlg_state WHERE client = '127.0.0.1'")" 2 \
    "... written to the database by the time the process exits"
conf=$conf_each

# --- smoothing (delay) in CGI: the process sleeps until the turn, then
# answers (2 a second, burst 3: the second request waits 500 ms)
conf_each=$conf
conf="$T/cgi-delay.conf"
cat >"$conf" <<EOF
[store]
path = $T/cgi-delay.db
[policy smooth]
algorithm = token_bucket
limit = 2
window = 1
burst = 3
delay = 0
EOF
t0=$(now_ms)
cgi GET /api/v1/resources 127.0.0.1
is "$STATUS:$(header X-Rlgate-Delay)" "200:" "delay in CGI: the first passes at once"
cgi GET /api/v1/resources 127.0.0.1
t1=$(now_ms)
# its turn is 500 ms after the first's decision, less the time the first
# process took (a sanitizer build starts slowly)
like "$STATUS $(header X-Rlgate-Delay)" '^200 0\.([1-4][0-9][0-9]|500)$' \
    "delay in CGI: the second waits its turn (X-Rlgate-Delay: up to 0.500)"
ok "$([ $((t1 - t0)) -ge 495 ] && echo 0 || echo 1)" \
    "delay in CGI: ... and its process answered at it, 500 ms after the first ($((t1 - t0)) ms)"
conf=$conf_each

# --- the query string is ignored for routing
cgi GET '/api/v1/resources?x=1&y=%2F' 127.0.0.2
is "$STATUS" 200 "a query string does not change the route (200)"
is "$(header RateLimit-Remaining)" $((LIMIT - 1)) "... and is counted for its client"

# --- REQUEST_URI missing: the path comes from SCRIPT_NAME + PATH_INFO
cgi GET - 127.0.0.3 SCRIPT_NAME=/api PATH_INFO=/v1/resources
is "$STATUS" 200 "without REQUEST_URI, SCRIPT_NAME + PATH_INFO route (200)"

# --- HEAD: headers, no body
cgi HEAD /api/v1/resources 127.0.0.4
is "$STATUS" 200 "HEAD: 200"
is "$(header RateLimit-Limit)" $LIMIT "HEAD: RateLimit-Limit"
is "$(header RateLimit-Remaining)" $((LIMIT - 1)) "HEAD: counted like a GET"
is "$BODY" "" "HEAD: no body"
tailhex=$(tail -c 4 "$T/cgi.out" | od -An -tx1 | tr -d ' \n')
like "$tailhex" '(0d0a0d0a|0a0a)$' "HEAD: output ends with the empty line after the headers"

# --- 404
cgi GET /api/v1/nothing-here 127.0.0.5
is "$RC" 0 "404: exits 0"
like "$(header Status)" '^404 ' "another path: Status 404"
is "$(header Content-Type)" application/json "404: Content-Type: application/json"
like "$BODY" "$(re_err 404)" "404: JSON error body"

cgi GET /api/v1/resources/extra 127.0.0.5
is "$STATUS" 404 "a longer path is not the resource (404)"

# --- 405
for m in POST PUT DELETE; do
	cgi $m /api/v1/resources 127.0.0.6
	like "$(header Status)" '^405 ' "$m: Status 405"
	is "$(header Allow)" "GET, HEAD" "$m: Allow: GET, HEAD"
	like "$BODY" "$(re_err 405)" "$m: JSON error body"
done
is "$(header Content-Type)" application/json "405: Content-Type: application/json"

# --- no REMOTE_ADDR: every such request shares one fallback key
cgi GET /api/v1/resources -
is "$STATUS" 200 "without REMOTE_ADDR: 200"
is "$(header RateLimit-Remaining)" $((LIMIT - 1)) "without REMOTE_ADDR: counted"
cgi GET /api/v1/resources -
is "$(header RateLimit-Remaining)" $((LIMIT - 2)) "a second request without REMOTE_ADDR shares the same quota"
cgi GET /api/v1/resources not-an-address
is "$(header RateLimit-Remaining)" $((LIMIT - 3)) "a malformed REMOTE_ADDR shares that fallback key"

# --- IPv6 addresses are keys of their own, in canonical form
cgi GET /api/v1/resources 2001:DB8:0:0::1
is "$STATUS" 200 "an IPv6 client: 200"
cgi GET /api/v1/resources 2001:db8::1
is "$(header RateLimit-Remaining)" $((LIMIT - 2)) "the same IPv6 address written differently is the same client"

# --- under lighttpd with mod_cgi
if ! command -v "$LIGHTTPD_BIN" >/dev/null 2>&1 || [ ! -x "$LIGHTTPD_BIN" ]; then
	diag "lighttpd not installed: mod_cgi part skipped"
	done_testing
fi

LIMIT2=2
conf2="$T/cgi2.conf"
write_rlgate_conf "$conf2" "$T/cgi2.db" $LIMIT2 $WINDOW
mkdir -p "$T/cgiroot"
chmod 755 "$T/cgiroot"
cat >"$T/cgiroot/api" <<EOF
#!/bin/sh
exec "$RLGATE_BIN" --config "$conf2"
EOF
chmod 755 "$T/cgiroot/api"
PORT=$(free_port) || bail_out "no free port"
write_lighttpd_base "$T/lighttpd-cgi.conf" "$PORT" "$T/cgiroot" "$T/lighttpd-cgi.pid" \
    "$T/lighttpd-cgi-error.log" <<EOF
server.modules += ( "mod_cgi" )
# /api/v1/resources runs the file "api" with PATH_INFO /v1/resources
cgi.assign = ( "/api" => "" )
EOF
start_lighttpd "$T/lighttpd-cgi.conf" "$PORT"
base="http://127.0.0.1:$PORT"

ensure_window_room $WINDOW 10
for i in $(seq 1 $LIMIT2); do
	req "$base/api/v1/resources?x=$i"
	is "$STATUS" 200 "mod_cgi: request $i: 200"
	is "$(header RateLimit-Remaining)" $((LIMIT2 - i)) "mod_cgi: request $i: RateLimit-Remaining $((LIMIT2 - i))"
done
is "$(header Content-Type)" application/json "mod_cgi: Content-Type: application/json"
like "$BODY" "$RE_BODY_200" "mod_cgi: success JSON body"
req "$base/api/v1/resources"
is "$STATUS" 429 "mod_cgi: over the limit: 429"
is "$(header RateLimit-Remaining)" 0 "mod_cgi: 429: RateLimit-Remaining 0"
between "$(header Retry-After)" 1 $WINDOW "mod_cgi: 429: Retry-After"
is "$BODY" "$BODY_429" "mod_cgi: 429 body"
req -X POST -d a=1 --interface 127.0.0.2 "$base/api/v1/resources"
is "$STATUS" 405 "mod_cgi: POST: 405"
is "$(header Allow)" "GET, HEAD" "mod_cgi: 405: Allow"
req --interface 127.0.0.3 "$base/api/v1/other"
is "$STATUS" 404 "mod_cgi: another path: 404"

done_testing
