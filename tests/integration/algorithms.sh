#!/usr/bin/env bash
# algorithms.sh: the four algorithms, several policies per request and the
# header styles, over HTTP: one lighttpd (the shipped www/lighttpd/demo.conf)
# in front of spawn-fcgi + rlgate; only rlgate is restarted, with a new
# config and a fresh database file, on the same socket between runs.
#
#   1. each algorithm in real time (2 s windows): fixed_window (3, then 429,
#      then a new window), sliding_window (the previous window still weighs
#      ~95% just after a boundary), token_bucket (burst 2, one token per
#      500 ms), sliding_log (exact: a request is admitted again once the
#      first has slid out; rlg_log never holds more than the limit);
#   2. exact counting under concurrency for every algorithm: 4 processes x
#      4 threads, 200 requests over 32 connections, exactly 50 admitted, and
#      the database agrees; with the default commit (auto: the decision
#      table, but each for sliding_log) and again with commit = each;
#   3. two policies on one request (token_bucket + fixed_window): all or
#      nothing, the rejecting policy is the one reported;
#   4. the header styles ietf, x-ratelimit, all, none, and errors = problem.
#
# Timing-sensitive runs send their requests first (keep) and check them
# afterwards (recall). A run whose requests took longer than the algorithm
# allows for a deterministic answer (a loaded machine) is repeated, with a
# fresh client address: the checks are never loosened.
: "${RLGATE_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/integration/lib.sh
. "$RLGATE_SRCDIR/tests/integration/lib.sh" || { echo "Bail out! cannot read lib.sh"; exit 99; }

setup_test lighttpd spawn-fcgi sqlite3 curl
timing_sensitive

make_rundir

# conf NAME STYLE ERRORS: writes $T/NAME.conf, whose database is the fresh
# file $run/NAME.db, with the [policy] sections read from stdin.
conf() {
	{
		cat <<EOF
; written by $(basename "$0")
[store]
path = $run/$1.db
busy_timeout_ms = 5000
on_error = closed

[headers]
style = $2

[response]
errors = $3

EOF
		cat
	} >"$T/$1.conf"
}

# use_rlgate NAME NPROC [RLGATE_ARGS...]: stops the running rlgate and starts
# NAME ($T/NAME.conf) on the same socket; DB is its database.
# Once lighttpd runs, one request from 127.0.0.250 (a client no check looks
# at) makes sure the new rlgate answers through it before a timed run.
CUR=
use_rlgate() {
	local name=$1 n=$2
	shift 2
	[ -n "$CUR" ] && stop_rlgate_fcgi "$CUR"
	start_rlgate_fcgi "$name" "$sock" "$T/$name.conf" "$n" "$@"
	CUR=$name
	DB="$run/$name.db"
	if [ -n "${LIGHTTPD_PID:-}" ]; then
		req --interface 127.0.0.250 "$url"
		[ "$STATUS" = 200 ] ||
			bail_out "rlgate $name does not answer through lighttpd: $STATUS $(tail -3 "$T/$name.log")"
	fi
}

# sleep_until MS: sleeps until the wall clock reads MS (ms since the epoch).
sleep_until() {
	sleep_ms $(($1 - $(now_ms)))
}

# attempts FN [N]: runs FN 1, FN 2, ... FN N (default 3; at most 9: each try
# has its own client address in a block of 10) until one returns 0. FN sends the
# requests of one timing-sensitive run (from its own client address per
# try) and fails, setting WHY, if they were too slow for a deterministic
# answer; the run is then repeated from scratch.
attempts() {
	local fn=$1 try
	for try in $(seq 1 "${2:-3}"); do
		WHY=
		"$fn" "$try" && return 0
		diag "$fn: too slow on try $try ($WHY); again with a fresh client"
	done
	return 1
}

# keep_three CLIENT N1 N2 N3: N1 kept alone, then N2 and N3 in one burst,
# all from CLIENT; T_SENT and T_BACK: the clock before N1 went out and
# after its answer came back (ms).
# shellcheck disable=SC2317  # called by the *_try functions, through attempts
keep_three() {
	T_SENT=$(now_ms)
	keep "$2" --interface "$1" "$url"
	T_BACK=$(now_ms)
	keep_burst "$1" "$3" "$4"
}

