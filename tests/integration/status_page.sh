#!/usr/bin/env bash
# status_page.sh: the live status page, {prefix}/ (app/status_page.html,
# served by rlgate at /rlgate/ through the shipped lighttpd config), in a
# real browser, headless Chromium, while requests are admitted and rejected:
# the page polls /rlgate/status, shows every policy with a rate of admitted
# and of rejected requests above 0 (its own arithmetic on two successive
# polls), the store's health as ok, and the client over its limit among the
# clients closest to their limits. GET /rlgate/status answers JSON. A
# screenshot is kept as tests/integration/status_page.png under the current
# directory (beside the test's log under `make check`) for a person to look
# at; the DOM the browser ended with is in $T (RLGATE_KEEP_TMP=1 keeps it).
#
# Chromium runs the page in virtual time (--virtual-time-budget), which
# stands still while a fetch is pending and jumps from timer to timer
# otherwise: the polls, 2 s apart in the page's time, would come a few
# milliseconds apart in real time, too close for a rate. lighttpd therefore
# sends /rlgate/status at 1 KB/s (connection.kbytes-per-second): each poll's
# answer, over 1 KB, then waits for lighttpd's next second, and successive
# polls are about a second apart in real time, as rlgate's time_ms shows.
#
# Without chromium (scripts/deps.sh installs it) the script is skipped.
: "${RLGATE_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/integration/lib.sh
. "$RLGATE_SRCDIR/tests/integration/lib.sh" || { echo "Bail out! cannot read lib.sh"; exit 99; }

CHROMIUM=${CHROMIUM:-$(command -v chromium 2>/dev/null || command -v chromium-browser 2>/dev/null)}
[ -n "$CHROMIUM" ] || skip_all "chromium is not installed (scripts/deps.sh installs it)"

setup_test lighttpd spawn-fcgi curl timeout
timing_sensitive

# 8 polls in the page's time (one at once, then every 2 s); each takes about
# a second of real time (see above)
BUDGET_MS=15000
# the load: at most this many requests, or this many seconds (it stops as
# soon as Chromium is done, about 10 s in)
LOAD_MAX=2000
LOAD_S=45

make_rundir
write_store_conf page <<'EOF'
[headers]
style = draft03

[policy api]
algorithm = fixed_window
limit = 5
window = 60
key = ip

[policy burst]
algorithm = token_bucket
limit = 6000
window = 60
burst = 1000
key = ip
EOF
check_conf page
start_rlgate_fcgi rlgate "$sock" "$T/page.conf" 2 --threads 2

demo_lighttpd_conf "$sock"
cat >>"$T/lighttpd.conf" <<'EOF'
# the status at 1 KB/s: Chromium's polls a second apart in real time
$HTTP["url"] =~ "^/rlgate/status" {
    connection.kbytes-per-second = 1
}
EOF
start_lighttpd "$T/lighttpd.conf" "$PORT"

# --- the JSON and the page, by curl
req "$base/rlgate/status"
is "$STATUS" 200 "GET /rlgate/status: 200"
like "$(header Content-Type)" '^application/json' "/rlgate/status is JSON"
like "$BODY" '"policies"' "/rlgate/status has \"policies\""
req "$base/rlgate/"
is "$STATUS" 200 "GET /rlgate/: 200"
like "$(header Content-Type)" '^text/html' "/rlgate/ is HTML"
like "$BODY" 'id="policies"' "/rlgate/ is the status page"

# --- the load, in the background: 127.0.0.1 over the api policy's limit
# after its first 5 requests (rejected from then on), and beside it a new
# client every 3 requests, 127.0.1.2 and up (admitted: 2 left of 5). Bounded
# by LOAD_MAX requests and LOAD_S seconds; stops early when $T/load.stop
# appears. Each answer's status goes to $T/load.codes.
load() {
	local i=0 n=0 deadline c
	deadline=$(($(now_ms) + LOAD_S * 1000))
	while [ $i -lt $LOAD_MAX ] && [ "$(now_ms)" -lt $deadline ] && [ ! -e "$T/load.stop" ]; do
		curl -s -o /dev/null --max-time 5 -w '%{http_code}\n' "$url" >>"$T/load.codes"
		c=127.0.$((n / 3 / 250 + 1)).$((n / 3 % 250 + 2))
		curl -s -o /dev/null --max-time 5 -w '%{http_code}\n' --interface "$c" "$url" >>"$T/load.codes"
		i=$((i + 2))
		n=$((n + 1))
		sleep 0.02
	done
}
# the whole run in one window of the api policy (20 s of it at least):
# after a new window 127.0.0.1 would not be the closest to its limit at once
ensure_window_room 60 20
: >"$T/load.codes"
load &
LOAD_PID=$!
track_pid "$LOAD_PID"
# 127.0.0.1 over its limit before the page's first poll
# shellcheck disable=SC2317  # called through wait_until
load_lines() { [ "$(wc -l <"$T/load.codes")" -ge "$1" ]; }
wait_until 15000 load_lines 20 || diag "the load is slow: $(wc -l <"$T/load.codes") answers in 15 s"

