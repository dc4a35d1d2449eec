#!/usr/bin/env bash
# planted.sh: shared files another user planted, and a flush that keeps
# failing, through real lighttpd and spawn-fcgi.
#
# The database sits in a directory of mode 1777. Another user (nobody)
# plants a valid scoreboard and a table there first, mode 0666. rlgate
# (root here) refuses both (a log line naming the file, its owner and
# mode), sets them aside as NAME.refused and makes its own, mode 0600.
# Then that user writes 0x7fffffff at offset 24 of the scoreboard (its
# slot count): into its own refused file, since the live one is not
# writable to it. /rlgate/metrics and a request still answer, the worker
# lives. (An rlgate that mapped the planted file read its slot count from
# the mapping and died at the scrape.)
#
# Then the database is held by another connection (BEGIN EXCLUSIVE, for
# a few seconds): requests are still answered from the table, and
# /rlgate/metrics shows rlgate_flush_failures_total above 0 and
# rlgate_flush_age_seconds growing; once released, the age falls back.
#
# Last, the live table written by a hand that may write it (its owner, or
# a bug): every bit of its bitmaps set and every byte of its entry slots
# 0x01, so every slot is in use (a run that never ends) and holds an
# entry no key fits (a length of 257).
# A lookup ends after the slots, a new client and the known one are
# refused as a full table (on_error = closed: 503, logged "store full"),
# /rlgate/status answers and the worker lives.
#
# Needs root (the planting user is another user): else skipped.
: "${RLGATE_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/integration/lib.sh
. "$RLGATE_SRCDIR/tests/integration/lib.sh" || { echo "Bail out! cannot read lib.sh"; exit 99; }

setup_test spawn-fcgi sqlite3 curl timeout setpriv dd
[ "$(id -u)" -eq 0 ] || skip_all "planting as another user needs root (chown, setpriv)"

# as_nobody CMD...: CMD as user and group 65534, bounded.
as_nobody() {
	timeout 10 setpriv --reuid=65534 --regid=65534 --clear-groups "$@"
}

# metric NAME: the value of NAME in the last answer ($BODY), or "".
metric() {
	printf '%s\n' "$BODY" | awk -v n="$1" '$1 == n { print $2; exit }'
}

make_rundir
shared="$T/shared"
mkdir -p "$shared" "$T/tmpl"
chmod 1777 "$shared"
db="$shared/rlgate.db"

# --- a valid scoreboard and table to copy: made by rlgate elsewhere
write_rlgate_conf "$T/tmpl.conf" "$T/tmpl/x.db" 100 60
start_rlgate_fcgi tmpl "$run/tmpl.sock" "$T/tmpl.conf" 1 --threads 1
demo_lighttpd "$run/tmpl.sock"
req "$url"
is "$STATUS" 200 "the template rlgate answers"
stop_pids "$LIGHTTPD_PID"
stop_rlgate_fcgi tmpl
if [ ! -f "$T/tmpl/x.db-metrics" ] || [ ! -f "$T/tmpl/x.db-table" ]; then
	bail_out "no template scoreboard or table"
fi
chmod 644 "$T/tmpl/x.db-metrics" "$T/tmpl/x.db-table"

# --- planted by nobody, mode 0666, before rlgate's first start
# shellcheck disable=SC2016
as_nobody sh -c 'cp "$1" "$3" && cp "$2" "$4" && chmod 0666 "$3" "$4"' \
    planter "$T/tmpl/x.db-metrics" "$T/tmpl/x.db-table" "$db-metrics" \
    "$db-table" || bail_out "nobody cannot plant files in $shared"
is "$(stat -c '%u %a' "$db-metrics")" "65534 666" "planted: a scoreboard of nobody's, mode 0666"

write_rlgate_conf "$T/rlgate.conf" "$db" 100 60 closed 100
sed -i 's/^\[store\]$/[store]\nflush_ms = 200\nmax_clients = 1000/' "$T/rlgate.conf"
check_conf rlgate
start_rlgate_fcgi gw "$sock" "$T/rlgate.conf" 1 --threads 2
demo_lighttpd "$sock"
req "$url"
is "$STATUS" 200 "a request: 200"
like "$(cat "$T/gw.log")" "metrics $db-metrics: refused: another user's file \\(owner uid 65534, mode 0666\\)" \
    "the planted scoreboard is refused, said with its owner and mode"
like "$(cat "$T/gw.log")" "table $db-table: refused: another user's file \\(owner uid 65534, mode 0666\\)" \
    "the planted table is refused too"
is "$(stat -c '%u %a' "$db-metrics")" "0 600" "the scoreboard in use: root's, mode 0600"
is "$(stat -c '%u %a' "$db-table")" "0 600" "the table in use: root's, mode 0600"
is "$(stat -c '%u' "$db-metrics.refused")" 65534 "the planted one set aside as .refused"

