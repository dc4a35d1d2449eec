#!/usr/bin/env bash
# delay.sh: smoothing (a token_bucket policy's delay) through lighttpd and
# rlgate (responder, spawn-fcgi, unix socket), as nginx's limit_req
# without nodelay:
#   1. 20 requests at once against 5/s, burst 10: with delay = 0 the 10
#      admitted leave one turn (200 ms) apart from the first, with
#      X-Rlgate-Delay, and 10 are refused at once; with delay = 10 the 10
#      leave at once; the arrival times are measured;
#   2. 1,000 held answers in one process of 4 threads while another
#      client's requests are answered at full speed;
#   3. the park's bound (max_parked): past it what would wait is refused
#      at once and logged (event=park_full), charging nothing;
#   4. SIGTERM with held answers: each is answered (admitted) before the
#      process exits, and the log says how many left before their turn.
: "${RLGATE_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/integration/lib.sh
. "$RLGATE_SRCDIR/tests/integration/lib.sh" || { echo "Bail out! cannot read lib.sh"; exit 99; }

setup_test lighttpd spawn-fcgi curl

make_rundir
WINDOW=1

# conf NAME [MAX_PARKED]: $T/NAME.conf: route /api/smooth/0 (delay 0), /api/smooth/10
# (delay 10), both 5/s burst 10; /api/park keyed by ?c= (1 per 10 s, burst 2,
# delay 0); everything else the default policy (plenty).
conf() {
	write_store_conf "$1" <<EOF
[client]
key_secret = 00112233445566778899aabbccddeeff

[fastcgi]
max_parked = ${2:-1000}

[headers]
style = draft03

[policy default]
algorithm = fixed_window
limit = 1000000
window = 60

[policy smooth0]
algorithm = token_bucket
limit = 5
window = 1
burst = 10
delay = 0

[policy smooth10]
algorithm = token_bucket
limit = 5
window = 1
burst = 10
delay = 10

[policy park]
algorithm = token_bucket
limit = 1
window = 10
burst = 2
delay = 0
key = query:c
new_keys_per_ip = 0

[route smooth0]
path = /api/smooth/0
policies = smooth0

[route smooth10]
path = /api/smooth/10
policies = smooth10

[route park]
path = /api/park
policies = park
EOF
	check_conf "$1"
}

# burst_at_once N URL: N requests at once (one curl, N connections); one
# line each, "CODE MS DELAY", MS the time until its answer, DELAY its
# X-Rlgate-Delay (or -), sorted by MS, into $T/burst.
burst_at_once() {
	local i
	for i in $(seq 1 "$1"); do
		printf 'url = "%s"\noutput = /dev/null\n' "$2"
	done >"$T/burst.cfg"
	curl -sS -Z --parallel-immediate --parallel-max "$1" -m 20 \
	    -K "$T/burst.cfg" -D "$T/burst.h" \
	    -w '%{http_code} %{time_total} %header{x-rlgate-delay}\n' \
	    >"$T/burst.raw" 2>"$T/burst.err"
	awk '{ d = $3 == "" ? "-" : $3; printf "%s %d %s\n", $1, $2 * 1000, d }' \
	    "$T/burst.raw" | sort -n -k2 >"$T/burst"
}

# count CODE: how many lines of $T/burst have CODE.
count() { awk -v c="$1" '$1 == c' "$T/burst" | wc -l; }

conf main
demo_lighttpd
cat >>"$T/lighttpd.conf" <<'EOF'
server.max-fds = 8192
server.max-connections = 4096
EOF
stop_pids "$LIGHTTPD_PID"
start_lighttpd "$T/lighttpd.conf" "$PORT"
start_rlgate_fcgi main "$sock" "$T/main.conf" 1 --threads 4

# ---- 1. 20 at once ----------------------------------------------------------

