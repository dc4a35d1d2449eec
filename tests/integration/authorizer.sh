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
#   - clients are counted apart;
#   - under lighttpd, a smoothing policy (delay = 0) gives its yes at each
#     request's turn, 200 ms apart, and refuses past the burst at once.
# What differs between the servers (asserted below, see the comments of the
# snippets):
#   - on 200, rlgate's Variable-RateLimit-* reach a CGI's environment as
#     RATELIMIT_REMAINING (lighttpd) or RateLimit_Remaining (Apache), its
#     Variable-Rlgate-RateLimit-* as RLGATE_RATELIMIT_REMAINING or
#     Rlgate_RateLimit_Remaining;
#   - the rate-limit headers of an admitted request (RateLimit-Remaining 2,
#     1, 0 with a limit of 3) reach the client on the file, the CGI's output
#     and a missing file's 404: with Apache as they are (the plain headers of
#     rlgate's 200), with lighttpd only through the optional
#     www/lighttpd/authorizer-headers.conf (mod_magnet; lighttpd drops them
#     otherwise: one check without it); never twice on a 429, and a client
#     cannot forge them with request headers;
#   - [headers] style = ietf: RateLimit-Policy and RateLimit on 200 (rlgate
#     restarted on a fresh database);
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

# make_docroot DIR: DIR/static/hello.txt, DIR/static/env.cgi (prints its
# environment, sorted) and DIR/static/own.cgi (sends a RateLimit header of
# its own).
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
	# a backend with a rate-limit header of its own
	cat >"$1/static/own.cgi" <<'EOF'
#!/bin/sh
printf 'Content-Type: text/plain\r\nRateLimit: "app";r=5;t=9\r\n\r\nown\n'
EOF
	chmod 755 "$1" "$1/static" "$1/static/env.cgi" "$1/static/own.cgi"
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

# rl_lines: how many rate-limit header lines (RateLimit*, X-RateLimit-*)
# the last answer has.
rl_lines() {
	tr -d '\r' <"$T/last.headers" | grep -ciE '^(x-)?ratelimit(-[a-z]+)?:'
}

# check_admitted S WHAT REMAINING: the last answer followed an admitted
# request. With HEADERS_ON_200=yes it carries the draft03 trio once each
# (RateLimit-Limit $LIMIT, RateLimit-Remaining REMAINING, RateLimit-Reset);
# otherwise no rate-limit header at all. Never a Variable-* header.
check_admitted() {
	local s=$1 what=$2
	if [ "$HEADERS_ON_200" = yes ]; then
		is "$(header RateLimit-Limit)" $LIMIT "$s: $what: RateLimit-Limit $LIMIT"
		is "$(header RateLimit-Remaining)" "$3" "$s: $what: RateLimit-Remaining $3"
		between "$(header RateLimit-Reset)" 1 $WINDOW "$s: $what: RateLimit-Reset in 1..$WINDOW"
		is "$(rl_lines)" 3 "$s: $what: 3 rate-limit header lines, no copy"
	else
		is "$(rl_lines)" 0 "$s: $what: no rate-limit header reaches the client"
	fi
	tr -d '\r' <"$T/last.headers" | grep -qi '^Variable-'
	ok $((! $?)) "$s: $what: no Variable-* header reaches the client"
}

