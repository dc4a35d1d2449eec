#!/usr/bin/env bash
# redis_faults.sh: the Redis store against a Redis that lies (no client
# escapes its quota), behind lighttpd + spawn-fcgi (1 process x 2
# threads). The server is tests/fake_redis (built by make check), started
# here on 127.0.0.1 at a port it picks and stopped by pid:
#
#   1. retry-huge: EVALSHA answers a rejection with retry_ms = reset_ms =
#      2^63 - 1. With on_error = closed every client gets 503 with
#      Retry-After: 1 and the JSON error body (it got 429 with Retry-After:
#      9223372036854776), the log names the server, the field and the
#      value, and the workers live on; with on_error = open, 200 without
#      any rate-limit header. The url carries a user and a password that
#      no log line shows.
#   2. trickle: the reply comes one byte every 200 ms (about 9 s in all);
#      with timeout_ms = 500 the answer (503, on_error = closed) comes
#      within 3 x (connect_timeout_ms + timeout_ms), not after the trickle.
#   3. --check-config on urls that carry a secret in every shape: the
#      problem is reported, the secret never.
: "${RLGATE_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/integration/lib.sh
. "$RLGATE_SRCDIR/tests/integration/lib.sh" || { echo "Bail out! cannot read lib.sh"; exit 99; }

need_cmd lighttpd spawn-fcgi curl
[ -x "$RLGATE_BIN" ] || bail_out "no rlgate binary at $RLGATE_BIN"
FAKE_BIN=${FAKE_BIN:-$RLGATE_BUILDDIR/tests/fake_redis}
[ -x "$FAKE_BIN" ] || bail_out "no fake_redis at $FAKE_BIN (make check builds it)"
make_tmpdir

make_rundir
CONNECT_MS=500
TIMEOUT_MS=500
TRICKLE_MS=200
demo_lighttpd_conf

# start_fake MODE [TRICKLE_MS]: fake_redis in MODE, tracked by pid
# (FAKE_PID), its port in FPORT. Stops the one before.
FAKE_PID=
start_fake() {
	[ -n "$FAKE_PID" ] && stop_pids "$FAKE_PID"
	rm -f "$T/fake.port" "$T/fake.pid"
	"$FAKE_BIN" --mode "$1" --trickle-ms "${2:-100}" --lifetime-s 120 \
	    --port-file "$T/fake.port" --pid-file "$T/fake.pid" \
	    </dev/null >>"$T/fake.log" 2>&1 &
	FAKE_PID=$!
	track_pid "$FAKE_PID"
	wait_for_file "$T/fake.port" 10 || bail_out "fake_redis --mode $1 wrote no port: $(tail -3 "$T/fake.log")"
	FPORT=$(cat "$T/fake.port")
}

# conf NAME ON_ERROR: $T/NAME.conf, the Redis store on the fake.
conf() {
	cat >"$T/$1.conf" <<EOF
; written by $(basename "$0")
[store]
backend = redis
url = redis://plugh:xyzzy@127.0.0.1:$FPORT
clock = local
connect_timeout_ms = $CONNECT_MS
timeout_ms = $TIMEOUT_MS
on_error = $2

[policy default]
algorithm = fixed_window
limit = 5
window = 60
EOF
}

# gateway NAME: rlgate with $T/NAME.conf behind the lighttpd (started the
# first time); the last one stopped.
CUR=
gateway() {
	[ -n "$CUR" ] && stop_rlgate_fcgi "$CUR"
	"$RLGATE_BIN" --check-config --config "$T/$1.conf" >"$T/$1.check" 2>&1 ||
		bail_out "rlgate rejects $1.conf: $(head -5 "$T/$1.check")"
	start_rlgate_fcgi "$1" "$sock" "$T/$1.conf" 1 --threads 2
	CUR=$1
	if [ -z "${LIGHTTPD_PID:-}" ]; then
		start_lighttpd "$T/lighttpd.conf" "$PORT"
	fi
}

# ---- 1. a reply out of range ---------------------------------------------------