burst_at_once 20 "$base/api/smooth/0"
is "$(count 404) $(count 429)" "10 10" "delay = 0: 10 admitted (held), 10 refused"
# the admitted in the order they leave: the k-th (0..9) at k * 200 ms
awk '$1 == 404 { print $2 }' "$T/burst" >"$T/times"
ok_spread=1
k=0
while read -r ms; do
	lo=$((k * 200 - 40)); hi=$((k * 200 + 600))
	if [ "$ms" -lt "$lo" ] || [ "$ms" -gt "$hi" ]; then
		ok_spread=0
		diag "admitted #$k left at $ms ms, not in $lo..$hi"
	fi
	k=$((k + 1))
done <"$T/times"
is "$ok_spread" 1 "delay = 0: the admitted leave one turn (200 ms) apart"
diag "delay = 0, ms until each answer: $(awk '{ printf "%s:%s ", $1, $2 }' "$T/burst")"
last=$(tail -1 "$T/times")
ok "$([ "${last:-0}" -ge 1760 ] && echo 0 || echo 1)" \
    "delay = 0: the last admitted waited nine turns (${last} ms)"
slow_refusal=$(awk '$1 == 429 && $2 > 1000' "$T/burst" | wc -l)
is "$slow_refusal" 0 "delay = 0: the refused are answered at once"
held=$(awk '$1 == 404 && $3 != "-"' "$T/burst" | wc -l)
is "$held" 9 "delay = 0: nine answers say X-Rlgate-Delay"
like "$(awk '$1 == 404 && $3 != "-" { print $3 }' "$T/burst" | sort -n | tail -1)" \
    '^1\.[789][0-9][0-9]$' "X-Rlgate-Delay: the last one waited 1.8 s"
grep -qi '^ratelimit-remaining' "$T/burst.h"
ok $? "a held answer has its RateLimit headers"

burst_at_once 20 "$base/api/smooth/10"
is "$(count 404) $(count 429)" "10 10" "delay = 10: 10 admitted, 10 refused"
late=$(awk '$1 == 404 && $2 > 1000' "$T/burst" | wc -l)
is "$late" 0 "delay = 10: the 10 admitted leave at once"
is "$(awk '$3 != "-"' "$T/burst" | wc -l)" 0 "delay = 10: no X-Rlgate-Delay"

# ---- 2. 1,000 held in one process, another client at full speed --------------

# 1,000 clients (?c=N) each take their one request at once, then each one's
# second waits its turn (about 10 s: room for a slow machine to send
# them all): 1,000 held answers.
for i in $(seq 1 1000); do
	printf 'url = "%s/api/park?c=%d"\noutput = /dev/null\n' "$base" "$i"
done >"$T/park.cfg"
curl -sS -Z --parallel-max 250 -m 30 -K "$T/park.cfg" -w '%{http_code}\n' \
    >"$T/park1" 2>/dev/null
is "$(grep -c '^404$' "$T/park1")" 1000 "1,000 clients: each one's first request at once"
t0=$(now_ms)
cpids=()
for q in 0 1 2 3; do
	sed -n "$((q * 500 + 1)),$((q * 500 + 500))p" "$T/park.cfg" >"$T/park.$q.cfg"
	curl -sS -Z --parallel-immediate --parallel-max 250 -m 30 -K "$T/park.$q.cfg" \
	    -w '%{http_code} %{time_total} %header{x-rlgate-delay}\n' >"$T/park2.$q" 2>/dev/null &
	cpids+=($!)
done
# wait until the process holds them (its descriptors: one per held answer)
pid=${RLGATE_PIDS[0]}
fds=0
until_ms=$(($(now_ms) + 8000))
while [ "$(now_ms)" -lt "$until_ms" ]; do
	fds=$(find "/proc/$pid/fd" -mindepth 1 2>/dev/null | wc -l)
	[ "$fds" -ge 1000 ] && break
	sleep 0.05
done
ok "$([ "$fds" -ge 1000 ] && echo 0 || echo 1)" \
    "one rlgate process (4 threads) holds 1,000 answers ($fds descriptors)"
# meanwhile another client: 200 requests one after another
t1=$(now_ms)
for i in $(seq 1 200); do
	printf 'url = "%s"\noutput = /dev/null\n' "$url"