# --- the page in headless Chromium: the DOM after BUDGET_MS of the page's
# time, and a screenshot of it. Every address but 127.0.0.1 is unreachable
# to it (no name resolves, every other HTTP request goes to a dead proxy on
# 127.0.0.1:9) and its profile is in $T.
png=tests/integration/status_page.png
mkdir -p "$(dirname "$png")"
rm -f "$png"
# shellcheck disable=SC2054  # --window-size=W,H takes a comma
chromium_flags=(
	--headless --no-sandbox --disable-gpu --disable-dev-shm-usage
	--user-data-dir="$T/chromium" --no-first-run --no-default-browser-check
	--disable-background-networking --disable-component-update --disable-sync
	--disable-extensions --disable-default-apps --metrics-recording-only
	--proxy-server=127.0.0.1:9 '--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1'
	--window-size=1280,1400 --hide-scrollbars --enable-logging=stderr
)
t0=$(now_ms)
timeout -k 5 90 "$CHROMIUM" "${chromium_flags[@]}" --virtual-time-budget="$BUDGET_MS" \
    --screenshot="$png" --dump-dom "$base/rlgate/" \
    </dev/null >"$T/status_page.dom" 2>"$T/chromium.log"
rc=$?
diag "chromium: exit status $rc after $(($(now_ms) - t0)) ms"
ok $rc "chromium loaded $base/rlgate/ and dumped its DOM"

touch "$T/load.stop"
wait_until 10000 pid_gone "$LOAD_PID" || stop_pids "$LOAD_PID"
wait "$LOAD_PID" 2>/dev/null
diag "the load: $(sort "$T/load.codes" | uniq -c | awk '{ printf "%s x %s  ", $1, $2 }')"
grep -qx 200 "$T/load.codes" && grep -qx 429 "$T/load.codes"
ok $? "the load got both 200 and 429 answers"

if [ -s "$png" ]; then
	pass "screenshot written"
	diag "screenshot: $(cd "$(dirname "$png")" && pwd)/$(basename "$png")"
else
	fail "screenshot written" "$(grep -e ERROR -e CONSOLE "$T/chromium.log" | grep -v dbus | tail -5)"
fi

# --- the DOM: one line per table (tables/TABLE), one line per row of it
# (rows/TABLE); the page builds its rows without newlines
dom=$T/status_page.dom
tr '\n' ' ' <"$dom" | sed 's/<table/\n<table/g; s/<\/table>/<\/table>\n/g' >"$T/tables"
rows() {
	grep "^<table id=\"$1\"" "$T/tables" | sed 's/<tr/\n<tr/g' | grep '^<tr'
}
# cell ROW CLASS: the text of the cell of class CLASS in the row
cell() {
	printf '%s' "$1" | grep -o "<td[^>]* class=\"[^\"]*\\b$2\\b[^\"]*\"[^>]*>[^<]*" | head -1 | sed 's/.*>//'
}
positive() { awk -v v="$1" 'BEGIN { exit !(v ~ /^[0-9]+(\.[0-9]+)?$/ && v + 0 > 0) }'; }

polls=$(grep -o '<body[^>]*>' "$dom" | grep -o 'data-polls="[0-9]*"' | grep -o '[0-9]\+')
diag "polls: ${polls:-none}"
between "${polls:--1}" 2 1000 "the page polled /rlgate/status at least twice"

rows policies | grep '^<tr[^>]* data-policy=' >"$T/rows.policies"
api=$(grep '^<tr[^>]* data-policy="api"' "$T/rows.policies")
burst=$(grep '^<tr[^>]* data-policy="burst"' "$T/rows.policies")
isnt "$api" "" "#policies has a row for policy api"
isnt "$burst" "" "#policies has a row for policy burst"
admitted=''
rejected=''
while IFS= read -r row; do
	name=$(printf '%s' "$row" | grep -o 'data-policy="[^"]*"' | head -1)
	a=$(cell "$row" rate-admitted)
	r=$(cell "$row" rate-rejected)
	diag "${name#data-policy=}: admitted/s $a, rejected/s $r"
	positive "$a" && admitted=$a
	positive "$r" && rejected=$r
	like "$a" '^(-|[0-9]+\.[0-9])$' "${name#data-policy=}: the rate of admitted requests is '-' or a number with one decimal"
	like "$r" '^(-|[0-9]+\.[0-9])$' "${name#data-policy=}: the rate of rejected requests is '-' or a number with one decimal"
done <"$T/rows.policies"
isnt "$admitted" "" "a policy's rate of admitted requests is above 0"
isnt "$rejected" "" "a policy's rate of rejected requests is above 0"

# --enable-logging=stderr: what the page logs to the console (a script
# error, a violation of rlgate's Content-Security-Policy) is a CONSOLE line
console=$(grep ':CONSOLE' "$T/chromium.log")
is "$console" "" "the page logged nothing to the console (no script error, no CSP violation)"

health=$(grep -o 'id="health"[^>]*>[^<]*' "$dom" | sed 's/.*>//')
like "$health" '^ok' "#health: ok"

closest=$(rows closest | grep 'data-client="127\.0\.0\.1"')
isnt "$closest" "" "#closest has a row for 127.0.0.1, over its limit"
grep -q '<svg' <<<"$(grep -o '<div id="chart">.\{0,200\}' "$dom")"
ok $? "#chart holds an svg"
config=$(tr '\n' ' ' <"$dom" | grep -o '<section[^>]*id="config".*' | sed 's/<\/section>.*//')
like "$config" '/rlgate' "#config shows the admin prefix"

if [ $_tap_failed -gt 0 ]; then
	diag "chromium's log: $(grep -e ERROR -e CONSOLE "$T/chromium.log" | grep -v dbus | tail -5)"
	diag "rlgate's log: $(tail -5 "$T/rlgate.log")"
fi

done_testing
