#!/usr/bin/env bash
# admin.sh: who may read the admin endpoints ([admin] allow), through the
# shipped lighttpd snippets and a real front proxy:
#   1. an allowed client (through the trusted front) gets every endpoint:
#      the page, metrics, health, status, each counted by no policy;
#   2. a client outside the list gets from every admin path the same 404
#      as an unknown path, counted by the policies (RateLimit headers),
#      whether it asks the backend directly, sends a forged
#      X-Forwarded-For naming an allowed address to the backend (its peer
#      is no trusted proxy: the header is not read), or sends that forged
#      header through the trusted front (which appends the real address:
#      the client is the rightmost untrusted one);
#   3. the metrics count exactly those requests, and no admin request;
#   4. allow = (empty): the endpoints are off for everyone;
#   5. the Authorizer: the shipped authorizer.conf mounts the prefix beside
#      a guard of "/", which lets the allowed client through uncounted and
#      counts the others (404 from the responder).
# Topology: client (127.0.0.x) -> front lighttpd mod_proxy on 127.0.0.1
# (X-Forwarded-For) -> backend lighttpd (www/lighttpd/demo.conf) ->
# spawn-fcgi -> rlgate, which trusts 127.0.0.1 as a proxy.
: "${RLGATE_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/integration/lib.sh
. "$RLGATE_SRCDIR/tests/integration/lib.sh" || { echo "Bail out! cannot read lib.sh"; exit 99; }

setup_test lighttpd spawn-fcgi curl

make_rundir
WINDOW=3600
LIMIT=50
# every path under the prefix the snippets mount (/rlgate/)
ADMIN_PATHS="/rlgate/ /rlgate/metrics /rlgate/health /rlgate/status /rlgate/nothing"

BE_PORT=$(free_port) || bail_out "no free port"
write_lighttpd_demo_conf "$T/backend.conf" "$BE_PORT" "$run" "$sock"
LF_PORT=$(free_port) || bail_out "no free port"
BE=http://127.0.0.1:$BE_PORT
FRONT=http://127.0.0.1:$LF_PORT

# the admin is 127.0.0.3, which reaches rlgate only through the front
write_store_conf admin <<EOF
[client]
trusted_proxies = 127.0.0.1

[admin]
allow = 127.0.0.3

[policy api]
limit = $LIMIT
window = $WINDOW
EOF
restart_rlgate admin 60
start_lighttpd "$T/backend.conf" "$BE_PORT"
start_lighttpd_front "$T/lfront" "$LF_PORT" "$BE_PORT" </dev/null

# counted: the last answer carries RateLimit-Remaining
counted() { has_header RateLimit-Remaining; }

# ---- 1. the allowed client ---------------------------------------------------

req --interface 127.0.0.3 "$FRONT/rlgate/"
is "$STATUS" 200 "allowed, /rlgate/: 200"
like "$(header Content-Type)" '^text/html; charset=utf-8$' "... the page, text/html"
like "$BODY" '<html' "... an HTML document"
unlike "$BODY" '(src|href)="(https?:)?//' "... that loads nothing from elsewhere"
req --interface 127.0.0.3 "$FRONT/rlgate/metrics"
is "$STATUS" 200 "allowed, /rlgate/metrics: 200"
is "$(header Content-Type)" 'text/plain; version=0.0.4; charset=utf-8' "... Prometheus' text format 0.0.4"
like "$BODY" '# TYPE rlgate_requests_total counter' "... with its TYPE lines"
req --interface 127.0.0.3 "$FRONT/rlgate/health"
is "$STATUS:$BODY" '200:{"status":"ok"}' "allowed, /rlgate/health: 200 {\"status\":\"ok\"}"
req --interface 127.0.0.3 "$FRONT/rlgate/status"
is "$STATUS" 200 "allowed, /rlgate/status: 200"
like "$BODY" '"policies":\[\{"name":"api"' "... the JSON names the policy"
counted
ok $((! $?)) "... and no admin answer carries a rate-limit header"
req --interface 127.0.0.3 --data "" "$FRONT/rlgate/metrics"
is "$STATUS" 405 "allowed, POST /rlgate/metrics: 405"
is "$(header Allow)" 'GET, HEAD' "... Allow: GET, HEAD"

# ---- 2. everyone else: the 404 of any unknown path, counted --------------------

# the 404 an unknown path gets, as the reference
req --interface 127.0.0.2 "$BE/api/v1/nothing"
is "$STATUS" 404 "an unknown path: 404"
ref_body=$BODY
ref_type=$(header Content-Type)
sent=1

