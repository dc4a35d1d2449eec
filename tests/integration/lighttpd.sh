#!/usr/bin/env bash
# lighttpd.sh: rlgate behind lighttpd 1.4 (mod_fastcgi) and spawn-fcgi, with
# the shipped www/lighttpd/demo.conf and www/lighttpd/rlgate.conf: the
# 200 -> 429 sequence with every header, the window reset, distinct clients,
# 404/405/HEAD, and exact counting under concurrency (4 processes x 4
# threads sharing one database).
: "${RLGATE_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/integration/lib.sh
. "$RLGATE_SRCDIR/tests/integration/lib.sh" || { echo "Bail out! cannot read lib.sh"; exit 99; }

setup_test lighttpd spawn-fcgi sqlite3 curl
timing_sensitive

make_rundir

LIMIT=5
WINDOW=2
conf_a="$T/a.conf"
write_rlgate_conf "$conf_a" "$run/a.db" $LIMIT $WINDOW
start_rlgate_fcgi rlgate-a "$sock" "$conf_a" 1

demo_lighttpd

# --- the demo's pages: "/" leads to rlgate's status page; the seed's
# explanation is static, from www/demo
req "$base/"
like "$STATUS" '^30[12]$' "the demo's / redirects"
like "$(header Location)" '/rlgate/$' "... to the status page"
req "$base/rlgate/"
is "$STATUS" 200 "the status page is served"
like "$(header Content-Type)" '^text/html' "the status page is HTML"
like "$(header Content-Security-Policy)" "default-src 'none'" "... with a CSP that allows nothing by default"
req "$base/about.html"
is "$STATUS" 200 "the seed's page is served"
like "$BODY" 'rlgate' "the seed's page is rlgate's"

# --- 200 x LIMIT, then 429: every header, exact bodies. The requests of
# one window are sent first and checked afterwards.
# shellcheck disable=SC2317  # called through in_one_window
first_window() {
	# query strings are ignored for routing, and counted
	keep_many 127.0.0.1 r1 "$url" r2 "$url" r3 "$url?x=1" r4 "$url?page=2&sort=desc" \
	    r5 "$url" r6 "$url" r7 "$url?x=2"
}
in_one_window $WINDOW first_window
ok $? "the first $((LIMIT + 2)) requests fit in one $WINDOW s window"
check_first_window $LIMIT $WINDOW strict

# --- HEAD (its own client): headers, counted
hreq --interface 127.0.0.8 "$url"
is "$STATUS" 200 "HEAD: 200"
is "$(header RateLimit-Limit)" $LIMIT "HEAD: RateLimit-Limit"
is "$(header RateLimit-Remaining)" $((LIMIT - 1)) "HEAD: RateLimit-Remaining $((LIMIT - 1))"
is "$(header Content-Type)" application/json "HEAD: Content-Type: application/json"

# --- 404 and 405, as JSON (their own clients)
check_404_405
req --interface 127.0.0.11 -X DELETE "$url"
is "$STATUS" 405 "DELETE: 405"

# --- the window resets; distinct clients each get their own quota
# shellcheck disable=SC2317  # called through in_one_window
second_window() {
	local c i
	local -a names
	keep_many 127.0.0.1 reset "$url"
	for c in 127.0.0.2 127.0.0.3; do
		names=()
		for i in $(seq 1 $((LIMIT + 1))); do
			names+=("$c-$i")
		done
		keep_burst "$c" "${names[@]}"
	done
	keep_many 127.0.0.1 again "$url"
}
in_one_window $WINDOW second_window
ok $? "the next $((2 * LIMIT + 4)) requests fit in one $WINDOW s window"
recall reset
is "$STATUS" 200 "after the window: 200 again"
is "$(header RateLimit-Remaining)" $((LIMIT - 1)) "after the window: RateLimit-Remaining $((LIMIT - 1))"
for c in 127.0.0.2 127.0.0.3; do
	is "$(codes $(seq -f "$c-%g" 1 $((LIMIT + 1))))" "200:4 200:3 200:2 200:1 200:0 429:0" \
	    "client $c gets its own $LIMIT"
done
recall again
is "$(header RateLimit-Remaining)" $((LIMIT - 2)) "127.0.0.1's quota is untouched by the others"

# the database: one row per (policy, client)
is "$(sql_flushed "$conf_a" "$run/a.db" "SELECT count(*) FROM rlg_state WHERE client IN ('127.0.0.2', '127.0.0.3')")" 2 \
    "rlg_state has one row per client"

stop_rlgate_fcgi rlgate-a

