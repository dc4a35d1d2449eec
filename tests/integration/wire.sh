#!/usr/bin/env bash
# wire.sh: the FastCGI records rlgate reads itself (app/server_wire.c),
# through a real rlgate process on a unix socket, from tests/fcgi_client
# --records: the management record FCGI_GET_VALUES answered and the
# request after it served; a second request begun inside the first
# refused (FCGI_CANT_MPX_CONN) and the first served; two requests in one
# write on a kept connection both served and the connection kept; a role
# that does not exist refused (FCGI_UNKNOWN_ROLE); version 2 records and
# 2 MiB of parameters dropped unanswered. One worker thread serves them
# all, so each connection after a dropped one is served by the worker
# that dropped it, with the same buffers: each is followed by a plain
# request, which must be served whole.
: "${RLGATE_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/integration/lib.sh
. "$RLGATE_SRCDIR/tests/integration/lib.sh" || { echo "Bail out! cannot read lib.sh"; exit 99; }

setup_test spawn-fcgi
client=$RLGATE_BUILDDIR/tests/fcgi_client
[ -x "$client" ] || bail_out "no $client (make check builds it)"

make_rundir
write_rlgate_conf "$T/c.conf" "$run/c.db" 1000000 60
start_rlgate_fcgi rlgate "$sock" "$T/c.conf" 1 --threads 1
api=/api/v1/resources
# records KIND WANT DESC: --records KIND prints WANT, then a plain GET
# on a new connection is answered 200 and closed at once.
records() {
	is "$("$client" "$sock" --records "$1" 2>&1)" "$2" "$3"
	is "$("$client" "$sock" GET $api 2>&1)" "status=200 end=closed" \
	    "... then a plain GET: 200"
}

records values "values=FCGI_MPXS_CONNS:0,FCGI_MAX_REQS:1 status=200 end=closed" \
    "FCGI_GET_VALUES: one request at a time, then the request served"
records mpx "refused=2:1 status=200 end=closed" \
    "a second request inside the first: FCGI_CANT_MPX_CONN, the first served"
records kept "status=200,200 end=open" \
    "FCGI_KEEP_CONN, two requests in one write: both served, the connection kept"
records role "refused=1:3 status=none end=closed" \
    "a role that does not exist: FCGI_UNKNOWN_ROLE, closed"
records version "status=none end=closed" \
    "version 2 records: closed unanswered"
records huge "status=none end=closed" \
    "2 MiB of FCGI_PARAMS (past the 1 MiB bound): closed unanswered"
kill -0 "$(pgrep -f "$T/c.conf" | head -1)" 2>/dev/null
ok $? "the rlgate process survived them all"
unlike "$(grep -v 'serving FastCGI' "$T/rlgate.log")" . \
    "rlgate logged nothing but its start"

done_testing