# in_time DEADLINE WHY: true while the clock (ms since the epoch) is still
# before DEADLINE; otherwise sets WHY and fails.
# shellcheck disable=SC2317  # called by the *_try functions, through attempts
in_time() {
	[ "$(now_ms)" -lt "$1" ] && return 0
	WHY=$2
	return 1
}

# client_sql QUERY: QUERY on $DB with :c bound to the client $CL, once
# the decision table (commit = behind, the default; not for sliding_log,
# where auto gives each and there is no table) is flushed to it.
client_sql() {
	local q="'$CL'"
	[ -e "$DB-table" ] && flush_table "$T/$CUR.conf"
	sql "$DB" "${1//:c/$q}"
}

demo_lighttpd_conf

# ============================================================================
# 1. each algorithm in real time

# --- fixed_window, 3 per 2 s
conf fixed draft03 json <<'EOF'
[policy fw]
algorithm = fixed_window
limit = 3
window = 2
EOF
use_rlgate fixed 1 --threads 2
start_lighttpd "$T/lighttpd.conf" "$PORT"
req --interface 127.0.0.250 "$url"
[ "$STATUS" = 200 ] || bail_out "rlgate does not answer through lighttpd: $STATUS"

# shellcheck disable=SC2317  # called through in_one_window
fw_run() {
	keep_burst 127.0.0.1 fw1 fw2 fw3 fw4
}
in_one_window 2 fw_run
ok $? "fixed_window: 4 requests fit in one 2 s window"
is "$(codes fw1 fw2 fw3 fw4)" "200:2 200:1 200:0 429:0" \
    "fixed_window: 3 x 200 (Remaining 2, 1, 0), then 429"
recall fw1
is "$(header RateLimit-Limit)" 3 "fixed_window: RateLimit-Limit 3"
recall fw4
between "$(header Retry-After)" 1 2 "fixed_window: 429 with Retry-After in 1..2 (the window's end)"
is "$(header RateLimit-Reset)" "$(header Retry-After)" "fixed_window: 429: RateLimit-Reset = Retry-After"
is "$BODY" "$BODY_429" "fixed_window: 429: the seed's JSON body"
wait_for_window_start 2
keep fw5 "$url"
is "$(codes fw5)" "200:2" "fixed_window: the next window admits again (Remaining 2)"
CL=127.0.0.1
is "$(client_sql "SELECT count, window_start_ms % 2000, prev_count, tat_us FROM rlg_state WHERE policy = 'fw' AND client = :c")" \
    "1|0|0|0" "fixed_window: rlg_state: count 1 in an aligned window, one row"

# --- sliding_window, 4 per 2 s
conf sliding draft03 json <<'EOF'
[policy sw]
algorithm = sliding_window
limit = 4
window = 2
EOF
use_rlgate sliding 1 --threads 2

# sw_try TRY: 5 requests in one window (4 admitted, then 429), then 2 right
# after the next window starts: with the previous window's 4 weighing
# 4 * (2000 - e) / 2000, the formula admits one while e (ms into the window)
# is in 1..500, and a second one only past e = 500 (a fixed window would
# admit 4 here). The try fails if these requests left 1..500.
# shellcheck disable=SC2317  # called through attempts
sw_try() {
	local w0 t0 t1 b
	CL=127.0.0.$((20 + $1))
	wait_for_window_start 2 50
	w0=$(($(now_ms) / 2000))
	keep_burst "$CL" sw1 sw2 sw3 sw4 sw5
	if [ $(($(now_ms) / 2000)) != "$w0" ]; then
		WHY="the first 5 requests crossed a window boundary"
		return 1
	fi
	b=$(((w0 + 1) * 2000))
	sleep_until $((b + 100))
	t0=$(now_ms)
	keep_burst "$CL" sw6 sw7
	t1=$(now_ms)
	SW_E="$((t0 - b))..$((t1 - b))"
	if [ $((t0 - b)) -lt 1 ] || [ $((t1 - b)) -gt 500 ]; then
		WHY="the next 2 were sent $SW_E ms into the window, not within 1..500"
		return 1
	fi
	SW_STATE=$(client_sql "SELECT prev_count, count FROM rlg_state WHERE policy = 'sw' AND client = :c")
	# 700 ms in, the previous window weighs 4 * 1300 / 2000 = 2.6: one more fits
	sleep_until $((b + 700))
	keep sw8 --interface "$CL" "$url"
	return 0
}
attempts sw_try 9
ok $? "sliding_window: the runs fit their timing"
is "$(codes sw1 sw2 sw3 sw4 sw5)" "200:3 200:2 200:1 200:0 429:0" \
    "sliding_window: 4 x 200 (Remaining 3..0), then 429"