# check_guard SERVER BASE ENVVAR_REMAINING ENVVAR_LIMIT ENVVAR_RLGATE_REMAINING:
# the sequence, for one server (HEADERS_ON_200: see check_admitted). The
# window is 3600 s: the sequence fits in it unless it starts in the last
# seconds of an hour (ensure_window_room waits then).
check_guard() {
	local s=$1 base=$2 v_rem=$3 v_lim=$4 v_rl_rem=$5 url i
	url="$base/static/hello.txt"
	ensure_window_room $WINDOW 20

	# --- client 127.0.0.1: 2 files and the CGI pass, then 429
	for i in 1 2; do
		req "$url?n=$i"
		is "$STATUS" 200 "$s: request $i: 200"
		is "$BODY" "$HELLO" "$s: request $i: the file's body"
		like "$(header Content-Type)" '^text/plain' "$s: request $i: the file's Content-Type"
		check_admitted "$s" "request $i" $((LIMIT - i))
	done
	req "$base/static/env.cgi"
	is "$STATUS" 200 "$s: request 3 (CGI): 200"
	body_has_line "$v_lim=$LIMIT"
	ok $? "$s: the CGI sees $v_lim=$LIMIT"
	body_has_line "$v_rem=0"
	ok $? "$s: the CGI sees $v_rem=0"
	body_has_line "$v_rl_rem=0"
	ok $? "$s: the CGI sees $v_rl_rem=0"
	body_has_line "REQUEST_URI=/static/env.cgi"
	ok $? "$s: the CGI runs for the guarded URI"
	check_admitted "$s" "request 3 (CGI)" 0

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
	is "$(rl_lines)" 3 "$s: the 429 has each rate-limit header once"
	hreq "$url"
	is "$STATUS" 429 "$s: HEAD over the limit: 429"
	between "$(header Retry-After)" 1 $WINDOW "$s: HEAD over the limit: Retry-After"

	# --- another client has its own quota; a missing file counts
	req --interface 127.0.0.2 "$url"
	is "$STATUS" 200 "$s: client 127.0.0.2: 200"
	is "$BODY" "$HELLO" "$s: client 127.0.0.2: the file's body"
	check_admitted "$s" "client 127.0.0.2" $((LIMIT - 1))
	local codes=
	req --interface 127.0.0.3 "$base/static/no-such-file.txt"
	codes=$STATUS
	check_admitted "$s" "the 404 of a missing file" $((LIMIT - 1))
	for i in 2 3 4; do
		req --interface 127.0.0.3 "$url"
		codes="$codes $STATUS"
	done
	is "$codes" "404 200 200 429" "$s: a missing file is counted (404, then 2 x 200, then 429)"

	# --- a route with policies = none, inside the guarded folder: the
	# authorizer says yes to a client the default policy refuses, with no
	# rate-limit header; headers of the client's own that look like
	# rlgate's (what lighttpd would store, what Apache would strip) do not
	# turn into rate-limit headers of the answer
	req -H 'Rlgate-RateLimit-Limit: 999' -H 'Variable-Rlgate-RateLimit-Limit: 999' \
	    -H 'Variable-RateLimit-Limit: 999' "$base/static/public/free.txt"
	is "$STATUS" 200 "$s: [route public] policies = none: served to a limited client"
	is "$BODY" free "$s: [route public]: the file's body"
	is "$(rl_lines)" 0 "$s: [route public]: no rate-limit header, none forged by the client's headers"
	# ... counted, and logged at most once a minute per process (2 here)
	for i in 1 2; do
		req "$base/static/public/free.txt"
	done
	between "$(grep -c 'event=unguarded role=authorizer path=/static/public/free\.txt route=public ' "$T/$RLOG.log")" 1 2 \
	    "$s: [route public]: event=unguarded logged once per process, not for each of 3 requests"
	req "$url"
	is "$STATUS" 429 "$s: ... while the default policy still refuses it"

	# --- outside the guarded folder: not counted, not limited
	req "$base/open.txt"
	is "$STATUS" 200 "$s: a file outside the guarded folder is served to a limited client"
	is "$(rl_lines)" 0 "$s: outside the guarded folder: no rate-limit header"
}

# check_ietf S BASE: rlgate now runs with [headers] style = ietf on a fresh
# database: two admitted requests of a new client carry RateLimit-Policy and
# RateLimit (r counting down 2, 1), and nothing of draft03; then a CGI that
# sends a RateLimit header of its own.
check_ietf() {
	local s=$1 base=$2 i t
	ensure_window_room $WINDOW 10
	for i in 1 2; do
		req --interface 127.0.0.6 "$base/static/hello.txt"
		is "$STATUS" 200 "$s: ietf: request $i: 200"
		is "$BODY" "$HELLO" "$s: ietf: request $i: the file's body"
		is "$(header RateLimit-Policy)" "\"default\";q=$LIMIT;w=$WINDOW" \
		    "$s: ietf: request $i: RateLimit-Policy \"default\";q=$LIMIT;w=$WINDOW"
		like "$(header RateLimit)" "^\"default\";r=$((LIMIT - i));t=[0-9]+\$" \
		    "$s: ietf: request $i: RateLimit \"default\";r=$((LIMIT - i));t=..."
		t=$(header RateLimit)
		between "${t##*;t=}" 1 $WINDOW "$s: ietf: request $i: t in 1..$WINDOW"
		is "$(rl_lines)" 2 "$s: ietf: request $i: only these 2 rate-limit headers"
	done
	# a backend's own RateLimit: lighttpd's script leaves the answer alone
	# (no second source mixed in); Apache merges rlgate's field and the
	# CGI's into one list
	req --interface 127.0.0.6 "$base/static/own.cgi"
	is "$STATUS" 200 "$s: ietf: a CGI with its own RateLimit: 200"
	is "$BODY" own "$s: ietf: the CGI's body"
	if [ "$s" = apache ]; then
		like "$(header RateLimit)" '^"default";r=0;t=[0-9]+, "app";r=5;t=9$' \
		    "$s: ietf: RateLimit: rlgate's item, then the CGI's, one line"
		is "$(rl_lines)" 2 "$s: ietf: RateLimit-Policy and one RateLimit line"
	else
		is "$(header RateLimit)" '"app";r=5;t=9' "$s: ietf: RateLimit: the CGI's own, untouched"
		is "$(rl_lines)" 1 "$s: ietf: nothing added (no RateLimit-Policy)"
	fi
}
# ---- lighttpd: unix socket, www/lighttpd/authorizer.conf -------------------

