#!/usr/bin/env bash
# close.sh: how rlgate ends a FastCGI connection (app/server.c,
# close_at_once). On a unix socket, a Responder request without a body has
# its FCGI_STDIN read to the end (sent with the parameters, as lighttpd
# does, or apart, as Apache does) and is closed at once, without the
# lingering close (libfcgi's way: the sending side shut, then a wait for
# the web server to close first). The lingering close stays for a
# request with a body (CONTENT_LENGTH above 0, or a Transfer-Encoding), so
# the web server can finish writing it; for the Authorizer role, which is
# sent no FCGI_STDIN to wait for (Apache) or an empty one (lighttpd); and
# over TCP, where a close with input still arriving would answer with a
# reset. tests/fcgi_client tells which by writing after the answer. Then
# through lighttpd: GETs and a 1 MiB POST body, all answered, with no
# backend error in lighttpd's log (apache.sh and authorizer.sh run the
# other servers and the role).
: "${RLGATE_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/integration/lib.sh
. "$RLGATE_SRCDIR/tests/integration/lib.sh" || { echo "Bail out! cannot read lib.sh"; exit 99; }

setup_test lighttpd spawn-fcgi curl
client=$RLGATE_BUILDDIR/tests/fcgi_client
[ -x "$client" ] || bail_out "no $client (make check builds it)"

make_rundir
write_rlgate_conf "$T/c.conf" "$run/c.db" 1000000 60
start_rlgate_fcgi rlgate "$sock" "$T/c.conf" 1 --threads 1
api=/api/v1/resources

# ends END DESC ARGS...: tests/fcgi_client ARGS gets a 200, and rlgate
# ends the connection as END: closed (at once) or open (the lingering close).
ends() {
	local end=$1 desc=$2
	shift 2
	is "$("$client" "$@")" "status=200 end=$end" "$desc"
}

# --- a unix socket
ends closed "unix socket, GET, CONTENT_LENGTH 0: answered, the connection closed at once" \
    "$sock" GET $api CONTENT_LENGTH=0
ends closed "unix socket, GET without CONTENT_LENGTH: closed at once" "$sock" GET $api
ends closed "unix socket, HEAD, CONTENT_LENGTH empty: closed at once" \
    "$sock" HEAD $api CONTENT_LENGTH=
is "$("$client" "$sock" GET $api --late-stdin 100 2>&1)" "status=200 end=closed" \
    "unix socket, FCGI_STDIN 100 ms after the parameters (as Apache): read, then closed at once"
ends open "unix socket, Authorizer with an empty FCGI_STDIN (as lighttpd): the lingering close stays" \
    "$sock" GET $api --authorizer
ends open "unix socket, Authorizer without FCGI_STDIN (as Apache): the lingering close stays" \
    "$sock" GET $api --authorizer --no-stdin
ends open "unix socket, a 5-byte body: the lingering close stays" \
    "$sock" GET $api CONTENT_LENGTH=5 --body 5
ends open "unix socket, Transfer-Encoding: the lingering close stays" \
    "$sock" GET $api HTTP_TRANSFER_ENCODING=chunked
# More than a unix socket holds: the web server is still writing the body
# when the answer is written. Closed at once, its writes would fail.
out=$("$client" "$sock" POST $api CONTENT_LENGTH=1048576 --body 1048576 2>&1)
is "$out" "status=405 end=open" \
    "unix socket, a 1 MiB POST body: the web server writes it all, then reads the 405"

# --- TCP: the lingering close, always
tport=$(free_port) || bail_out "no free port"
start_rlgate_tcp rlgate-tcp "$tport" "$T/c.conf" 1 --threads 1
ends open "TCP, GET: the lingering close stays (no reset can reach the web server)" \
    "127.0.0.1:$tport" GET $api CONTENT_LENGTH=0
stop_rlgate_fcgi rlgate-tcp

# --- through lighttpd
demo_lighttpd
codes=$(for _ in $(seq 1 50); do
	curl -s -o /dev/null -w '%{http_code}\n' "$url"
done | sort | uniq -c | awk '{printf "%s:%s ", $2, $1}')
is "$codes" "200:50 " "lighttpd: 50 GETs, 50 answers 200"
head -c 1048576 /dev/zero >"$T/body"
req -X POST --data-binary @"$T/body" "$url"
is "$STATUS" 405 "lighttpd: a 1 MiB POST body: rlgate's 405 reaches the client"
req "$url"
is "$STATUS" 200 "lighttpd: the next GET: 200"
unlike "$(grep -v 'server started' "$run/lighttpd-error.log")" . \
    "lighttpd logged nothing about its backend: $(tail -3 "$run/lighttpd-error.log" | tr '\n' ' ')"
unlike "$(grep -v 'serving FastCGI' "$T/rlgate.log" "$T/rlgate-tcp.log")" . \
    "rlgate logged nothing but its start"

done_testing
