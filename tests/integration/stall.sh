#!/usr/bin/env bash
# stall.sh: the read deadline ([fastcgi] read_timeout_ms, app/server.c).
# rlgate under spawn-fcgi -F 2 --threads 2 (4 workers), on a unix socket
# and on TCP 127.0.0.1, with a deadline of 500 ms. For each kind of
# stalled connection, 14 of them (workers + 10) are opened at once and
# held (tests/fcgi_client --stall): nothing sent; FCGI_BEGIN_REQUEST and
# FCGI_PARAMS without the empty FCGI_PARAMS; a whole Responder request
# whose FCGI_STDIN never ends, its connection never closed; a kept
# connection (FCGI_KEEP_CONN) idle after its answer; a whole request sent
# a byte every 100 ms (a timeout per read would never fire). Another
# client is
# still answered, within 3 deadlines and 2 s (the 14 take the 4 workers
# in 4 rounds of a deadline each; no tighter timing), and again at once;
# rlgate closes every stalled connection, answers none cut in its
# parameters, logs event=read_deadline with the peer and the wait but
# never a byte of the request, one line at once and then at most one per
# 10 s (the next says how many it held back: suppressed=N). Without the
# deadline the other client waits for as long as the stalled connections
# stay open. A stop with every worker on a stalled connection is over
# within 5 s (it waited 10 s); a reload sets another deadline. Then
# FCGI_WEB_SERVER_ADDRS still keeps out a TCP peer it does not list
# (rlgate accepts the connections itself).
: "${RLGATE_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/integration/lib.sh
. "$RLGATE_SRCDIR/tests/integration/lib.sh" || { echo "Bail out! cannot read lib.sh"; exit 99; }

setup_test spawn-fcgi timeout
client=$RLGATE_BUILDDIR/tests/fcgi_client
[ -x "$client" ] || bail_out "no $client (make check builds it)"

D=500                           # read_timeout_ms
N=$((2 * 2 + 10))               # processes x threads + 10
BOUND_MS=$((3 * D + 2000))
HOLD_MS=$((BOUND_MS + 3000))
api=/api/v1/resources

make_rundir
write_rlgate_conf "$T/s.conf" "$T/s.db" 1000000 60
printf '\n[fastcgi]\nread_timeout_ms = %d\n' "$D" >>"$T/s.conf"
"$RLGATE_BIN" --config "$T/s.conf" --check-config >/dev/null ||
	bail_out "rlgate refuses $T/s.conf"
start_rlgate_fcgi unix "$sock" "$T/s.conf" 2 --threads 2
tport=$(free_port) || bail_out "no free port"
start_rlgate_tcp tcp "$tport" "$T/s.conf" 2 --threads 2

# stalls WHERE ADDR: each kind of stalled connection, N at once, and
# another client meanwhile.
stalls() {
	local where=$1 addr=$2 kind spid i t0 ms out want
	for kind in stdin none params kept trickle; do
		"$client" "$addr" --stall "$kind" "$N" "$HOLD_MS" \
		    >"$T/stall.$where.$kind" 2>&1 &
		spid=$!
		track_pid "$spid"
		sleep 0.3               # its connections are in first
		for i in 1 2; do
			t0=$(now_ms)
			out=$(timeout "$((BOUND_MS / 1000)).$((BOUND_MS % 1000 / 100))" \
			    "$client" "$addr" GET "$api" 2>&1)
			ms=$(($(now_ms) - t0))
			like "$out" '^status=200 ' \
			    "$where, $N connections stalled ($kind): request $i answered within $BOUND_MS ms ($ms ms)"
		done
		wait "$spid"
		want=$N
		case $kind in none | params | trickle) want=0 ;; esac
		is "$(cat "$T/stall.$where.$kind")" "closed=$N of $N answered=$want" \
		    "$where, $kind: rlgate closed all $N stalled connections, answered $want"
	done
}

stalls unix "$sock"
stalls tcp "127.0.0.1:$tport"

# one line at once per process, then at most one per 10 s
for name in unix tcp; do
	lines=$(grep -c 'event=read_deadline' "$T/$name.log")
	between "$lines" 1 6 "$name: $lines event=read_deadline lines for $((4 * N)) connections closed at the deadline"
	unlike "$(grep -E 'stall-marker|api/v1' "$T/$name.log")" . \
	    "$name: no byte of a request in the log"
