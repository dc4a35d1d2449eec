#!/usr/bin/env bash
# shellcheck disable=SC2016,SC2034,SC2317  # wait_for evaluates its conditions (and calls gone) later
# supervisor.sh: rlgate --processes N, under spawn-fcgi -n (which binds the
# socket and execs rlgate in its own process), behind lighttpd:
#   1. N worker processes serve; a worker killed with SIGKILL is replaced
#      (logged, with how it ended), one that dies again soon waits a
#      doubling backoff;
#   2. SIGHUP to the supervisor reloads every worker, one being replaced
#      too; SIGUSR1 reopens the logs (the supervisor's and the workers');
#   3. SIGTERM stops them gracefully: a request in flight (its input still
#      coming) is answered whole, then every process is gone and the
#      supervisor exits 0;
#   4. a supervisor killed with SIGKILL takes its workers with it;
#   5. --processes without a FastCGI socket: exit 64, saying why.
: "${RLGATE_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/integration/lib.sh
. "$RLGATE_SRCDIR/tests/integration/lib.sh" || { echo "Bail out! cannot read lib.sh"; exit 99; }

setup_test lighttpd spawn-fcgi curl timeout

client=$RLGATE_BUILDDIR/tests/fcgi_client
[ -x "$client" ] || bail_out "no $client (make check builds it)"

make_rundir
conf="$T/sv.conf"
write_rlgate_conf "$conf" "$T/sv.db" 1000 3600
log="$T/sv-log"

# start_sv N: the supervisor with N workers on $sock, in the background;
# sets SV (its pid), waits for its N workers.
start_sv() {
	rm -f "$sock"
	spawn-fcgi -s "$sock" -M 0666 -n -- "$RLGATE_BIN" --config "$conf" \
	    --processes "$1" --threads 2 --log "$log" </dev/null >/dev/null 2>&1 &
	SV=$!
	track_pid "$SV"
	wait_for "workers" 10 '[ "$(workers | wc -w)" -eq '"$1"' ]' ||
		bail_out "no $1 workers: $(tail -5 "$log")"
}

# workers: the supervisor's children
workers() {
	pgrep -P "$SV" | tr '\n' ' '
}

# three_without PID: three workers, PID not among them, in one listing (two
# listings may straddle the reaping of PID, dead but not yet reaped)
three_without() {
	local w
	w=$(workers)
	[ "$(wc -w <<<"$w")" -eq 3 ] && ! grep -qw "$1" <<<"$w"
}

# wait_for WHAT SECONDS CMD: CMD true within SECONDS (polled every 0.1 s).
wait_for() {
	local i
	for i in $(seq 1 $(($2 * 10))); do
		eval "$3" && return 0
		sleep 0.1
	done
	diag "waited $2 s for $1"
	return 1
}

# ---- 1. workers, replaced ------------------------------------------------------

start_sv 3
demo_lighttpd "$sock"
first=$(workers)
is "$(wc -w <<<"$first")" 3 "--processes 3: three workers"
codes=
for i in 1 2 3 4 5 6; do
	req "$url"
	codes="$codes $STATUS"
done
is "${codes# }" "200 200 200 200 200 200" "they serve through lighttpd"
victim=$(awk '{ print $1 }' <<<"$first")
kill -9 "$victim"
wait_for "a new worker" 20 "three_without $victim"
ok $? "a worker killed with SIGKILL: another takes its place"
like "$(grep "worker $victim " "$log")" "supervisor: worker $victim was killed by signal 9 \\(Killed\\) after [0-9]+ ms: starting another in 100 ms" \
    "... logged, with how it ended"
req "$url"
is "$STATUS" 200 "... and requests are served"
# newcomer: a worker not in $first (sets NEW), when there are 3 workers;
# one listing of the workers decides both (pgrep twice may see two states)
newcomer() {
	local w
	w=$(workers)
	NEW=$(tr ' ' '\n' <<<"$w" | grep -vxF -f <(tr ' ' '\n' <<<"$first") |
	    grep -m1 .)
	[ "$(wc -w <<<"$w")" -eq 3 ] && [ -n "$NEW" ]
}
# the new one dies at once, twice: the wait doubles
for want in 200 400; do
	wait_for "a new worker" 20 newcomer ||
		bail_out "no new worker to kill: workers $(workers), first $first"
	new=$NEW
	kill -9 "$new"
	wait_for "a new worker" 20 "three_without $new"
	said=$(grep "worker $new " "$log")
	like "$said" "starting another in $want ms" \
	    "a worker that dies soon again: the next waits $want ms"
	[[ $said =~ "starting another in $want ms" ]] ||
		diag "workers $(workers), killed $new, first $first; the supervisor said: $(grep 'supervisor:' "$log")"
	first="$first $new"
done

# ---- 2. SIGHUP, SIGUSR1 -------------------------------------------------------------

