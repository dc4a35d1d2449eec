#!/usr/bin/env bash
# prometheus.sh: rlgate's metrics endpoint (GET /rlgate/metrics, the
# [admin] section's defaults) behind the real lighttpd (the shipped
# www/lighttpd/demo.conf + rlgate.conf, "/rlgate/" mounted beside "/api/"),
# 4 processes x 2 threads, scraped by a real Prometheus:
#   1. the exposition as rlgate serves it: Content-Type
#      "text/plain; version=0.0.4; charset=utf-8", `promtool check metrics`
#      silent and content, every family's TYPE, a consistent histogram
#      (buckets cumulative, le ascending, +Inf last and equal to _count),
#      and all four decision series of every policy present at 0 before
#      any request;
#   2. a known sequence of requests gives exact counts, summed over all
#      the processes and threads (the requests are spread over several
#      processes, and any process reports the same totals):
#        20 GETs of /api/v1/resources (route resources: api, trial,
#        partner), then 3 GETs of /api/v1/nothing-here and 1 POST of
#        /api/v1/resources (route rest: other):
#          api (enforced, 7 per hour)      admitted 7, rejected 13
#          trial (dry_run, 3 per hour)     admitted 3, dry_run_rejected 17
#          partner (127.0.0.1 exempt)      exempt 20
#          other (100 per hour)            admitted 4
#          responses: 200 x 7, 429 x 13, 404 x 3, 405 x 1
#      trial admits the first 3 (its count goes 1..3), would refuse the
#      4th to 7th (a dry_run refusal advances nothing), and still would
#      for the 8th to 20th, which api refuses (nothing is written then):
#      its count stays at 3 = its limit. partner's limit of 1 would refuse
#      all but the first, were 127.0.0.1 not exempt from it. Prometheus'
#      own scrapes are not among the responses (they are admin answers);
#   3. Prometheus (its own config, storage and port in the temporary
#      directory) scrapes it every second: up is 1, and the values it
#      stored after the load are exactly those above, as are the store
#      errors and rejection cache hits (0: the cache is off); the
#      histogram holds a sample of the 24 store steps; rlgate_build_info
#      (rlgate --version), rlgate_start_time_seconds (the start of this
#      run), rlgate_metrics_shared and rlgate_store_up (1);
#   4. for a client outside [admin] allow (127.0.0.2), /rlgate/metrics is
#      a path like any other: 404 (no route, no policy), counted among
#      the non-admin responses and by no policy.
# Skipped where Prometheus or promtool is not installed (scripts/deps.sh
# installs Debian's prometheus, which has both; PROMETHEUS_BIN and
# PROMTOOL_BIN name others).
# Every policy has a 3600 s fixed window: the load waits for a fresh hour
# only when it would start in the last minute of one.
: "${RLGATE_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/integration/lib.sh
. "$RLGATE_SRCDIR/tests/integration/lib.sh" || { echo "Bail out! cannot read lib.sh"; exit 99; }

PROMETHEUS_BIN=${PROMETHEUS_BIN:-$(command -v prometheus 2>/dev/null)}
PROMTOOL_BIN=${PROMTOOL_BIN:-$(command -v promtool 2>/dev/null)}
[ -x "$PROMETHEUS_BIN" ] ||
	skip_all "prometheus is not installed (Debian: apt-get install prometheus)"
[ -x "$PROMTOOL_BIN" ] ||
	skip_all "promtool is not installed (Debian: apt-get install prometheus)"

# ---- the exposition ---------------------------------------------------------

# The Content-Type of the Prometheus text format 0.0.4, exactly.
METRICS_TYPE='text/plain; version=0.0.4; charset=utf-8'

# The families and their TYPE (rlgate_clients may be absent).
FAMILIES='rlgate_requests_total counter
rlgate_responses_total counter
rlgate_admin_responses_total counter
rlgate_store_errors_total counter
rlgate_rejection_cache_hits_total counter
rlgate_decision_duration_seconds histogram
rlgate_build_info gauge
rlgate_start_time_seconds gauge'