# --- nobody writes a slot count of 0x7fffffff at offset 24
printf '\377\377\377\177' | as_nobody dd of="$db-metrics" bs=1 seek=24 \
    conv=notrunc status=none 2>/dev/null
isnt "$?" 0 "nobody cannot write the scoreboard in use"
printf '\377\377\377\177' | as_nobody dd of="$db-metrics.refused" bs=1 \
    seek=24 conv=notrunc status=none
req "$base/rlgate/metrics"
is "$STATUS" 200 "GET /rlgate/metrics after the write: 200"
is "$(metric 'rlgate_requests_total{policy="default",decision="admitted"}')" 1 \
    "... counts the request"
is "$(metric rlgate_metrics_shared)" 1 "... in the host's scoreboard"
req "$url"
is "$STATUS" 200 "a request after it: 200"
rlgate_pids_alive gw
ok $? "the worker lives"

# --- the database held by another connection: flushes fail, counted
req "$base/rlgate/metrics"
is "$(metric rlgate_flush_failures_total)" 0 "no failed flush yet"
# .timeout: the shell waits for a flush in progress rather than failing
# to take the lock (then nothing would be locked)
(echo ".timeout 5000"; echo "BEGIN EXCLUSIVE;"; sleep 5; echo "COMMIT;") |
    timeout 15 sqlite3 "$db" >/dev/null 2>&1 &
holder=$!
track_pid "$holder"
failures=0
for _ in $(seq 1 30); do
	req --interface 127.0.0.2 "$url"
	[ "$STATUS" = 200 ] || break
	req "$base/rlgate/metrics"
	failures=$(metric rlgate_flush_failures_total)
	[ "${failures:-0}" -gt 0 ] && break
	sleep 0.1
done
is "$STATUS" 200 "while the database is locked: answered"
ok "$([ "${failures:-0}" -gt 0 ]; echo $?)" "... and rlgate_flush_failures_total > 0 ($failures)"
first_age=$(metric rlgate_flush_age_seconds)
sleep 1
req "$base/rlgate/metrics"
locked_age=$(metric rlgate_flush_age_seconds)
ok "$(awk -v a="$locked_age" -v b="$first_age" 'BEGIN { exit !(a > b) }'; echo $?)" \
    "... the flush age grows while it is locked ($first_age s -> $locked_age s)"
wait "$holder"
aged=
for _ in $(seq 1 50); do
	req "$base/rlgate/metrics"
	aged=$(metric rlgate_flush_age_seconds)
	awk -v a="$aged" -v b="$locked_age" 'BEGIN { exit !(a < b) }' && break
	sleep 0.1
done
ok "$(awk -v a="$aged" -v b="$locked_age" 'BEGIN { exit !(a < b) }'; echo $?)" \
    "released: the flush age falls back ($locked_age s -> $aged s)"
like "$(cat "$T/gw.log")" "flush failed, retried" "the failed flush is logged"
req "$base/rlgate/status"
like "$BODY" '"flush_failures":[1-9][0-9]*,"flush_age_s":' "/rlgate/status shows them"

# --- the live table's bitmaps and entry slots written over: every bit
# set, 0x01 in every byte of the slots
# header_u64 OFF: the 8 bytes at OFF of the table's header, a number.
header_u64() {
	od -An -t u8 -j "$1" -N 8 "$db-table" | tr -d ' '
}
entry_size=$(header_u64 16)
capacity=$(header_u64 24)
slots=$(header_u64 32)
spill=$(( (capacity < 4096 ? capacity : 4096) * 272 ))
entries_off=$(( $(stat -c %s "$db-table") - spill - slots * entry_size ))
# the two bitmaps (the slots in use, the entries that owe) end where the
# slots begin: 8 bytes each for 64 slots, 64 aligned
bitmap_len=$(( ( 2 * ( (slots + 63) / 64 * 8 ) + 63) / 64 * 64 ))
is "$slots" $(( capacity + capacity / 3 + 1 )) "the table: $capacity entries, $slots slots"
head -c "$bitmap_len" /dev/zero | tr '\0' '\377' |
    dd of="$db-table" bs=64K iflag=fullblock seek=$(( entries_off - bitmap_len )) \
    oflag=seek_bytes conv=notrunc status=none
head -c $(( slots * entry_size )) /dev/zero | tr '\0' '\1' |
    dd of="$db-table" bs=64K iflag=fullblock seek="$entries_off" oflag=seek_bytes \
    conv=notrunc status=none
req "$url"
is "$STATUS" 503 "every slot in use, no entry sound: the client refused (503)"
req --interface 127.0.0.3 "$url"
is "$STATUS" 503 "... a new client too"
like "$(cat "$T/gw.log")" "store full" "... logged as a full table"
req "$base/rlgate/status"
is "$STATUS" 200 "/rlgate/status answers"
rlgate_pids_alive gw
ok $? "the worker lives"

stop_pids "$LIGHTTPD_PID"
stop_rlgate_fcgi gw
done_testing