recall sw1
is "$(header RateLimit-Limit)" 4 "sliding_window: RateLimit-Limit 4"
recall sw5
between "$(header Retry-After)" 1 2 "sliding_window: the 5th: 429 with Retry-After >= 1 (at most the window)"
diag "sliding_window: the requests after the boundary were sent $SW_E ms into the window"
is "$(codes sw6 sw7)" "200:0 429:0" \
    "sliding_window: just after the boundary only 1 more is admitted (the previous 4 weigh ~95%)"
recall sw7
is "$(header Retry-After)" 1 "sliding_window: that 429 says Retry-After 1 (the weight drops below 3 at 500 ms)"
is "$SW_STATE" "4|1" "sliding_window: rlg_state: prev_count 4, count 1"
recall sw8
is "$STATUS" 200 "sliding_window: 700 ms into the window a second one is admitted"

# --- token_bucket, 4 per 2 s (one token per 500 ms), burst 2
conf bucket draft03 json <<'EOF'
[policy tb]
algorithm = token_bucket
limit = 4
window = 2
burst = 2
EOF
use_rlgate bucket 1 --threads 2

# tb_try TRY: 3 requests within 500 ms of the first (2 admitted, then 429),
# then 2 more at least 520 ms after the first returned (one token back)
# and within 1000 ms of its start (no second token yet).
# shellcheck disable=SC2317  # called through attempts
tb_try() {
	CL=127.0.0.$((30 + $1))
	keep_three "$CL" tb1 tb2 tb3
	TB_T0=$T_SENT
	TB_A1=$T_BACK
	in_time $((TB_T0 + 500)) "3 requests took 500 ms or more" || return 1
	sleep_until $((TB_A1 + 520))
	keep_burst "$CL" tb4 tb5
	in_time $((TB_T0 + 1000)) "the 5th returned 1000 ms or more after the 1st was sent"
}
attempts tb_try 9
ok $? "token_bucket: the runs fit their timing"
is "$(codes tb1 tb2 tb3)" "200:1 200:0 429:0" \
    "token_bucket: a full bucket: 2 x 200 (Remaining 1, 0), then 429"
recall tb1
is "$(header RateLimit-Limit)" 4 "token_bucket: RateLimit-Limit 4"
recall tb3
is "$(header Retry-After)" 1 "token_bucket: 429 with Retry-After 1 (the next token within 500 ms)"
is "$(codes tb4 tb5)" "200:0 429:0" "token_bucket: ~600 ms later one token is back: 200, then 429"
recall tb5
is "$(header Retry-After)" 1 "token_bucket: that 429 says Retry-After 1 too"
# the first request at s1 in [TB_T0, TB_A1]: 3 admitted leave tat = s1 + 1500 ms
tat=$(client_sql "SELECT tat_us / 1000, count, window_start_ms FROM rlg_state WHERE policy = 'tb' AND client = :c")
tat_off=$((${tat%%|*} - 1500))
between "$tat_off" "$TB_T0" "$TB_A1" "token_bucket: rlg_state: tat = first request + 3 x 500 ms (the 429s took nothing)"
is "${tat#*|}" "0|0" "token_bucket: rlg_state: count and window_start unused (0)"

# --- sliding_log, 3 per 2 s
conf log draft03 json <<'EOF'
[policy sl]
algorithm = sliding_log
limit = 3
window = 2
EOF
use_rlgate log 1 --threads 2