# promtool_says FILE: promtool check metrics on FILE (stdin), its exit
# status and everything it printed, as "STATUS:OUTPUT" ("0:" when content).
promtool_says() {
	local rc
	"$PROMTOOL_BIN" check metrics <"$1" >"$1.promtool" 2>&1
	rc=$?
	printf '%s:%s' "$rc" "$(cat "$1.promtool")"
}

# expo_types FILE: "NAME TYPE" of each TYPE line, in file order.
expo_types() {
	awk '$1 == "#" && $2 == "TYPE" { print $3, $4 }' "$1"
}

# expo_missing_types FILE: the lines of FAMILIES that FILE lacks (its
# TYPE line missing or another type), and rlgate_clients of another type
# than gauge; nothing when all are right.
expo_missing_types() {
	local types
	types=$(expo_types "$1")
	printf '%s\n' "$FAMILIES" | while read -r n t; do
		printf '%s\n' "$types" | grep -qx "$n $t" || echo "$n $t"
	done
	printf '%s\n' "$types" | awk '$1 == "rlgate_clients" && $2 != "gauge"'
}

# hist_problems FILE NAME: what is wrong with histogram NAME in FILE (no
# buckets, le not ascending, counts not cumulative, no +Inf bucket or not
# last, +Inf != _count, no _sum); nothing when it is consistent.
hist_problems() {
	awk -v n="$2" '
		function le_of(s) {
			sub(/.*le="/, "", s); sub(/".*/, "", s)
			return s
		}
		index($0, n "_bucket{") == 1 {
			le = le_of($1)
			v = $NF + 0
			nb++
			if (inf) print "a bucket after +Inf: le=" le
			if (le == "+Inf") { inf = 1; infv = v }
			else if (nb > 1 && le + 0 <= prev) print "le not ascending: " le " after " prev
			if (nb > 1 && v < prevv) print "not cumulative: le=" le " " v " < " prevv
			if (le != "+Inf") prev = le + 0
			prevv = v
			next
		}
		$1 == n "_count" { cnt = $2; hascnt = 1 }
		$1 == n "_sum" { hassum = 1 }
		END {
			if (nb == 0) { print "no " n "_bucket"; exit }
			if (!inf) print "no le=\"+Inf\" bucket"
			if (!hascnt) print "no " n "_count"
			else if (inf && infv != cnt + 0) print "+Inf bucket " infv " != _count " cnt
			if (!hassum) print "no " n "_sum"
		}' "$1"
}

# expo_count FILE NAME [VALUE]: how many samples of NAME (with labels) FILE
# has, or of them how many equal VALUE.
expo_count() {
	awk -v n="$2" -v want="${3-}" '
		index($0, n "{") == 1 || $1 == n {
			if (want == "" || $NF + 0 == want + 0) c++
		}
		END { print c + 0 }' "$1"
}

# expo_codes FILE: "CODE VALUE" of each rlgate_responses_total sample
# above 0 (codes may be listed at 0 before they occur), sorted,
# space-separated.
expo_codes() {
	sed -nE 's/^rlgate_responses_total\{code="([^"]*)"\} ([^ ]+).*/\1 \2/p' "$1" |
	    awk '$2 + 0 != 0' | sort | tr '\n' ' ' | sed 's/ $//'
}

# fetch_metrics NAME: GET $metrics (req); the body kept in $T/NAME.prom.
fetch_metrics() {
	req "$metrics"
	cp "$T/last.body" "$T/$1.prom"
}

# expo_dups FILE: the series (name and labels, as written) that FILE has
# more than once: promtool and Prometheus let them pass.
expo_dups() {
	awk '$0 !~ /^#/ && NF > 0 { print $1 }' "$1" | sort | uniq -d
}