start_fake retry-huge
conf huge-closed closed
gateway huge-closed
bad=0
huge_after=
for i in 1 2 3 4 5 6; do
	req "$url"
	ra=$(header Retry-After)
	if [ "$STATUS" != 503 ] || [ "$ra" != 1 ] || ! [[ $BODY =~ $(re_err 503) ]]; then
		bad=$((bad + 1))
		diag "request $i: $STATUS, Retry-After: $ra, $BODY"
	fi
	[ "${#ra}" -gt 10 ] && huge_after=$ra
done
is "$bad" 0 "retry-huge, on_error = closed: 6 x 503, Retry-After: 1, JSON body"
is "$huge_after" "" "retry-huge: never a huge Retry-After"
lost=$(grep -c 'store lost' "$T/huge-closed.log")
line=$(grep -m1 'store lost' "$T/huge-closed.log")
like "$line" "redis 127\.0\.0\.1:$FPORT: EVALSHA: .*\\(9223372036854775807\\): retry_ms" \
    "retry-huge: the log names the server, the field and the value"
between "$lost" 1 2 "retry-huge: one 'store lost' per worker thread, not one per request"
unlike "$(cat "$T/huge-closed.log")" 'xyzzy|plugh' "the log shows neither the user nor the password of the url"
rlgate_pids_alive huge-closed
ok $? "retry-huge: the workers live on"

conf huge-open open
gateway huge-open
bad=0
for i in 1 2 3 4 5 6; do
	req "$url"
	if [ "$STATUS" != 200 ] || has_header RateLimit-Limit || has_header Retry-After ||
	    ! [[ $BODY =~ $RE_BODY_200 ]]; then
		bad=$((bad + 1))
		diag "request $i: $STATUS, $(tr '\n' ' ' <"$T/last.headers")"
	fi
done
is "$bad" 0 "retry-huge, on_error = open: 6 x 200 without rate-limit headers"
rlgate_pids_alive huge-open
ok $? "retry-huge, open: the workers live on"

# ---- 2. a trickled reply -------------------------------------------------------

start_fake trickle "$TRICKLE_MS"
conf trickle closed
gateway trickle
bound=$((3 * (CONNECT_MS + TIMEOUT_MS)))
t0=$(now_ms)
CURL_MAX_TIME=30 req "$url"
took=$(($(now_ms) - t0))
diag "trickle: answered $STATUS after $took ms (a byte every $TRICKLE_MS ms, timeout_ms = $TIMEOUT_MS)"
is "$STATUS" 503 "trickle: a store failure (503)"
is "$(header Retry-After)" 1 "trickle: Retry-After: 1"
between "$took" 0 "$bound" "trickle: answered within 3 x (connect_timeout_ms + timeout_ms)"
like "$(grep -m1 'store lost' "$T/trickle.log")" "EVALSHA: timed out after $TIMEOUT_MS ms" \
    "trickle: logged as a timeout"
rlgate_pids_alive trickle
ok $? "trickle: the workers live on"
stop_rlgate_fcgi "$CUR"
CUR=

# ---- 3. --check-config never shows a secret -------------------------------------

n=0
for u in 'redis://xyzzy@h' 'redis://xyzzy@h:99999' 'redis://plugh:xyzzy@h:0' \
    'rediss://plugh:xyzzy@h' 'http://plugh:xyzzy@h' 'xyzzy@h' \
    'redis://h/0?password=xyzzy' 'unix:/p?user=plugh' \
    'unix:/p?password=xyzzy&plugh' 'unix:/p?pass=xyzzy'; do
	n=$((n + 1))
	printf '[store]\nbackend = redis\nurl = %s\n' "$u" >"$T/secret$n.conf"
	out=$("$RLGATE_BIN" --check-config --config "$T/secret$n.conf" 2>&1)
	rc=$?
	if [ "$rc" != 78 ] || [[ $out == *xyzzy* ]] || [[ $out == *plugh* ]] ||
	    [[ $out != *'***'* ]]; then
		fail "--check-config, url $n: exit 78, the secret masked" "exit $rc: $out"
	else
		pass "--check-config, url $n: exit 78, the secret masked"
	fi
done

done_testing