# sl_try TRY: 3 requests 300 ms apart, a 4th at 900 ms (429); once the
# first has slid out (its timestamp + 2000 ms + 40), 2 more: the first is
# admitted, the second not while the second request is still in the
# window; once the third has slid out too, one more. The rows of rlg_log
# are counted after each step.
# shellcheck disable=SC2317  # called through attempts
sl_try() {
	local t0 t i
	CL=127.0.0.$((40 + $1))
	SL_ROWS=
	t0=$(now_ms)
	for i in 1 2 3 4; do
		sleep_until $((t0 + (i - 1) * 300))
		[ "$i" = 1 ] && SL_B1=$(now_ms)
		keep "sl$i" --interface "$CL" "$url"
		[ "$i" = 1 ] && SL_A1=$(now_ms)
		SL_ROWS="$SL_ROWS $(client_sql "SELECT count(*) FROM rlg_log WHERE client = :c")"
	done
	t=$(now_ms)
	SL_TS=$(client_sql "SELECT ts_ms FROM rlg_log WHERE client = :c ORDER BY ts_ms")
	SL_STATE4=$(client_sql "SELECT count, window_start_ms FROM rlg_state WHERE client = :c")
	read -r SL_TS1 SL_TS2 SL_TS3 <<<"$(echo "$SL_TS" | tr '\n' ' ')"
	if [ -z "$SL_TS3" ] || [ "$t" -ge $((SL_TS1 + 2000)) ]; then
		WHY="the first 4 requests took until $((t - t0)) ms"
		return 1
	fi
	sleep_until $((SL_TS1 + 2040))
	keep_burst "$CL" sl5 sl6
	in_time $((SL_TS2 + 2001)) "the 6th returned after the 2nd had slid out too" || return 1
	SL_ROWS="$SL_ROWS $(client_sql "SELECT count(*) FROM rlg_log WHERE client = :c")"
	SL_MIN5=$(client_sql "SELECT min(ts_ms) FROM rlg_log WHERE client = :c")
	SL_MAX5=$(client_sql "SELECT max(ts_ms) FROM rlg_log WHERE client = :c")
	sleep_until $((SL_TS3 + 2040))
	keep sl7 --interface "$CL" "$url"
	in_time $((SL_MAX5 + 2000)) "the 7th returned after the 5th had slid out too" || return 1
	SL_ROWS="$SL_ROWS $(client_sql "SELECT count(*) FROM rlg_log WHERE client = :c")"
	SL_LOG7=$(client_sql "SELECT count(*), min(ts_ms) > $SL_TS3 FROM rlg_log WHERE client = :c")
	SL_STATE7=$(client_sql "SELECT count FROM rlg_state WHERE client = :c")
	return 0
}
attempts sl_try 9
ok $? "sliding_log: the runs fit their timing"
is "$(codes sl1 sl2 sl3 sl4)" "200:2 200:1 200:0 429:0" \
    "sliding_log: 3 x 200 ~300 ms apart (Remaining 2, 1, 0), then 429"
recall sl1
is "$(header RateLimit-Limit)" 3 "sliding_log: RateLimit-Limit 3"
recall sl4
between "$(header Retry-After)" 1 2 "sliding_log: 429 with Retry-After <= 2 (when the first slides out)"
is "$(header RateLimit-Reset)" "$(header Retry-After)" "sliding_log: 429: RateLimit-Reset = Retry-After"
between "$SL_TS1" "$SL_B1" "$SL_A1" "sliding_log: rlg_log holds the time of the first request"
is "$SL_STATE4" "3|$SL_TS1" "sliding_log: rlg_state: count 3, window_start = the oldest logged request"
is "$(codes sl5 sl6)" "200:0 429:0" "sliding_log: once the first slid out, exactly one more is admitted"
recall sl6
is "$(header Retry-After)" 1 "sliding_log: that 429 says Retry-After 1 (the 2nd leaves within 300 ms)"
is "$SL_MIN5" "$SL_TS2" "sliding_log: the first request's row was pruned as it slid out"
recall sl7
is "$STATUS:$(header RateLimit-Remaining)" "200:1" \
    "sliding_log: once the 3rd slid out too, admitted with Remaining 1"
is "$SL_LOG7" "2|1" "sliding_log: rlg_log then holds 2 rows, the slid-out ones pruned"
is "$SL_STATE7" 2 "sliding_log: rlg_state count 2"
is "${SL_ROWS# }" "1 2 3 3 3 2" "sliding_log: rlg_log rows after each step: never more than 3"