# check_exposition NAME WHEN: the last answer (fetch_metrics NAME): 200,
# the Content-Type, promtool, the TYPE lines, no series twice, the
# histogram.
check_exposition() {
	local f="$T/$1.prom"
	is "$STATUS" 200 "$2: GET /rlgate/metrics: 200"
	is "$(header Content-Type)" "$METRICS_TYPE" "$2: Content-Type: $METRICS_TYPE"
	is "$(promtool_says "$f")" "0:" "$2: promtool check metrics: no problem"
	is "$(expo_missing_types "$f")" "" "$2: every family has its TYPE line"
	is "$(expo_dups "$f")" "" "$2: no series twice"
	is "$(hist_problems "$f" rlgate_decision_duration_seconds)" "" \
	    "$2: rlgate_decision_duration_seconds is a consistent histogram"
}

# ---- Prometheus -------------------------------------------------------------

PROM=
PROM_PID=

# prom_start TARGET: a Prometheus on a free port of 127.0.0.1 (PROM, its
# base URL; PROM_PID, tracked), its config $T/prometheus.yml (job rlgate:
# TARGET's /rlgate/metrics every second), storage $T/prom, log
# $T/prometheus.log; waits (30 s at most) until it is ready.
prom_start() {
	local port
	port=$(free_port) || bail_out "no free port for Prometheus"
	PROM="http://127.0.0.1:$port"
	cat >"$T/prometheus.yml" <<EOF
# written by $(basename "$0")
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: rlgate
    metrics_path: /rlgate/metrics
    static_configs:
      - targets: ['$1']
EOF
	"$PROMTOOL_BIN" check config "$T/prometheus.yml" >"$T/prometheus.check" 2>&1 ||
		bail_out "promtool rejects prometheus.yml: $(tail -5 "$T/prometheus.check")"
	mkdir -p "$T/prom"
	"$PROMETHEUS_BIN" --config.file="$T/prometheus.yml" \
	    --storage.tsdb.path="$T/prom" \
	    --web.listen-address="127.0.0.1:$port" \
	    </dev/null >"$T/prometheus.log" 2>&1 &
	PROM_PID=$!
	track_pid "$PROM_PID"
	wait_until 30000 prom_ready
	pid_alive "$PROM_PID" ||
		bail_out "prometheus exited at start: $(tail -5 "$T/prometheus.log")"
	curl -fsS --max-time 2 -o /dev/null "$PROM/-/ready" 2>/dev/null ||
		bail_out "prometheus not ready within 30 s: $(tail -5 "$T/prometheus.log")"
}

# prom_ready: true once Prometheus answers /-/ready, or has exited (for
# wait_until).
# shellcheck disable=SC2317  # called through wait_until
prom_ready() {
	pid_alive "$PROM_PID" || return 0
	curl -fs --max-time 2 -o /dev/null "$PROM/-/ready"
}

# prom_query QUERY: the instant query's JSON answer in $T/prom.json; fails
# (with a diagnostic) unless Prometheus answered with status success.
prom_query() {
	if ! curl -sS --max-time 5 -G --data-urlencode "query=$1" \
	    "$PROM/api/v1/query" >"$T/prom.json" 2>"$T/prom.err"; then
		diag "query $1: $(cat "$T/prom.err")"
		return 1
	fi
	if [ "$(jq -r .status "$T/prom.json" 2>/dev/null)" != success ]; then
		diag "query $1: $(head -c 300 "$T/prom.json")"
		return 1
	fi
}