# start_lt NAME PORT SOCKET MAGNET: a lighttpd on PORT, config $lt/NAME.conf,
# docroot $lt/htdocs, guarding /static/ with the shipped authorizer.conf on
# SOCKET; with MAGNET=yes, the shipped authorizer-headers.conf too.
start_lt() {
	{
		cat <<EOF
server.upload-dirs   = ( "$lt" )
server.modules      += ( "mod_cgi" )
cgi.assign           = ( ".cgi" => "" )
mimetype.assign      = ( ".txt" => "text/plain; charset=utf-8" )
var.rlgate_authorizer_socket = "$3"
var.rlgate_guard             = "/static/"
include "$RLGATE_SRCDIR/www/lighttpd/authorizer.conf"
EOF
		[ "$4" = yes ] && cat <<EOF
var.rlgate_headers_lua       = "$RLGATE_SRCDIR/www/lighttpd/rlgate-headers.lua"
include "$RLGATE_SRCDIR/www/lighttpd/authorizer-headers.conf"
EOF
	} | write_lighttpd_base "$lt/$1.conf" "$2" "$lt/htdocs" "$lt/$1.pid" "$lt/$1.error.log"
	start_lighttpd "$lt/$1.conf" "$2"
}

lt="$T/lighttpd"
mkdir -p "$lt"
chmod 755 "$lt"
make_docroot "$lt/htdocs"
echo open >"$lt/htdocs/open.txt"
write_rlgate_conf "$lt/rlgate.conf" "$lt/rlgate.db" $LIMIT $WINDOW
add_public_route "$lt/rlgate.conf"
# smoothing in the Authorizer role: 5 a second, burst 4, held for its turn
printf '\n[policy smooth]\nalgorithm = token_bucket\nlimit = 5\nwindow = 1\nburst = 4\ndelay = 0\n[route smooth]\npath = /static/smooth/*\npolicies = smooth\n' \
    >>"$lt/rlgate.conf"
mkdir -p "$lt/htdocs/static/smooth"
echo smooth >"$lt/htdocs/static/smooth/a.txt"
chmod -R a+rX "$lt/htdocs/static/smooth"
start_rlgate_fcgi rlgate-lt "$lt/rlgate.sock" "$lt/rlgate.conf" 2 --threads 2
like "$("$RLGATE_BIN" --check-config --config "$lt/rlgate.conf" 2>&1)" \
    'rlgate\.conf:[0-9]+: warning: \[route public\] policies = none: a guarding front .* asking about /static/public/\* will limit nothing' \
    "--check-config: a route with policies = none is a warning on its line"

# mod_magnet (Debian: lighttpd-modules-lua) for authorizer-headers.conf
printf 'server.modules = ( "mod_magnet" )\nserver.document-root = "%s"\n' "$lt" >"$lt/probe.conf"
if "$LIGHTTPD_BIN" -tt -f "$lt/probe.conf" >/dev/null 2>&1; then
	MAGNET=yes
else
	MAGNET=no
	diag "lighttpd has no mod_magnet: authorizer-headers.conf is not tested"
fi