# ============================================================================
# 2. exact counting under concurrency, for every algorithm: 4 processes x
# 4 threads on one database, 200 requests from one client on 32 connections;
# with commit = auto (the table; each for sliding_log, which the table does
# not keep) and with commit = each (one transaction per decision)
CLIMIT=50
CWINDOW=3600
NREQ=200
for run_commit in auto each; do
for alg in fixed_window sliding_window token_bucket sliding_log; do
	# sliding_log is each with auto already
	[ $run_commit = each ] && [ $alg = sliding_log ] && continue
	lab="$alg, commit = $run_commit"
	extra=
	[ $alg = token_bucket ] && extra="burst = $CLIMIT"
	conf "c-$alg-$run_commit" draft03 json <<EOF
[policy $alg]
algorithm = $alg
limit = $CLIMIT
window = $CWINDOW
$extra

[store]
commit = $run_commit
EOF
	use_rlgate "c-$alg-$run_commit" 4 --threads 4
	if [ $run_commit = auto ] && [ $alg != sliding_log ]; then
		[ -f "$DB-table" ]
		ok $? "$lab: decided in the table beside the database"
	else
		[ -e "$DB-table" ]
		ok $((! $?)) "$lab: no table, a commit per decision"
	fi
	# a run that crosses an hour boundary (fixed and sliding windows count
	# by aligned hour) is repeated from a fresh client
	for try in 1 2 3; do
		CL=127.0.0.$((50 + try))
		rm -rf "$T/par"
		mkdir -p "$T/par"
		t0=$(now_ms)
		curl -sS --no-progress-meter --max-time 30 --parallel --parallel-max 32 \
		    --interface "$CL" -o "$T/par/#1" -w '%{http_code}\n' "$url?n=[1-$NREQ]" \
		    >"$T/codes.$alg" 2>"$T/curl.$alg.err"
		t1=$(now_ms)
		[ $((t0 / (CWINDOW * 1000))) = $((t1 / (CWINDOW * 1000))) ] && break
		diag "$alg: the burst crossed an hour boundary (try $try); again with a fresh client"
	done
	[ -s "$T/curl.$alg.err" ] && diag "curl: $(head -5 "$T/curl.$alg.err")"
	diag "$lab: $NREQ requests in $((t1 - t0)) ms"
	n200=$(grep -c '^200$' "$T/codes.$alg")
	n429=$(grep -c '^429$' "$T/codes.$alg")
	others=$(grep -vE '^(200|429)$' "$T/codes.$alg" | sort | uniq -c | tr -s ' \n' '  ')
	is "$n200:$n429" "$CLIMIT:$((NREQ - CLIMIT))" \
	    "$lab, concurrency: exactly $CLIMIT x 200 and $((NREQ - CLIMIT)) x 429"
	is "$(wc -l <"$T/codes.$alg" | tr -d ' ')|${others% }" "$NREQ|" \
	    "$lab, concurrency: $NREQ answers, no other status"
	case $alg in
	fixed_window | sliding_window)
		is "$(client_sql "SELECT count, prev_count FROM rlg_state WHERE client = :c")" "$CLIMIT|0" \
		    "$lab, concurrency: rlg_state count $CLIMIT"
		;;
	token_bucket)
		# 50 admitted from a full bucket: tat = first request + 50 x 72 s
		tat=$(client_sql "SELECT tat_us / 1000 FROM rlg_state WHERE client = :c")
		between "$((tat - CWINDOW * 1000))" "$t0" "$t1" \
		    "$lab, concurrency: rlg_state tat = first request + $CLIMIT emission intervals"
		;;
	sliding_log)
		is "$(client_sql "SELECT count(*) FROM rlg_log WHERE client = :c")|$(client_sql "SELECT count FROM rlg_state WHERE client = :c")" \
		    "$CLIMIT|$CLIMIT" "$lab, concurrency: $CLIMIT rlg_log rows, rlg_state count $CLIMIT"
		;;
	esac
	rlgate_pids_alive "c-$alg-$run_commit"
	ok $? "$lab, concurrency: every rlgate process survived"
done
done

# ============================================================================
# 3. two policies on one request: admitted only if both admit; a rejected
# request advances neither
conf multi draft03 json <<'EOF'
[policy fast]
algorithm = token_bucket
limit = 2
window = 1
burst = 2