done
# stdin first: the first line of each process is about it
like "$(grep 'event=read_deadline' "$T/unix.log" | head -1)" \
    'event=read_deadline peer=unix wait=input timeout_ms=500 suppressed=0$' \
    "unix: FCGI_STDIN that never ends: the line names the peer, wait=input, the deadline"
like "$(grep 'event=read_deadline' "$T/tcp.log" | head -1)" \
    'event=read_deadline peer=127\.0\.0\.1 wait=close timeout_ms=500 suppressed=0$' \
    "tcp: an answered request whose web server does not close: the peer's address, wait=close"

# 10 s after the unix processes' first lines, stalls again: a process's
# next line says how many it held back. (On a slow machine the stalls
# above may outlast 10 s themselves, and a process's second line comes
# among them: then it is that line which counts what it held back. A
# process's first line holds back nothing: suppressed=0.)
first=$(grep -m1 'event=read_deadline' "$T/unix.log" | cut -c1-19)
first_s=$(date -u -d "$first" +%s 2>/dev/null) || bail_out "no time in the log"
while [ "$(date -u +%s)" -le $((first_s + 11)) ]; do sleep 0.5; done
"$client" "$sock" --stall none "$N" "$HOLD_MS" >/dev/null 2>&1
like "$(grep 'event=read_deadline' "$T/unix.log")" \
    'event=read_deadline peer=unix wait=[a-z]+ timeout_ms=500 suppressed=[1-9][0-9]*' \
    "unix: a line after 10 s says how many it held back"

rlgate_pids_alive unix && rlgate_pids_alive tcp
ok $? "every rlgate process still runs"
like "$("$client" "$sock" GET $api)" '^status=200 ' "unix: answered as before"
# a stop waits for the requests in flight (up to 10 s): a stalled
# connection's is over at its deadline
"$client" "$sock" --stall params 4 5000 >/dev/null 2>&1 &
track_pid $!
sleep 0.3
# shellcheck disable=SC2046
term_and_wait 5000 $(cat "$T/unix.pid")
ok $? "SIGTERM with every worker on a stalled connection: stopped within 5 s"
stop_rlgate_fcgi unix
stop_rlgate_fcgi tcp

# a reload (SIGHUP) sets another deadline
cp "$T/s.conf" "$T/r.conf"
start_rlgate_fcgi reload "$run/r.sock" "$T/r.conf" 1 --threads 1
sed -i 's/^read_timeout_ms = .*/read_timeout_ms = 300/' "$T/r.conf"
kill -HUP "$(cat "$T/reload.pid")"
for _ in $(seq 1 50); do
	grep -q 'reload: .* loaded' "$T/reload.log" && break
	sleep 0.1
done
"$client" "$run/r.sock" --stall none 1 5000 >/dev/null 2>&1
like "$(grep 'event=read_deadline' "$T/reload.log")" 'timeout_ms=300 ' \
    "after a reload to read_timeout_ms = 300, a stalled connection is closed at 300 ms"
stop_rlgate_fcgi reload

# FCGI_WEB_SERVER_ADDRS: only the web servers it lists may connect.
aport=$(free_port) || bail_out "no free port"
FCGI_WEB_SERVER_ADDRS=127.0.0.2,::1 start_rlgate_tcp addrs "$aport" "$T/s.conf" 1 --threads 1
like "$(timeout 5 "$client" "127.0.0.1:$aport" GET $api 2>&1)" 'protocol error|reset' \
    "FCGI_WEB_SERVER_ADDRS=127.0.0.2,::1: a peer at 127.0.0.1 is closed unanswered"
like "$(grep 'event=refused' "$T/addrs.log")" 'event=refused peer=127\.0\.0\.1' \
    "and logged"
stop_rlgate_fcgi addrs
bport=$(free_port) || bail_out "no free port"
FCGI_WEB_SERVER_ADDRS=127.0.0.2,127.0.0.1 start_rlgate_tcp addrs2 "$bport" "$T/s.conf" 1 --threads 1
like "$(timeout 5 "$client" "127.0.0.1:$bport" GET $api 2>&1)" '^status=200 ' \
    "FCGI_WEB_SERVER_ADDRS=127.0.0.2,127.0.0.1: a peer at 127.0.0.1 is answered"
stop_rlgate_fcgi addrs2

done_testing