LT_PORT=$(free_port) || bail_out "no free port"
start_lt lighttpd "$LT_PORT" "$lt/rlgate.sock" $MAGNET
# lighttpd hands Variable-RateLimit-Remaining to a CGI as RATELIMIT_REMAINING;
# its own rate-limit headers reach the client only through mod_magnet
RLOG=rlgate-lt HEADERS_ON_200=$MAGNET check_guard lighttpd "http://127.0.0.1:$LT_PORT" \
    RATELIMIT_REMAINING RATELIMIT_LIMIT RLGATE_RATELIMIT_REMAINING

# smoothing: the Authorizer's yes comes at each request's turn, so
# lighttpd serves the file then: 6 at once, 4 served 200 ms apart, 2
# refused at once
for i in $(seq 1 6); do
	printf 'url = "http://127.0.0.1:%s/static/smooth/a.txt"\noutput = /dev/null\n' "$LT_PORT"
done >"$T/smooth.cfg"
curl -sS -Z --parallel-immediate --parallel-max 6 -m 20 -K "$T/smooth.cfg" \
    --interface 127.0.0.7 -w '%{http_code} %{time_total}\n' 2>/dev/null |
    awk '{ printf "%s %d\n", $1, $2 * 1000 }' | sort -n -k2 >"$T/smooth.out"
diag "authorizer, delay: ms until each answer: $(tr '\n' ' ' <"$T/smooth.out")"
is "$(grep -c '^200 ' "$T/smooth.out") $(grep -c '^429 ' "$T/smooth.out")" "4 2" \
    "lighttpd authorizer, delay: 4 served, 2 refused"
is "$(awk '$1 == 200 { print $2 }' "$T/smooth.out" | awk '
	{ lo = (NR - 1) * 200 - 40; hi = (NR - 1) * 200 + 600 }
	$1 < lo || $1 > hi { bad++ } END { print bad + 0 }')" 0 \
    "lighttpd authorizer, delay: the yes comes at each turn, 200 ms apart"

if [ $MAGNET = yes ]; then
	# without authorizer-headers.conf, same rlgate: nothing on a 200
	LT2_PORT=$(free_port) || bail_out "no free port"
	start_lt lighttpd-plain "$LT2_PORT" "$lt/rlgate.sock" no
	req --interface 127.0.0.5 "http://127.0.0.1:$LT2_PORT/static/hello.txt"
	is "$STATUS" 200 "lighttpd without authorizer-headers.conf: 200"
	is "$BODY" "$HELLO" "lighttpd without authorizer-headers.conf: the file's body"
	HEADERS_ON_200=no check_admitted lighttpd "without authorizer-headers.conf" $((LIMIT - 1))

	# [headers] style = ietf, a fresh database, the same socket
	stop_rlgate_fcgi rlgate-lt
	rm -f "$lt/rlgate.sock"
	write_rlgate_conf "$lt/rlgate-ietf.conf" "$lt/rlgate-ietf.db" $LIMIT $WINDOW
	sed -i 's/^style = draft03$/style = ietf/' "$lt/rlgate-ietf.conf"
	start_rlgate_fcgi rlgate-lt "$lt/rlgate.sock" "$lt/rlgate-ietf.conf" 1 --threads 2
	check_ietf lighttpd "http://127.0.0.1:$LT_PORT"
fi

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
# Apache keeps the case: Variable-RateLimit-Remaining -> RateLimit_Remaining;
# the plain headers of rlgate's 200 reach the client as they are
RLOG=rlgate-ap HEADERS_ON_200=yes check_guard apache "http://127.0.0.1:$AP_PORT" \
    RateLimit_Remaining RateLimit_Limit Rlgate_RateLimit_Remaining

# [headers] style = ietf, a fresh database, the same port
stop_rlgate_fcgi rlgate-ap
write_rlgate_conf "$ap/rlgate-ietf.conf" "$ap/rlgate-ietf.db" $LIMIT $WINDOW
sed -i 's/^style = draft03$/style = ietf/' "$ap/rlgate-ietf.conf"
start_rlgate_tcp rlgate-ap "$RLGATE_PORT" "$ap/rlgate-ietf.conf" 1 --threads 2
check_ietf apache "http://127.0.0.1:$AP_PORT"

# Apache fails closed too, with a 500
stop_rlgate_fcgi rlgate-ap
req --interface 127.0.0.4 "http://127.0.0.1:$AP_PORT/static/hello.txt"
is "$STATUS" 500 "apache: rlgate stopped: 500, the file is not served"

done_testing