[policy slow]
algorithm = fixed_window
limit = 5
window = 3600
EOF
use_rlgate multi 1 --threads 2
# slow counts by aligned hour: the run needs ~4 s of it
ensure_window_room 3600 10

# mp_try TRY: 3 requests within 500 ms of the first: fast (2 tokens, one
# per 500 ms) admits 2 and rejects the 3rd.
# shellcheck disable=SC2317  # called through attempts
mp_try() {
	CL=127.0.0.$((60 + $1))
	keep_three "$CL" m1 m2 m3
	MP_T0=$T_SENT
	MP_A1=$T_BACK
	in_time $((MP_T0 + 500)) "3 requests took 500 ms or more"
}
attempts mp_try 9
ok $? "two policies: 3 quick requests fit in 500 ms"
is "$(codes m1 m2 m3)" "200:1 200:0 429:0" "two policies: 200, 200, 429 (fast's burst of 2 used up)"
is "$(client_sql "SELECT policy, count FROM rlg_state WHERE client = :c ORDER BY policy")" \
    "fast|0"$'\n'"slow|2" "two policies: slow's count is 2 (the rejected request advanced no policy)"
tat=$(client_sql "SELECT tat_us / 1000 FROM rlg_state WHERE policy = 'fast' AND client = :c")
between "$((tat - 1000))" "$MP_T0" "$MP_A1" "two policies: fast's tat = first + 2 x 500 ms (the 429 took no token)"
recall m3
is "$(header RateLimit-Limit)|$(header RateLimit-Remaining)" "2|0" \
    "two policies: the 429 reports the rejecting policy, fast (RateLimit-Limit 2, Remaining 0)"
is "$(header Retry-After)" 1 "two policies: Retry-After 1 (fast's next token)"
is "$(header RateLimit-Reset)" "$(header Retry-After)" "two policies: RateLimit-Reset = Retry-After"

# fast refills (2 tokens after 1 s): slow's 5 are used up
sleep_until $((MP_A1 + 1050))
keep_burst "$CL" m4 m5
m4a=$(now_ms)
sleep_until $((m4a + 1050))
keep m6 --interface "$CL" "$url"
is "$(codes m4 m5 m6 | sed 's/:[0-9]*//g')" "200 200 200" "two policies: after refills, 3 more x 200"
recall m4
is "$(header RateLimit-Limit)|$(header RateLimit-Remaining)" "2|1" \
    "two policies: from a full bucket, fast has fewest left and is reported (Limit 2, Remaining 1)"
recall m6
is "$(header RateLimit-Limit)|$(header RateLimit-Remaining)" "5|0" \
    "two policies: slow's 5th: slow has fewest left and is reported (Limit 5, Remaining 0)"
# fast still has a token: only slow rejects now
tat_before=$(client_sql "SELECT tat_us FROM rlg_state WHERE policy = 'fast' AND client = :c")
h0=$(now_ms)
keep m7 --interface "$CL" "$url"
h1=$(now_ms)
tat_after=$(client_sql "SELECT tat_us FROM rlg_state WHERE policy = 'fast' AND client = :c")
recall m7
is "$STATUS" 429 "two policies: the 6th within the hour: 429 (slow's 5 used, fast has a token)"
is "$(header RateLimit-Limit)|$(header RateLimit-Remaining)" "5|0" \
    "two policies: it reports slow (RateLimit-Limit 5, Remaining 0)"
hour_end=$(((h0 / 3600000 + 1) * 3600000))
between "$(header Retry-After)" $(((hour_end - h1 + 999) / 1000)) $(((hour_end - h0 + 999) / 1000)) \
    "two policies: Retry-After = slow's reset, the end of the hour ($(header Retry-After) s)"
is "$(header RateLimit-Reset)" "$(header Retry-After)" "two policies: RateLimit-Reset = Retry-After"
is "$tat_after" "$tat_before" "two policies: the request slow rejected took no token from fast"
is "$(client_sql "SELECT count FROM rlg_state WHERE policy = 'slow' AND client = :c")" 5 \
    "two policies: slow's count stays 5"

