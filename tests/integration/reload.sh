#!/usr/bin/env bash
# reload.sh: SIGHUP reloads the configuration, as nginx's does, under load
# behind lighttpd (spawn-fcgi -F 2, --threads 2):
#   1. while four clients send requests without a pause, ten reloads that
#      alternate two configurations (limits, a second policy and a route
#      added and taken away) and two that must be refused (a bad line, a
#      [store] path changed) fail no request: every answer is a 200 or a
#      429, and the workers are the processes that started;
#   2. a refused configuration is logged by every process, each problem as
#      file:line, with "the running configuration stays", and the running
#      limits stay;
#   3. the new limits apply to the next request of every thread: a client
#      of the last configuration gets exactly its limit of 200s, with its
#      RateLimit-Limit; a policy added by a reload shows in the metrics.
# The load loops are bounded in count and time.
: "${RLGATE_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/integration/lib.sh
. "$RLGATE_SRCDIR/tests/integration/lib.sh" || { echo "Bail out! cannot read lib.sh"; exit 99; }

setup_test lighttpd spawn-fcgi curl timeout

make_rundir
WINDOW=3600
conf="$T/reload.conf"

# write NAME LIMIT [EXTRA]: the config (its [store] never changes) with
# policy api of LIMIT, and EXTRA appended; stdin is not read.
write() {
	{
		printf '[store]\npath = %s\nrejection_cache = 0\n\n' "$T/reload.db"
		printf '[policy api]\nlimit = %s\nwindow = %s\n' "$2" "$WINDOW"
		printf '%s' "${3:-}"
	} >"$T/$1.conf"
}
write a 50
write b 60 "
[policy burst]
limit = 100000
window = 60

[route all]
path = /api/*
policies = api, burst
"
write c 7
cp "$T/a.conf" "$conf"
"$RLGATE_BIN" --check-config --config "$conf" >"$T/check.out" 2>&1 ||
	bail_out "the first config: $(cat "$T/check.out")"

start_rlgate_fcgi rlgate "$sock" "$conf" 2 --threads 2
pids_before=$(sort "$T/rlgate.pid" | tr '\n' ' ')
demo_lighttpd

# hup: SIGHUP to every worker.
hup() {
	local p
	# shellcheck disable=SC2013
	for p in $(cat "$T/rlgate.pid"); do
		kill -HUP "$p"
	done
}

# ---- 1. reloads under load ---------------------------------------------------

# load N: client 127.0.3.N sends up to 600 requests (at most 60 s, until
# $T/stop appears and it has met its limit once: a loaded machine may send
# fewer than a limit's worth during the reloads), one status code a line
# into $T/codes.N
load() {
	local i code refused=0 end=$((SECONDS + 60))
	for i in $(seq 1 600); do
		[ $SECONDS -lt $end ] && { [ ! -e "$T/stop" ] || [ "$refused" -eq 0 ]; } || break
		code=$(curl -s -o /dev/null --max-time 5 -w '%{http_code}' \
		    --interface "127.0.3.$1" "$url")
		[ "$code" = 429 ] && refused=1
		printf '%s\n' "$code"
	done >"$T/codes.$1"
}
loaders=()
for n in 1 2 3 4; do
	load "$n" &
	track_pid $!
	loaders+=("$!")
done

for i in 1 2 3 4 5 6 7 8 9 10; do
	sleep 0.3
	if [ $((i % 2)) -eq 1 ]; then cp "$T/b.conf" "$conf"; else cp "$T/a.conf" "$conf"; fi
	hup
	if [ "$i" -eq 4 ]; then
		# a bad line, then a store that cannot change: both refused
		sleep 0.3
		bad_off=$(log_size rlgate)
		{ cat "$T/a.conf"; printf 'limit_typo = 5\n'; } >"$conf"
		hup
		sleep 0.3
		store_off=$(log_size rlgate)
		sed "s|^path = .*|path = $T/elsewhere.db|" "$T/a.conf" >"$conf"
		hup
		sleep 0.3
		cp "$T/a.conf" "$conf"
		hup
	fi
done
sleep 0.5
: >"$T/stop"
for p in "${loaders[@]}"; do
	wait "$p"
done

all=$(cat "$T"/codes.*)
total=$(printf '%s\n' "$all" | grep -c .)
bad=$(printf '%s\n' "$all" | grep -cvE '^(200|429)$')
between "$total" 100 2400 "under the reloads: $total requests answered"
is "$bad" 0 "... every answer a 200 or a 429 (other: $(printf '%s\n' "$all" | grep -vE '^(200|429)$' | sort | uniq -c | tr '\n' ' '))"
like "$(printf '%s\n' "$all" | sort -u | tr '\n' ' ')" '429' "... the limits held (some 429s)"
is "$(sort "$T/rlgate.pid" | tr '\n' ' ')" "$pids_before" "the workers are those that started"
alive=0
for p in $pids_before; do
	pid_alive "$p" && alive=$((alive + 1))
done
is "$alive" 2 "... and both still run"
loaded=$(grep -c 'reload: .*: loaded (generation' "$T/rlgate.log")
is "$loaded" $((2 * 11)) "each process logged 11 reloads loaded"

# ---- 2. the refused ones -------------------------------------------------------

# what follows counts in one window
ensure_window_room $WINDOW 60

lines=$(log_since rlgate "$bad_off")
is "$(printf '%s\n' "$lines" | grep -cE "^${LOG_RE}reload: $conf:[0-9]+: \[policy api\] unknown key \"limit_typo\"")" 2 \
    "a bad line: each process logs it as file:line"
is "$(printf '%s\n' "$lines" | grep -c "reload: $conf: 1 problem: the running configuration stays")" 2 \
    "... and that the running configuration stays"
lines=$(log_since rlgate "$store_off")
is "$(printf '%s\n' "$lines" | grep -c "reload: $conf: \[store\] path changed: a reload cannot change the store")" 2 \
    "a [store] path changed: refused, by each process"
[ ! -e "$T/elsewhere.db" ]
ok $? "... nothing opened at the new path"

# the bad config again, after a good one with limit 60 (b): still 60
cp "$T/b.conf" "$conf"
hup
sleep 0.5
{ cat "$T/a.conf"; printf 'limit_typo = 5\n'; } >"$conf"
hup
sleep 0.5
req --interface 127.0.5.1 "$url"
is "$STATUS:$(header RateLimit-Limit)" "200:60" "after a refused reload the running limit (60) stays"

# ---- 3. the new limits apply ------------------------------------------------------

cp "$T/c.conf" "$conf"
hup
sleep 0.5
codes=
for i in $(seq 1 9); do
	req --interface 127.0.6.1 "$url"
	codes="$codes $STATUS"
done
is "${codes# }" "200 200 200 200 200 200 200 429 429" "the last configuration's limit: 7 x 200, then 429"
is "$(header RateLimit-Limit)" 7 "... RateLimit-Limit: 7"

cp "$T/b.conf" "$conf"
hup
sleep 0.5
req --interface 127.0.6.2 "$url"
req "$base/rlgate/metrics"
like "$BODY" 'rlgate_requests_total\{policy="burst",decision="admitted"\} [1-9]' \
    "a policy a reload added is in the metrics"

stop_rlgate_fcgi rlgate
done_testing