# every worker started (its threads up, the signal thread among them)
# before the SIGHUP: a worker restarted a moment ago may still be starting
# (SIGHUP and SIGUSR1 while a worker starts: part 11)
# shellcheck disable=SC2317  # called through wait_for
all_started() {
	local p
	local -a tasks
	for p in $(workers); do
		tasks=(/proc/"$p"/task/*)
		[ ${#tasks[@]} -ge 3 ] || return 1
	done
}
wait_for "every worker started" 20 all_started
sleep 0.5
off=$(wc -c <"$log")
kill -HUP "$SV"
wait_for "three reloads" 20 '[ "$(tail -c +$((off + 1)) "$log" | grep -c "reload: .*loaded")" -eq 3 ]'
rc=$?
ok $rc "SIGHUP to the supervisor: each of the three workers reloads"
[ $rc -eq 0 ] || diag "workers: $(workers); logged since: $(tail -c +$((off + 1)) "$log" | tail -8)"
mv "$log" "$log.1"
kill -USR1 "$SV"
wait_for "the log again" 5 '[ -f "$log" ]'
ok $? "SIGUSR1: the log is opened again at its path"
req "$url"
kill -HUP "$SV"
wait_for "three reloads in the new log" 20 '[ "$(grep -c "reload: .*loaded" "$log" 2>/dev/null)" -eq 3 ]'
ok $? "... the workers write there too"
# signals that come while a worker starts wait for it: none ends it (the
# default action of SIGHUP and SIGUSR1 would, before the worker takes them)
off=$(wc -c <"$log")
victim=$(workers | awk '{ print $1 }')
kill -9 "$victim"
# as fast as the shell can (a bounded count: about 0.1 s here), across
# the new worker's start, 100 ms after the victim's end (under ASan or
# load the start takes longer, and CI once saw a SIGHUP end a worker)
sleep 0.08
for _ in $(seq 1 1000); do
	kill -HUP "$SV"
	kill -USR1 "$SV"
done
wait_for "three workers" 5 "three_without $victim"
sleep 1
ended=$(tail -c +$((off + 1)) "$log" | grep -E "killed by signal (1|10) " | head -3)
is "$ended" "" "SIGHUP and SIGUSR1 while a worker starts: none ends it"
is "$(workers | wc -w)" 3 "... three workers still"

# a SIGHUP that comes while a worker is being replaced reaches the new
# worker too: every worker, the new one among them, logs the reload. Odd
# rounds send it at once (no process yet in the slot), even rounds as
# soon as the new worker exists (still starting); rounds bounded (each
# waits for the new worker's backoff, up to 10 s)
# shellcheck disable=SC2317  # called through wait_for
reloaded() {
	local p
	for p in $(workers); do
		tail -c +$((off + 1)) "$log" |
		    grep -q "rlgate\[$p\]: reload: .*loaded" || return 1
	done
}
replaced() {
	three_without "$victim"
}
rounds=6
missed=0
for round in $(seq 1 $rounds); do
	off=$(wc -c <"$log")
	victim=$(workers | awk '{ print $1 }')
	kill -9 "$victim"
	if [ $((round % 2)) -eq 0 ]; then
		for _ in $(seq 1 4000); do
			replaced && break
			sleep 0.005
		done
	fi
	kill -HUP "$SV"
	wait_for "three workers" 20 replaced ||
		bail_out "no new worker after $victim: $(tail -5 "$log")"
	if ! wait_for "every worker's reload" 20 reloaded; then
		missed=$((missed + 1))
		diag "round $round: workers $(workers); logged since: $(tail -c +$((off + 1)) "$log" | tail -6)"
	fi
done
is "$missed" 0 "SIGHUP while a worker is replaced: the new worker reloads too ($rounds rounds)"

# ---- 3. SIGTERM: graceful ----------------------------------------------------------

pids="$SV $(workers)"
"$client" "$sock" GET /api/v1/resources --late-stdin 1000 >"$T/inflight" 2>&1 &
cl=$!
sleep 0.3
kill -TERM "$SV"
wait "$cl"
is "$(cat "$T/inflight")" "status=200 end=closed" "SIGTERM during a request: the request is answered whole"
timeout 10 tail --pid="$SV" -f /dev/null
wait "$SV"
is "$?" 0 "the supervisor exits 0"
left=
for p in $pids; do
	pid_alive "$p" && left="$left $p"
done
is "${left# }" "" "... and no worker is left"
like "$(tail -1 "$log")" "supervisor: stopped" "... logged"

# ---- 4. the supervisor killed ------------------------------------------------------

start_sv 2
w=$(workers)
kill -9 "$SV"
wait "$SV" 2>/dev/null
gone() {
	local p
	for p in $w; do
		pid_alive "$p" && return 1
	done
	return 0
}
wait_for "the workers to stop" 5 gone
ok $? "a supervisor killed with SIGKILL: its workers stop too"

# ---- 5. no socket ------------------------------------------------------------------

"$RLGATE_BIN" --config "$conf" --processes 2 </dev/null >"$T/nosock.out" 2>&1
is "$?" 64 "--processes without a FastCGI socket: exit 64"
like "$(cat "$T/nosock.out")" "--processes: no FastCGI socket on standard input" "... saying why"

done_testing
