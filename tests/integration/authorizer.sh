#!/usr/bin/env bash
# authorizer.sh: rlgate as a FastCGI Authorizer guarding a folder of static
# files (and a CGI script), with the shipped www/lighttpd/authorizer.conf
# (lighttpd 1.4 mod_fastcgi "mode" => "authorizer", rlgate on a unix socket)
# and www/apache/authorizer.conf (Apache 2.4 mod_authnz_fcgi
# AuthnzFcgiCheckAuthnProvider, rlgate on 127.0.0.1:PORT: mod_authnz_fcgi
# has no unix sockets). Each server gets its own rlgate and database, with
# 3 requests per 3600 s per client:
#   - the first 3 requests of a client are served by the web server (the
#     file's body, the CGI's output), the next ones get rlgate's 429 with
#     Retry-After, RateLimit-* and the JSON body;
#   - every request under the folder counts (a missing file too);
#   - clients are counted apart.
# What differs between the servers (asserted below, see the comments of the
# two snippets):
#   - on 200, rlgate's Variable-RateLimit-* reach a CGI's environment as
#     RATELIMIT_REMAINING (lighttpd) or RateLimit_Remaining (Apache); the
#     client sees no rate-limit header on an admitted request with either;
#   - on 429, lighttpd passes rlgate's answer as it is; Apache re-sends the
#     body and would label it text/html, which the snippet's Header line
#     (mod_headers) turns back into application/json.
: "${RLGATE_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/integration/lib.sh
. "$RLGATE_SRCDIR/tests/integration/lib.sh" || { echo "Bail out! cannot read lib.sh"; exit 99; }

setup_test lighttpd spawn-fcgi curl

LIMIT=3
WINDOW=3600
HELLO='hello from a guarded static file'

# make_docroot DIR: DIR/static/hello.txt and DIR/static/env.cgi (prints its
# environment, sorted).
make_docroot() {
	mkdir -p "$1/static/public"
	printf '%s\n' "$HELLO" >"$1/static/hello.txt"
	echo free >"$1/static/public/free.txt"
	chmod 755 "$1/static/public"
	chmod 644 "$1/static/public/free.txt"
	cat >"$1/static/env.cgi" <<'EOF'
#!/bin/sh
printf 'Content-Type: text/plain\r\n\r\n'
env | sort
EOF
	chmod 755 "$1" "$1/static" "$1/static/env.cgi"
	chmod 644 "$1/static/hello.txt"
}

# add_public_route CONF: routes work in the authorizer role too: requests
# under /static/public/ are exempt, every other one gets [policy default].
add_public_route() {
	printf '\n[route public]\npath = /static/public/*\npolicies = none\n' >>"$1"
}

# body_has_line LINE: true if the last body has exactly that line.
body_has_line() {
	printf '%s\n' "$BODY" | grep -qxF -- "$1"
}

# check_guard SERVER BASE ENVVAR_REMAINING ENVVAR_LIMIT: the sequence, for
# one server. The window is 3600 s: the sequence fits in it unless it
# starts in the last seconds of an hour (ensure_window_room waits then).
check_guard() {
	local s=$1 base=$2 v_rem=$3 v_lim=$4 url i
	url="$base/static/hello.txt"
	ensure_window_room $WINDOW 20

	# --- client 127.0.0.1: 2 files and the CGI pass, then 429
	for i in 1 2; do
		req "$url?n=$i"
		is "$STATUS" 200 "$s: request $i: 200"
		is "$BODY" "$HELLO" "$s: request $i: the file's body"
		like "$(header Content-Type)" '^text/plain' "$s: request $i: the file's Content-Type"
		has_header 'RateLimit-Remaining'
		ok $((! $?)) "$s: request $i: no RateLimit-* header reaches the client on 200"
		tr -d '\r' <"$T/last.headers" | grep -qi '^Variable-'
		ok $((! $?)) "$s: request $i: no Variable-* header reaches the client"
	done
	req "$base/static/env.cgi"
	is "$STATUS" 200 "$s: request 3 (CGI): 200"
	body_has_line "$v_lim=$LIMIT"
	ok $? "$s: the CGI sees $v_lim=$LIMIT"
	body_has_line "$v_rem=0"
	ok $? "$s: the CGI sees $v_rem=0"
	body_has_line "REQUEST_URI=/static/env.cgi"
	ok $? "$s: the CGI runs for the guarded URI"

	for i in 4 5; do
		req "$url"
		is "$STATUS" 429 "$s: request $i: 429"
		is "$(header Content-Type)" application/json "$s: request $i: Content-Type: application/json"
		is "$(header RateLimit-Limit)" $LIMIT "$s: request $i: RateLimit-Limit $LIMIT"
		is "$(header RateLimit-Remaining)" 0 "$s: request $i: RateLimit-Remaining 0"
		between "$(header RateLimit-Reset)" 1 $WINDOW "$s: request $i: RateLimit-Reset in 1..$WINDOW"
		between "$(header Retry-After)" 1 $WINDOW "$s: request $i: Retry-After in 1..$WINDOW"
		is "$BODY" "$BODY_429" "$s: request $i: the JSON 429 body, not the file"
	done
	hreq "$url"
	is "$STATUS" 429 "$s: HEAD over the limit: 429"
	between "$(header Retry-After)" 1 $WINDOW "$s: HEAD over the limit: Retry-After"

	# --- another client has its own quota; a missing file counts
	req --interface 127.0.0.2 "$url"
	is "$STATUS" 200 "$s: client 127.0.0.2: 200"
	is "$BODY" "$HELLO" "$s: client 127.0.0.2: the file's body"
	local codes=
	req --interface 127.0.0.3 "$base/static/no-such-file.txt"
	codes=$STATUS
	for i in 2 3 4; do
		req --interface 127.0.0.3 "$url"
		codes="$codes $STATUS"
	done
	is "$codes" "404 200 200 429" "$s: a missing file is counted (404, then 2 x 200, then 429)"

	# --- a route with policies = none, inside the guarded folder: the
	# authorizer says yes to a client the default policy refuses
	req "$base/static/public/free.txt"
	is "$STATUS" 200 "$s: [route public] policies = none: served to a limited client"
	is "$BODY" free "$s: [route public]: the file's body"
	req "$url"
	is "$STATUS" 429 "$s: ... while the default policy still refuses it"

	# --- outside the guarded folder: not counted, not limited
	req "$base/open.txt"
	is "$STATUS" 200 "$s: a file outside the guarded folder is served to a limited client"
}

