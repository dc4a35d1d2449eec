#!/usr/bin/env bash
# valgrind.sh: one integration run with rlgate under valgrind memcheck:
# lighttpd + spawn-fcgi + rlgate (2 threads, three policies of different
# algorithms, routes), a mix of admitted, rejected, 404, 405 and HEAD
# requests from several clients, then SIGTERM. Memcheck must report zero
# errors and zero bytes definitely lost. Skipped for a sanitizer build
# (ASan and valgrind do not mix).
: "${RLGATE_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/integration/lib.sh
. "$RLGATE_SRCDIR/tests/integration/lib.sh" || { echo "Bail out! cannot read lib.sh"; exit 99; }

[ -x "$RLGATE_BIN" ] || bail_out "no rlgate binary at $RLGATE_BIN"
if nm -D "$RLGATE_BIN" 2>/dev/null | grep -q __asan_init; then
	skip_all "a sanitizer build: valgrind cannot run it"
fi
need_cmd valgrind lighttpd spawn-fcgi curl nm
make_tmpdir

make_rundir
cat >"$T/rlgate.conf" <<CONF
[store]
path = $run/rlgate.db
[headers]
style = all
[policy default]
limit = 5
window = 3600
[policy pace]
algorithm = token_bucket
limit = 100
window = 60
burst = 20
[policy exact]
algorithm = sliding_log
limit = 8
window = 3600
[route free]
path = /api/free/*
policies = none
CONF

# spawn-fcgi keeps valgrind's pid (it execs rlgate in the same process).
spawn-fcgi -s "$sock" -M 0666 -P "$T/vg.pid" -- "$(command -v valgrind)" --error-exitcode=9 \
    --leak-check=full --errors-for-leak-kinds=definite \
    --log-file="$T/memcheck.log" \
    "$RLGATE_BIN" --config "$T/rlgate.conf" --threads 2 \
    </dev/null >"$T/spawn.log" 2>&1 || bail_out "spawn-fcgi failed: $(cat "$T/spawn.log")"
VG_PID=$(cat "$T/vg.pid")
track_pid "$VG_PID"
wait_for_file "$sock" 20 || bail_out "no socket from rlgate under valgrind"

demo_lighttpd

codes=
for i in 1 2 3 4 5 6 7; do
	req "$url?i=$i"
	codes="$codes $STATUS"
done
is "${codes# }" "200 200 200 200 200 429 429" "under valgrind: 5 x 200, then 429"
req --interface 127.0.0.2 -X POST -d a=1 "$url"
is "$STATUS" 405 "under valgrind: POST: 405"
req --interface 127.0.0.2 "http://127.0.0.1:$PORT/api/nope"
is "$STATUS" 404 "under valgrind: another path: 404"
hreq --interface 127.0.0.2 "$url"
is "$STATUS" 200 "under valgrind: HEAD: 200"
req "http://127.0.0.1:$PORT/api/free/x"
is "$STATUS" 404 "under valgrind: an exempt route is not limited"
req --interface 127.0.0.3 "$url%zz"
is "$STATUS" 400 "under valgrind: an undecodable path: 400"

term_and_wait 20000 "$VG_PID"
ok $? "rlgate under valgrind stops on SIGTERM"
grep -q 'ERROR SUMMARY: 0 errors' "$T/memcheck.log"
ok $? "memcheck: zero errors"
grep -Eq 'definitely lost: 0 bytes|All heap blocks were freed|no leaks are possible' "$T/memcheck.log"
ok $? "memcheck: zero bytes definitely lost"
grep -E 'ERROR SUMMARY|definitely lost|possibly lost' "$T/memcheck.log" | sed 's/^/# /'
done_testing