# prom_lines QUERY [LABEL...]: one line per series of the answer: the
# values of LABELs ("-" where missing) and the sample's value, sorted,
# joined with "|" (so a whole answer compares as one string).
prom_lines() {
	local q=$1
	shift
	prom_query "$q" || return 1
	jq -r --arg labels "$*" '
		($labels | split(" ") | map(select(. != ""))) as $l
		| .data.result[]
		| [(.metric as $m | $l[] | $m[.] // "-"), .value[1]]
		| join(" ")' "$T/prom.json" | sort | tr '\n' '|' | sed 's/|$//'
}

# prom_value QUERY: the value of a one-series answer (several: all, "|"
# between them; none: empty).
prom_value() {
	prom_lines "$1"
}

# prom_scrape_ms: the time of Prometheus' last scrape of job rlgate, in ms
# since the epoch (empty before the first).
# shellcheck disable=SC2317  # called through scraped_since
prom_scrape_ms() {
	prom_query 'timestamp(up{job="rlgate"})' 2>/dev/null || return 0
	jq -r '.data.result[0].value[1] // empty | tonumber * 1000 | floor' \
	    "$T/prom.json" 2>/dev/null
}

# scraped_since MS: true once Prometheus holds a scrape of job rlgate
# that started at MS or later (for wait_until).
# shellcheck disable=SC2317  # called through wait_until
scraped_since() {
	local t
	t=$(prom_scrape_ms)
	[ -n "$t" ] && [ "$t" -ge "$1" ]
}

# scraped_up: true once a scrape of job rlgate succeeded (up is 1).
# shellcheck disable=SC2317  # called through wait_until
scraped_up() {
	[ "$(prom_value 'up{job="rlgate"}' 2>/dev/null)" = 1 ]
}

# prom_target_error: Prometheus' last scrape error for job rlgate (empty:
# none), for diagnostics.
prom_target_error() {
	curl -sS --max-time 5 "$PROM/api/v1/targets" 2>/dev/null |
	    jq -r '.data.activeTargets[] | select(.labels.job == "rlgate") |
		"health=\(.health) lastError=\(.lastError)"' 2>/dev/null
}

# ---- the gateway ------------------------------------------------------------

setup_test lighttpd spawn-fcgi curl jq

WINDOW=3600
make_rundir
CACHE=0 write_store_conf m <<EOF
[log]
; every decision is logged with the pid of the process that made it
level = info

[policy api]
algorithm = fixed_window
limit = 7
window = $WINDOW

[policy trial]
algorithm = fixed_window
limit = 3
window = $WINDOW
mode = dry_run

[policy partner]
algorithm = fixed_window
limit = 1
window = $WINDOW
exempt = 127.0.0.1/32

[policy other]
algorithm = fixed_window
limit = 100
window = $WINDOW

[route resources]
path = /api/v1/resources
methods = GET
policies = api, trial, partner

[route rest]
path = /api/*
policies = other
EOF
check_conf m

version=$("$RLGATE_BIN" --version | awk '{ print $2 }')
t_start=$(($(now_ms) / 1000))
start_rlgate_fcgi rlgate "$sock" "$T/m.conf" 4 --threads 2
t_started=$((($(now_ms) + 999) / 1000))
demo_lighttpd "$sock"
metrics="$base/rlgate/metrics"

# --- the exposition before any request (part 1)
fetch_metrics before
check_exposition before "before any request"
f="$T/before.prom"
is "$(expo_count "$f" rlgate_requests_total)" 16 \
    "before any request: 16 rlgate_requests_total series (4 policies x 4 decisions)"
is "$(expo_count "$f" rlgate_requests_total 0)" 16 "before any request: all at 0"
missing=
for p in api trial partner other; do
	for d in admitted rejected dry_run_rejected exempt; do
		grep "^rlgate_requests_total{" "$f" | grep "policy=\"$p\"" |
		    grep -q "decision=\"$d\"" || missing="$missing $p/$d"
	done
done
is "${missing# }" "" "before any request: a series for every policy and decision"
is "$(grep -c "^rlgate_build_info{version=\"$version\"} 1\$" "$f")" 1 \
    "rlgate_build_info{version=\"$version\"} 1"

# --- Prometheus, scraping lighttpd's /rlgate/metrics
t0=$(now_ms)
prom_start "127.0.0.1:$PORT"
diag "$("$PROMETHEUS_BIN" --version 2>&1 | head -1)"
wait_until 30000 scraped_up
rc=$?
ok $rc "Prometheus scraped /rlgate/metrics: up 1 (within 30 s)"
[ $rc -eq 0 ] || diag "$(prom_target_error)"
is "$(prom_value 'sum(rlgate_requests_total)')" 0 "Prometheus: sum(rlgate_requests_total) 0 before any request"
diag "Prometheus ready and scraping in $(($(now_ms) - t0)) ms"

# --- the known sequence, in one hour: every window is 3600 s (part 2)
ensure_window_room "$WINDOW" 60
w0=$(($(now_ms) / (WINDOW * 1000)))
codes=$(for _ in $(seq 1 20); do
	curl -sS --max-time "$CURL_MAX_TIME" -o /dev/null -w '%{http_code} ' "$url"
done)
want=$(for i in $(seq 1 20); do
	if [ "$i" -le 7 ]; then printf '200 '; else printf '429 '; fi
done)
is "${codes% }" "${want% }" \
    "20 GETs of /api/v1/resources: 7 x 200 (api's limit), then 13 x 429"
for i in 1 2 3; do
	req "$base/api/v1/nothing-here"
	is "$STATUS" 404 "GET /api/v1/nothing-here ($i): 404 (route rest, policy other)"
done
req -X POST -d 'a=1' "$url"
is "$STATUS" 405 "POST /api/v1/resources: 405 (route rest, policy other)"
t_load=$(now_ms)
w1=$((t_load / (WINDOW * 1000)))
is "$w1" "$w0" "the requests were sent within one $WINDOW s window"

pids=$(grep -oE 'rlgate\[[0-9]+\]: event=(admit|reject|dry_run_reject) ' "$T/rlgate.log" |
    sed -E 's/^rlgate\[([0-9]+)\].*/\1/' | sort -u | wc -l)
between "$pids" 2 4 "the requests were decided by more than one of the 4 processes ($pids)"

# Every process sums over all of them: 8 fetches, spread over the
# processes, report the same counts.
fetch_metrics after
check_exposition after "after the requests"
grep -E '^rlgate_(requests|responses)_total[{ ]' "$T/after.prom" | sort >"$T/counts.1"
same=1
for i in 2 3 4 5 6 7 8; do
	fetch_metrics "again$i"
	grep -E '^rlgate_(requests|responses)_total[{ ]' "$T/again$i.prom" | sort >"$T/counts.$i"
	cmp -s "$T/counts.1" "$T/counts.$i" || { same=0; diag "fetch $i differs: $(diff "$T/counts.1" "$T/counts.$i" | head -4)"; }
done
is "$same" 1 "8 fetches of /rlgate/metrics report the same rlgate_requests_total and rlgate_responses_total"
is "$(expo_codes "$T/after.prom")" "200 7 404 3 405 1 429 13" \
    "the exposition: rlgate_responses_total above 0: 200 x 7, 404 x 3, 405 x 1, 429 x 13"

# --- what Prometheus stored from a scrape after the requests (part 3)
wait_until 30000 scraped_since $((t_load + 500))
ok $? "Prometheus scraped again after the requests (within 30 s)"
diag "a scrape after the requests was in $(($(now_ms) - t_load)) ms after the last one"
up=$(prom_value 'up{job="rlgate"}')
is "$up" 1 'Prometheus: up{job="rlgate"} 1'
[ "$up" = 1 ] || diag "$(prom_target_error)"

want_requests='api admitted 7|api dry_run_rejected 0|api exempt 0|api rejected 13'
want_requests+='|other admitted 4|other dry_run_rejected 0|other exempt 0|other rejected 0'
want_requests+='|partner admitted 0|partner dry_run_rejected 0|partner exempt 20|partner rejected 0'
want_requests+='|trial admitted 3|trial dry_run_rejected 17|trial exempt 0|trial rejected 0'
is "$(prom_lines rlgate_requests_total policy decision)" "$want_requests" \
    "Prometheus: rlgate_requests_total per policy and decision"
is "$(prom_value 'sum(rlgate_requests_total)')" 64 \
    "Prometheus: sum(rlgate_requests_total) 64 (20 requests x 3 policies + 4 x 1)"
is "$(prom_lines 'sum by (decision) (rlgate_requests_total)' decision)" \
    "admitted 14|dry_run_rejected 17|exempt 20|rejected 13" \
    "Prometheus: sum by (decision) (rlgate_requests_total)"
is "$(prom_lines 'rlgate_responses_total > 0' code)" "200 7|404 3|405 1|429 13" \
    "Prometheus: rlgate_responses_total per code, those above 0 (its own scrapes not among them)"
between "$(prom_value 'sum(rlgate_admin_responses_total{code="200"})')" 2 100000 \
    "Prometheus: rlgate_admin_responses_total{code=\"200\"} counts the scrapes and fetches"
is "$(prom_value rlgate_store_errors_total)" 0 "Prometheus: rlgate_store_errors_total 0"
is "$(prom_value rlgate_rejection_cache_hits_total)" 0 \
    "Prometheus: rlgate_rejection_cache_hits_total 0 (rejection_cache = 0)"
# one store step in 16 is timed, each worker thread's first among them:
# at least one of the 24, at most one per step
hcount=$(prom_value rlgate_decision_duration_seconds_count)
between "$hcount" 1 24 \
    "Prometheus: rlgate_decision_duration_seconds_count $hcount (a sample of the 24 store steps, each thread's first)"
is "$(prom_value 'rlgate_decision_duration_seconds_bucket{le="+Inf"}')" "$hcount" \
    "Prometheus: rlgate_decision_duration_seconds_bucket{le=\"+Inf\"} equals the count"
like "$(prom_value 'histogram_quantile(0.5, sum by (le) (rlgate_decision_duration_seconds_bucket))')" \
    '^[0-9]+(\.[0-9]+)?(e-?[0-9]+)?$' "Prometheus: histogram_quantile over the buckets is a number"
like "$(prom_value rlgate_decision_duration_seconds_sum)" '^[0-9]+(\.[0-9]+)?(e-?[0-9]+)?$' \
    "Prometheus: rlgate_decision_duration_seconds_sum is a number"
is "$(prom_lines rlgate_build_info version)" "$version 1" \
    "Prometheus: rlgate_build_info{version=\"$version\"} 1"
start=$(prom_value rlgate_start_time_seconds)
between "${start%%.*}" $((t_start - 1)) "$t_started" \
    "Prometheus: rlgate_start_time_seconds ($start) is this run's start ($t_start..$t_started)"
is "$(prom_value rlgate_metrics_shared)" 1 \
    "Prometheus: rlgate_metrics_shared 1 (the counters are the host's)"
is "$(prom_value rlgate_store_up)" 1 "Prometheus: rlgate_store_up 1"
clients=$(prom_lines rlgate_clients policy)
[ -n "$clients" ] && diag "rlgate_clients: $clients"

# --- [admin] allow (part 4): 127.0.0.2 is not in 127.0.0.1/32, ::1/128.
# For it /rlgate/metrics is a path like any other: no route, no policy,
# 404, counted among the non-admin responses and by no policy.
req --interface 127.0.0.2 "$metrics"
is "$STATUS" 404 "a client outside [admin] allow: /rlgate/metrics is an unknown path, 404"
unlike "$BODY" 'rlgate_' "its answer holds no metric"
fetch_metrics last
is "$(expo_codes "$T/last.prom")" "200 7 404 4 405 1 429 13" \
    "that 404 is counted in rlgate_responses_total, as any non-admin answer"
grep '^rlgate_requests_total' "$T/after.prom" >"$T/requests.after"
grep '^rlgate_requests_total' "$T/last.prom" >"$T/requests.last"
cmp -s "$T/requests.after" "$T/requests.last"
ok $? "and by no policy: rlgate_requests_total unchanged"

# --- the servers said nothing wrong
unlike "$(grep -v 'server started' "$run/lighttpd-error.log")" . \
    "lighttpd logged nothing about its backend: $(tail -3 "$run/lighttpd-error.log" | tr '\n' ' ')"
# (its start-up line names on_error)
errors=$(grep -v 'serving FastCGI' "$T/rlgate.log" | grep -iE 'error|fail')
is "$(printf '%s' "$errors" | grep -c .)" 0 "rlgate logged no error" "$(printf '%s\n' "$errors" | head -3)"
term_and_wait 10000 "$PROM_PID"
ok $? "Prometheus stops on SIGTERM (within 10 s)"
grep -E 'level=(error|warn)' "$T/prometheus.log" | head -5 | while read -r l; do diag "prometheus: $l"; done

done_testing