# ---- lighttpd: unix socket, www/lighttpd/authorizer.conf -------------------

lt="$T/lighttpd"
mkdir -p "$lt"
chmod 755 "$lt"
make_docroot "$lt/htdocs"
echo open >"$lt/htdocs/open.txt"
write_rlgate_conf "$lt/rlgate.conf" "$lt/rlgate.db" $LIMIT $WINDOW
add_public_route "$lt/rlgate.conf"
start_rlgate_fcgi rlgate-lt "$lt/rlgate.sock" "$lt/rlgate.conf" 2 --threads 2

LT_PORT=$(free_port) || bail_out "no free port"
start_authorizer_lighttpd "$lt" "$LT_PORT" "$lt/rlgate.sock" /static/ <<EOF
server.upload-dirs   = ( "$lt" )
server.modules      += ( "mod_cgi" )
cgi.assign           = ( ".cgi" => "" )
mimetype.assign      = ( ".txt" => "text/plain; charset=utf-8" )
EOF
# lighttpd hands Variable-RateLimit-Remaining to a CGI as RATELIMIT_REMAINING
check_guard lighttpd "http://127.0.0.1:$LT_PORT" RATELIMIT_REMAINING RATELIMIT_LIMIT

# lighttpd fails closed when rlgate is gone
stop_rlgate_fcgi rlgate-lt
req --interface 127.0.0.4 "http://127.0.0.1:$LT_PORT/static/hello.txt"
is "$STATUS" 503 "lighttpd: rlgate stopped: 503, the file is not served"

# ---- Apache: TCP, www/apache/authorizer.conf --------------------------------

if ! apache_available || [ ! -f "$APACHE_MODULES/mod_authnz_fcgi.so" ]; then
	diag "Apache 2.4 with mod_authnz_fcgi is not installed: its tests are skipped"
	done_testing
fi

ap="$T/apache"
mkdir -p "$ap"
chmod 755 "$ap"
write_rlgate_conf "$ap/rlgate.conf" "$ap/rlgate.db" $LIMIT $WINDOW
add_public_route "$ap/rlgate.conf"
RLGATE_PORT=$(free_port) || bail_out "no free port"
start_rlgate_tcp rlgate-ap "$RLGATE_PORT" "$ap/rlgate.conf" 2 --threads 2

AP_PORT=$(free_port) || bail_out "no free port"
[ "$AP_PORT" != "$RLGATE_PORT" ] || AP_PORT=$(free_port) || bail_out "no free port"
write_apache_conf "$ap/httpd.conf" "$AP_PORT" "$ap" \
    "$(for m in authn_core authz_user authnz_fcgi headers mime cgid; do _apache_module $m; done)
TypesConfig /etc/mime.types
ScriptSock \"$ap/cgid.sock\"
<Directory \"$ap/htdocs/static\">
    Options +ExecCGI
    AddHandler cgi-script .cgi
</Directory>
Define RLGATE_PORT $RLGATE_PORT
Define RLGATE_GUARD /static/
Include \"$RLGATE_SRCDIR/www/apache/authorizer.conf\""
make_docroot "$ap/htdocs"
echo open >"$ap/htdocs/open.txt"
start_apache "$ap/httpd.conf" "$AP_PORT"
# Apache keeps the case: Variable-RateLimit-Remaining -> RateLimit_Remaining
check_guard apache "http://127.0.0.1:$AP_PORT" RateLimit_Remaining RateLimit_Limit

# Apache fails closed too, with a 500
stop_rlgate_fcgi rlgate-ap
req --interface 127.0.0.4 "http://127.0.0.1:$AP_PORT/static/hello.txt"
is "$STATUS" 500 "apache: rlgate stopped: 500, the file is not served"

done_testing