# ============================================================================
# 4. header styles, two policies: fast (a token every 30 s, burst 2), slow
# (sliding_log, 5 per hour); three requests: 200, 200, 429 (fast)
RE_POLICY='^"([A-Za-z0-9_.-]+)";q=([0-9]+);w=([0-9]+)(;rlgate-burst=([0-9]+))?$'
RE_RL='^"([A-Za-z0-9_.-]+)";r=([0-9]+);t=([0-9]+)$'

# sf_list VALUE RE: the members of a structured-field List, each matched
# against RE, as "g1:g2:g3[:g5]" (captured groups), space-separated; a member
# that does not match appears as BAD<member>.
sf_list() {
	local IFS=, m out=
	local -a raw
	read -ra raw <<<"$1"
	for m in "${raw[@]}"; do
		m=${m#"${m%%[! ]*}"}
		m=${m%"${m##*[! ]}"}
		if [[ $m =~ $2 ]]; then
			out="$out ${BASH_REMATCH[1]}:${BASH_REMATCH[2]}:${BASH_REMATCH[3]}"
			[ -n "${BASH_REMATCH[5]:-}" ] && out="$out:${BASH_REMATCH[5]}"
		else
			out="$out BAD<$m>"
		fi
	done
	echo "${out# }"
}

# rl_headers: the names of the rate-limit headers of the last answer.
rl_headers() {
	tr -d '\r' <"$T/last.headers" | grep -iE '^(x-)?ratelimit[a-z-]*:' |
	    cut -d: -f1 | tr '\n' ' ' | sed 's/ $//'
}

# st_try TRY: 3 requests within 1 s (so fast's resets are exactly 30 and
# 60 s and Retry-After 30).
# shellcheck disable=SC2317  # called through attempts
st_try() {
	local t0
	CL=127.0.0.$((70 + $1))
	t0=$(now_ms)
	keep_burst "$CL" s1 s2 s3
	in_time $((t0 + 1000)) "3 requests took 1000 ms or more"
}

POLICY_EXPECTED="fast:2:60:2 slow:5:3600"
for style in ietf x-ratelimit all none problem; do
	if [ $style = problem ]; then
		conf "st-$style" draft03 problem <<<""
	else
		conf "st-$style" "$style" json <<<""
	fi
	cat >>"$T/st-$style.conf" <<'EOF'
[policy fast]
algorithm = token_bucket
limit = 2
window = 60
burst = 2

[policy slow]
algorithm = sliding_log
limit = 5
window = 3600
EOF
	use_rlgate "st-$style" 1 --threads 2
	attempts st_try 9
	ok $? "$style: 3 requests fit in 1 s"
	recall s1
	s1_hdrs=$(rl_headers)
	recall s3
	is "$STATUS" 429 "$style: the 3rd: 429 (fast rejects)"
	is "$(header Retry-After)" 30 "$style: 429 with Retry-After 30 (fast's next token)"
	ra=$(header Retry-After)
	s3_hdrs=$(rl_headers)
	case $style in
	ietf | all)
		[ $style = ietf ] && want="RateLimit-Policy RateLimit" ||
			want="RateLimit-Limit RateLimit-Remaining RateLimit-Reset RateLimit-Policy RateLimit X-RateLimit-Limit X-RateLimit-Remaining X-RateLimit-Reset"
		is "$s1_hdrs" "$want" "$style: 200: exactly the headers $want"
		is "$s3_hdrs" "$want" "$style: 429: the same headers"
		recall s1
		is "$(sf_list "$(header RateLimit-Policy)" "$RE_POLICY")" "$POLICY_EXPECTED" \
		    "$style: RateLimit-Policy parses: \"fast\";q=2;w=60;rlgate-burst=2, \"slow\";q=5;w=3600 in config order"
		is "$(sf_list "$(header RateLimit)" "$RE_RL")" "fast:1:30 slow:4:3600" \
		    "$style: 1st: RateLimit \"fast\";r=1;t=30, \"slow\";r=4;t=3600"
		# t (draft-11): until more quota, fast's next token in 30 s (its
		# whole burst is back in 60 s: RateLimit-Reset), slow's oldest
		# entry leaving the hour.
		recall s2
		is "$(sf_list "$(header RateLimit)" "$RE_RL")" "fast:0:30 slow:3:3600" \
		    "$style: 2nd: RateLimit \"fast\";r=0;t=30 (the next token, not the full 60 s), \"slow\";r=3;t=3600"
		recall s3
		is "$(sf_list "$(header RateLimit-Policy)" "$RE_POLICY")" "$POLICY_EXPECTED" \
		    "$style: 429: RateLimit-Policy lists both policies"
		is "$(sf_list "$(header RateLimit)" "$RE_RL")" "fast:0:$ra" \
		    "$style: 429: RateLimit lists only the rejecting policy, t = Retry-After"
		;;&
	all)
		recall s1
		is "$(header RateLimit-Limit) $(header RateLimit-Remaining) $(header RateLimit-Reset)" "2 1 30" \
		    "all: 200: RateLimit-Limit/-Remaining/-Reset of fast (fewest left): 2 1 30"
		is "$(header X-RateLimit-Limit) $(header X-RateLimit-Remaining) $(header X-RateLimit-Reset)" "2 1 30" \
		    "all: 200: X-RateLimit-* the same"
		recall s3
		is "$(header RateLimit-Limit) $(header RateLimit-Remaining) $(header RateLimit-Reset)" "2 0 $ra" \
		    "all: 429: RateLimit-Limit/-Remaining/-Reset of fast"
		is "$(header X-RateLimit-Limit) $(header X-RateLimit-Remaining) $(header X-RateLimit-Reset)" "2 0 $ra" \
		    "all: 429: X-RateLimit-* the same"
		;;
	x-ratelimit)
		want="X-RateLimit-Limit X-RateLimit-Remaining X-RateLimit-Reset"
		is "$s1_hdrs" "$want" "x-ratelimit: 200: X-RateLimit-* only"
		is "$s3_hdrs" "$want" "x-ratelimit: 429: X-RateLimit-* only"
		recall s1
		is "$(header X-RateLimit-Limit) $(header X-RateLimit-Remaining) $(header X-RateLimit-Reset)" "2 1 30" \
		    "x-ratelimit: 200: fast's (fewest left): 2 1 30"
		recall s2
		is "$(header X-RateLimit-Remaining)" 0 "x-ratelimit: 2nd: X-RateLimit-Remaining 0"
		recall s3
		is "$(header X-RateLimit-Limit) $(header X-RateLimit-Remaining) $(header X-RateLimit-Reset)" "2 0 $ra" \
		    "x-ratelimit: 429: fast's: 2 0, Reset = Retry-After"
		;;
	none)
		is "$s1_hdrs" "" "none: 200: no rate-limit header at all"
		recall s1
		has_header Retry-After
		ok $((! $?)) "none: 200: no Retry-After"
		is "$s3_hdrs" "" "none: 429: no rate-limit header either"
		is "$(codes s1 s2)" "200: 200:" "none: the first two: 200"
		;;
	problem)
		recall s1
		is "$(header Content-Type)" application/json "problem: 200: Content-Type application/json"
		like "$BODY" "$RE_BODY_200" "problem: 200: the success JSON body"
		is "$(header RateLimit-Limit) $(header RateLimit-Remaining)" "2 1" "problem: 200: draft03 headers"
		recall s3
		is "$(header Content-Type)" application/problem+json "problem: 429: Content-Type application/problem+json"
		like "$BODY" '^\{"type":"https://iana\.org/assignments/http-problem-types#quota-exceeded",' \
		    "problem: 429: type quota-exceeded"
		like "$BODY" '"title":"Quota Exceeded"' "problem: 429: title Quota Exceeded"
		like "$BODY" '"status":429[,}]' "problem: 429: status 429"
		like "$BODY" '"violated-policies":\["fast"\]\}$' "problem: 429: violated-policies [\"fast\"]"
		is "$(header Content-Length)" "${#BODY}" "problem: 429: Content-Length matches the body"
		is "$(header RateLimit-Limit) $(header RateLimit-Remaining)" "2 0" "problem: 429: draft03 headers of fast"
		;;
	esac
	if [ $style != problem ]; then
		recall s3
		is "$BODY" "$BODY_429" "$style: 429: the seed's JSON body"
	fi
	is "$(client_sql "SELECT count(*) FROM rlg_log WHERE client = :c")" 2 \
	    "$style: slow logged the 2 admitted requests only"
done

rlgate_pids_alive "$CUR"
ok $? "rlgate is still running"
stop_rlgate_fcgi "$CUR"

done_testing