# --- [response] status = 503 (nginx's limit_req_status default): the
# refusal's code changes, its Retry-After, headers and body stay
conf_s="$T/s.conf"
write_rlgate_conf "$conf_s" "$run/s.db" 2 $WINDOW
printf '\n[response]\nstatus = 503\n' >>"$conf_s"
start_rlgate_fcgi rlgate-s "$sock" "$conf_s" 1
ensure_window_room $WINDOW 5
req --interface 127.0.0.6 "$url"
req --interface 127.0.0.6 "$url"
is "$STATUS:$(header RateLimit-Remaining)" "200:0" "status = 503: the 2nd request is admitted, 0 left"
req --interface 127.0.0.6 "$url"
is "$STATUS" 503 "status = 503: the 3rd is refused with 503"
between "$(header Retry-After)" 1 $WINDOW "status = 503: with Retry-After"
is "$(header RateLimit-Remaining)" 0 "status = 503: RateLimit-Remaining 0"
is "$(header Content-Type)" application/json "status = 503: Content-Type: application/json"
is "$BODY" '{"error":{"code":503,"message":"Too Many Requests. Rate limit exceeded."}}' \
    "status = 503: the seed's body, with code 503"
req "$base/rlgate/metrics"
like "$BODY" 'rlgate_responses_total\{code="503"\} 1' "status = 503: counted as a 503 in the metrics"
like "$BODY" 'rlgate_requests_total\{policy="default",decision="rejected"\} 1' \
    "status = 503: and as a rejection"
stop_rlgate_fcgi rlgate-s

# --- exact counting under concurrency: 4 processes x 4 threads, one db
CLIMIT=50
CWINDOW=3600
conf_b="$T/b.conf"
write_rlgate_conf "$conf_b" "$run/b.db" $CLIMIT $CWINDOW closed 5000
start_rlgate_fcgi rlgate-b "$sock" "$conf_b" 4 --threads 4

ensure_window_room $CWINDOW 30
mkdir -p "$T/par1" "$T/par2"
# client 127.0.0.1: 400 requests over 32 connections; client 127.0.0.4: 200
# requests over 16 more connections, at the same time
curl -sS --no-progress-meter --max-time 30 --parallel --parallel-max 16 --interface 127.0.0.4 \
    -o "$T/par2/#1" -w '%{http_code}\n' "$url?n=[1-200]" \
    >"$T/codes2" 2>"$T/curl2.err" &
bg=$!
curl -sS --no-progress-meter --max-time 30 --parallel --parallel-max 32 \
    -o "$T/par1/#1" -w '%{http_code}\n' "$url?n=[1-400]" \
    >"$T/codes1" 2>"$T/curl1.err"
wait $bg

count_codes() { grep -c "^$2\$" "$1"; }
n200=$(count_codes "$T/codes1" 200)
n429=$(count_codes "$T/codes1" 429)
ntotal=$(wc -l <"$T/codes1")
is "$ntotal" 400 "concurrency: 400 answers for client 1"
is "$n200" $CLIMIT "concurrency: exactly $CLIMIT of 400 admitted (200)"
is "$n429" $((400 - CLIMIT)) "concurrency: all $((400 - CLIMIT)) others rejected (429)"
others=$(grep -vE '^(200|429)$' "$T/codes1" | sort | uniq -c | tr '\n' ' ')
is "$others" "" "concurrency: no other status"
[ -s "$T/curl1.err" ] && diag "curl: $(head -5 "$T/curl1.err")"

n200=$(count_codes "$T/codes2" 200)
n429=$(count_codes "$T/codes2" 429)
is "$n200:$n429" "$CLIMIT:$((200 - CLIMIT))" "concurrency: a second client at the same time: exactly $CLIMIT of 200 admitted"

flush_table "$conf_b"
is "$(sql "$run/b.db" "SELECT count FROM rlg_state WHERE client = '127.0.0.1'")" $CLIMIT \
    "concurrency: the database holds count $CLIMIT for client 1"
is "$(sql "$run/b.db" "SELECT count FROM rlg_state WHERE client = '127.0.0.4'")" $CLIMIT \
    "concurrency: the database holds count $CLIMIT for client 2"
is "$(sql "$run/b.db" "SELECT count(*) FROM rlg_state")" 2 \
    "concurrency: one row per client, not per request"
clients=$(sql "$run/b.db" "SELECT count(*) FROM clients")
ok $? "the operators' view 'clients' can be queried"
between "$clients" 1 2 "the 'clients' view lists the active clients"

rlgate_pids_alive rlgate-b
ok $? "every rlgate process survived the burst"

# --- SIGTERM stops every rlgate process promptly (spawn-fcgi deployments
# and service managers stop it that way)
# shellcheck disable=SC2046
term_and_wait 3000 $(cat "$T/rlgate-b.pid")
ok $? "SIGTERM stops all 4 idle rlgate processes within 3 s"

done_testing