# outside PATH ARGS...: each admin path asked with curl ARGS must be the
# reference 404, counted; DESC in the test names.
outside() {
	local desc=$1 p bad='' uncounted=''
	shift
	for p in $ADMIN_PATHS; do
		req "$@" "${BASE_URL}$p"
		sent=$((sent + 1))
		[ "$STATUS:$(header Content-Type):$BODY" = "404:$ref_type:$ref_body" ] ||
			bad="$bad $p:$STATUS"
		counted || uncounted="$uncounted $p"
	done
	is "${bad# }" "" "$desc: every admin path is the 404 of an unknown path"
	is "${uncounted# }" "" "$desc: ... and counted (RateLimit-Remaining)"
}

BASE_URL=$BE outside "127.0.0.2 directly" --interface 127.0.0.2
BASE_URL=$BE outside "127.0.0.2 directly, X-Forwarded-For: 127.0.0.3 (its peer is no proxy)" \
    --interface 127.0.0.2 -H "X-Forwarded-For: 127.0.0.3"
BASE_URL=$FRONT outside "127.0.0.2 through the trusted front" --interface 127.0.0.2
BASE_URL=$FRONT outside "127.0.0.2 through the trusted front, forged X-Forwarded-For: 127.0.0.3" \
    --interface 127.0.0.2 -H "X-Forwarded-For: 127.0.0.3"
is "$(header RateLimit-Remaining)" $((LIMIT - sent)) \
    "127.0.0.2 was counted as itself every time ($sent requests)"

# ---- 3. the metrics: exactly those requests, no admin request ------------------

req --interface 127.0.0.3 "$FRONT/rlgate/metrics"
metric() { printf '%s\n' "$BODY" | awk -v n="$1" '$1 == n { print $2 }'; }
is "$(metric 'rlgate_requests_total{policy="api",decision="admitted"}')" "$sent" \
    "rlgate_requests_total: api admitted $sent (127.0.0.2's), none of 127.0.0.3's"
is "$(metric 'rlgate_responses_total{code="404"}')" "$sent" "rlgate_responses_total: 404 x $sent"
is "$(metric 'rlgate_responses_total{code="200"}')" 0 "... and no 200 (the admin's are not there)"
is "$(metric 'rlgate_admin_responses_total{code="200"}')" 4 \
    "rlgate_admin_responses_total: the admin's 4 answers of 200 before this one"
is "$(metric 'rlgate_admin_responses_total{code="405"}')" 1 "... and its 405"

# ---- 4. allow = (empty): off --------------------------------------------------

write_store_conf off <<EOF
[client]
trusted_proxies = 127.0.0.1

[admin]
allow =

[policy api]
limit = $LIMIT
window = $WINDOW
EOF
restart_rlgate off 30
BASE_URL=$FRONT outside "allow = (empty), 127.0.0.3 through the front" --interface 127.0.0.3
BASE_URL=$BE outside "allow = (empty), 127.0.0.1 directly" --interface 127.0.0.1

# ---- 5. the Authorizer's guard over the prefix ---------------------------------

write_store_conf guard <<EOF
[policy api]
limit = $LIMIT
window = $WINDOW
EOF
restart_rlgate guard 30
AZ_PORT=$(free_port) || bail_out "no free port"
mkdir -p "$T/az/htdocs"
chmod 755 "$T/az" "$T/az/htdocs"
start_authorizer_lighttpd "$T/az" "$AZ_PORT" "$sock" "/" </dev/null
req "http://127.0.0.1:$AZ_PORT/rlgate/health"
is "$STATUS:$BODY" '200:{"status":"ok"}' "guard over /: the admin gets /rlgate/health from the responder"
req "http://127.0.0.1:$AZ_PORT/rlgate/metrics"
is "$(metric 'rlgate_requests_total{policy="api",decision="admitted"}')" 0 \
    "... and its admin requests were not counted by the guard"
req --interface 127.0.0.2 "http://127.0.0.1:$AZ_PORT/rlgate/metrics"
is "$STATUS" 404 "guard over /: 127.0.0.2 gets 404 for /rlgate/metrics"
req "http://127.0.0.1:$AZ_PORT/rlgate/metrics"
is "$(metric 'rlgate_requests_total{policy="api",decision="admitted"}')" 2 \
    "... counted twice: by the guard and by the responder"

stop_rlgate_fcgi "$CUR"
done_testing