done >"$T/other.cfg"
curl -sS -m 30 -K "$T/other.cfg" -w '%{http_code} %{time_total}\n' >"$T/other" 2>/dev/null
t2=$(now_ms)
is "$(grep -c '^200 ' "$T/other")" 200 "another client: 200 of 200 answered while 1,000 are held"
slow=$(awk '$2 > 0.5' "$T/other" | wc -l)
is "$slow" 0 "another client: none of its answers waited for the held ones"
# requests with a body meanwhile (libfcgi's lingering close after them)
posts=""
for i in $(seq 1 10); do
	req -X POST -d "field=$i" "$url"
	posts="$posts$STATUS "
done
is "$posts" "405 405 405 405 405 405 405 405 405 405 " \
    "requests with a body are answered while 1,000 are held"
still=$(find "/proc/$pid/fd" -mindepth 1 2>/dev/null | wc -l)
diag "another client: 200 requests in $((t2 - t1)) ms while about $still descriptors were open ($((t1 - t0)) ms after the held ones were sent)"
wait "${cpids[@]}"
cat "$T"/park2.? >"$T/park2"
is "$(grep -c '^404 ' "$T/park2")" 1000 "the 1,000 held answers all came, admitted"
# each one's turn is 10 s after its client's first request, less the time
# since: every one was held, and none left before what it says it waited
is "$(awk 'NF < 3 || $3 <= 0' "$T/park2" | wc -l)" 0 "each held answer says X-Rlgate-Delay"
early=$(awk '$2 + 0.05 < $3' "$T/park2" | wc -l)
is "$early" 0 "none left before its turn"

# ---- 3. the park's bound -----------------------------------------------------

conf bound 3
stop_rlgate_fcgi main
start_rlgate_fcgi bound "$sock" "$T/bound.conf" 1 --threads 1
burst_at_once 20 "$base/api/smooth/0"
is "$(count 404) $(count 429)" "4 16" \
    "max_parked = 3: one at once and three held, the rest refused"
slow_refusal=$(awk '$1 == 429 && $2 > 1000' "$T/burst" | wc -l)
is "$slow_refusal" 0 "max_parked: the refusals are not held"
grep -q 'event=park_full max_parked=3' "$T/bound.log"
ok $? "max_parked: the refusal is logged (event=park_full)"
req "$base/rlgate/metrics"
like "$BODY" 'rlgate_park_full_total [1-9]' "max_parked: counted in rlgate_park_full_total"
like "$BODY" 'rlgate_held_total [1-9]' "held answers: counted in rlgate_held_total"
sleep 2.2
# nothing was charged for the refused: a fresh bucket of 10 after 2 s
burst_at_once 20 "$base/api/smooth/0"
is "$(count 404)" 4 "max_parked: the refused took no turn"

# ---- 4. SIGTERM with held answers ----------------------------------------------

conf term
stop_rlgate_fcgi bound
start_rlgate_fcgi term "$sock" "$T/term.conf" 1 --threads 2
t0=$(now_ms)
for i in $(seq 1 10); do
	printf 'url = "%s/api/smooth/0"\noutput = /dev/null\n' "$base"
done >"$T/term.cfg"
curl -sS -Z --parallel-immediate --parallel-max 10 -m 20 -K "$T/term.cfg" \
    -w '%{http_code} %{time_total}\n' >"$T/term.out" 2>/dev/null &
cpid=$!
sleep 0.5
term_and_wait 5000 "${RLGATE_PIDS[@]}"
ok $? "SIGTERM: rlgate exits with held answers"
wait "$cpid"
t1=$(now_ms)
is "$(grep -c '^404 ' "$T/term.out")" 10 "SIGTERM: every held request is answered, admitted"
ok "$([ $((t1 - t0)) -lt 1500 ] && echo 0 || echo 1)" \
    "SIGTERM: answered at the stop, not at their turns ($((t1 - t0)) ms)"
like "$(cat "$T/term.log")" 'stopping: [0-9]+ held answers? given before' \
    "SIGTERM: the log says how many left before their turn"

done_testing
