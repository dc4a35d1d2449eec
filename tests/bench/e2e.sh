#!/bin/bash
# tests/bench/e2e.sh: rlgate end to end, behind a real web server, against a
# no-op FastCGI responder (tests/bench/noop, the ceiling), side by side.
#
#     bash tests/bench/e2e.sh [OUTFILE]          (default ./bench-e2e.md)
#
# For each scenario it starts, per run, a fresh backend (spawn-fcgi -F
# BENCH_PROCS of rlgate --threads BENCH_THREADS with a fresh database, or
# of noop with the same processes and threads) and a fresh web server
# (lighttpd, or nginx) on 127.0.0.1, checks with one curl that the answer
# is the one intended (200, or 429 for the rejected scenarios; it stops
# with a clear message if not), warms up with wrk for BENCH_WARMUP s
# (discarded), then measures with
#     wrk -t BENCH_WRK_THREADS -c BENCH_CONNECTIONS -d BENCH_SECONDS --latency
# The runs alternate rlgate, noop, rlgate, noop, ... (BENCH_PAIRS pairs),
# so drift (CPU frequency, other load) hits both alike. Each pair gives the
# ratio of requests/s rlgate / noop; the summary is the median over pairs.
# The CPU time each process used during the measured run (web server,
# backend workers, wrk, and the redis-server of the _redis scenarios) is
# read from /proc, so the tables say where the CPU went.
#
# Output: the tables (markdown) on stdout and in OUTFILE; one row per run
# in OUTFILE with .md replaced by (or followed by) .tsv:
#     server  scenario  kind  pair  reqs_per_s  p50_ms  p99_ms
# Progress goes to stderr. Exit 0 with the tables, 1 on any error (every
# server is stopped by pid on the way out).
#
# Environment:
#   RLGATE_SRCDIR      source tree (default: two levels above this script)
#   RLGATE_BUILDDIR    build tree (default: RLGATE_SRCDIR)
#   RLGATE_BIN         rlgate (default: RLGATE_BUILDDIR/app/rlgate)
#   NOOP_BIN           noop (default: RLGATE_BUILDDIR/tests/bench/noop)
#   BENCH_SECONDS      measured seconds per run (default 5)
#   BENCH_WARMUP       warm-up seconds per run, discarded (default 1)
#   BENCH_PAIRS        rlgate/noop pairs per scenario (default 3)
#   BENCH_PROCS        spawn-fcgi -F (default 2)
#   BENCH_THREADS      --threads of rlgate and noop (default 1)
#   BENCH_WRK_THREADS  wrk -t (default 2)
#   BENCH_CONNECTIONS  wrk -c (default 16)
#   BENCH_KEEPCONN_THREADS  --threads for the nginx keep-conn scenario
#                      (default: BENCH_CONNECTIONS / BENCH_PROCS rounded up,
#                      so every upstream connection nginx keeps has a worker)
#   BENCH_GROUP_THREADS  --threads for the _full scenarios (default 8)
#   BENCH_NGINX_WORKERS  nginx worker_processes (default 1, as lighttpd's
#                      one process)
#   BENCH_SCENARIOS    space-separated scenario names to run (default: all;
#                      "list" prints them and exits)
#   BENCH_KEEP_TMP     1 keeps the temporary directory (configs, logs, wrk
#                      output) and prints its name
#   REDIS_SERVER_BIN   redis-server for the _redis scenarios (default: the
#                      one in PATH, else /usr/bin/redis-server)
#   REDIS_CLI_BIN      redis-cli, to wait for it to answer PING (default:
#                      the one in PATH, else /usr/bin/redis-cli)
#
# Scenarios (one client, 127.0.0.1; URL /api/v1/resources):
#   <algorithm>_admitted   behind lighttpd; a limit never reached:
#                          1000000000 per 60 s (token_bucket: burst the
#                          same); sliding_log 100000 per 1 s (its maximum
#                          limit; the log then holds about one second of
#                          requests, a steady state, where a long window
#                          would grow the log, and each decision's cost,
#                          with every request)
#   <algorithm>_rejected   behind lighttpd; 1 per 3600 s, used up by the
#                          check before the warm-up, so every measured
#                          request is a 429 (noop still answers 200);
#                          rlgate logs one event=reject line per 429 (the
#                          default [log] level = warn)
#   fixed_window_rejected_nolog
#                          the same with [log] level = error: no line per
#                          429, what the log line costs
#   nginx_fixed_window_admitted, nginx_fixed_window_rejected
#                          behind nginx, one FastCGI connection per request
#                          (fastcgi_keep_conn off), as lighttpd does
#   fixed_window_admitted_full, fixed_window_admitted_full_group
#                          behind lighttpd, backends with
#                          BENCH_GROUP_THREADS threads, [store]
#                          synchronous = full (an fsync per commit), group
#                          commit off, then on: what group commit wins
#                          where commits wait on the disk
#   nginx_keepconn_fixed_window_admitted
#                          behind nginx with upstream keepalive 16 and
#                          fastcgi_keep_conn on, backends with
#                          BENCH_KEEPCONN_THREADS threads: the no-op's
#                          libfcgi loop serves a kept connection until
#                          nginx closes it, so with fewer worker threads
#                          than connections nginx keeps open, its requests
#                          queue behind idle connections (seconds of tail
#                          latency); rlgate keeps idle connections in an
#                          epoll set, not in a thread
#   fixed_window_admitted_redis, fixed_window_rejected_redis
#                          as fixed_window_admitted and _rejected, but
#                          rlgate with [store] backend = redis (clock =
#                          redis, the default): before each rlgate run the
#                          script starts a fresh redis-server on a free
#                          port of 127.0.0.1 (--save "" --appendonly no,
#                          in the run's directory), waits until it answers
#                          PING, and stops it by pid with the run; every
#                          worker holds one TCP connection to it. Against
#                          the same no-op ceiling, so rlgate+SQLite and
#                          rlgate+Redis read side by side in one report.
#                          Redis shares the machine's CPUs with the rest;
#                          its CPU time is its own column. Rejected: the
#                          rejection cache answers the repeats, as with
#                          SQLite
#   fixed_window_admitted_redis_each, fixed_window_admitted_redis_group
#                          as fixed_window_admitted_redis with
#                          BENCH_GROUP_THREADS threads per backend, group
#                          commit off (one script call per decision), then
#                          on (the default: the decisions that the threads
#                          of a process make at once in one call); the
#                          "redis µs per request" column is the Redis CPU
#                          that one admitted request cost
#   fixed_window_admitted_redis_behind
#                          the same in the local+global mode ([store]
#                          commit = behind, sync_ms = 100): the host's
#                          table decides, Redis gets one merged item per
#                          client per 100 ms (the one client of wrk here)
# <algorithm> is fixed_window, sliding_window, token_bucket, sliding_log.

BENCH_PROG=e2e.sh
# lib-bench.sh: set -u, the defaults of RLGATE_*, NOOP_BIN, BENCH_SECONDS,
# BENCH_WARMUP, BENCH_WRK_THREADS, BENCH_CONNECTIONS, LIGHTTPD_BIN, URL_PATH
# shellcheck source=tests/bench/lib-bench.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib-bench.sh"

bench_defaults BENCH_PAIRS=3 BENCH_PROCS=2 BENCH_THREADS=1 \
    BENCH_NGINX_WORKERS=1 BENCH_GROUP_THREADS=8 BENCH_SCENARIOS=
: "${BENCH_KEEPCONN_THREADS:=$(((BENCH_CONNECTIONS + BENCH_PROCS - 1) / BENCH_PROCS))}"
NGINX_BIN=${NGINX_BIN:-$(command -v nginx 2>/dev/null || echo /usr/sbin/nginx)}
REDIS_SERVER_BIN=${REDIS_SERVER_BIN:-$(command -v redis-server 2>/dev/null || echo /usr/bin/redis-server)}
REDIS_CLI_BIN=${REDIS_CLI_BIN:-$(command -v redis-cli 2>/dev/null || echo /usr/bin/redis-cli)}

bench_outputs "${1:-./bench-e2e.md}"

# id server algorithm kind backend-threads keepconn rlgate-log-level store
# (store: empty for SQLite with the defaults, full, fullgroup, redis,
# redis_each, redis_behind)
ALL_SCENARIOS="
fixed_window_admitted                lighttpd fixed_window   admitted base off warn
fixed_window_rejected                lighttpd fixed_window   rejected base off warn
fixed_window_rejected_nolog          lighttpd fixed_window   rejected base off error
sliding_window_admitted              lighttpd sliding_window admitted base off warn
sliding_window_rejected              lighttpd sliding_window rejected base off warn
token_bucket_admitted                lighttpd token_bucket   admitted base off warn
token_bucket_rejected                lighttpd token_bucket   rejected base off warn
sliding_log_admitted                 lighttpd sliding_log    admitted base off warn
sliding_log_rejected                 lighttpd sliding_log    rejected base off warn
nginx_fixed_window_admitted          nginx    fixed_window   admitted base off warn
nginx_fixed_window_rejected          nginx    fixed_window   rejected base off warn
fixed_window_admitted_full           lighttpd fixed_window   admitted group off warn full
fixed_window_admitted_full_group     lighttpd fixed_window   admitted group off warn fullgroup
nginx_keepconn_fixed_window_admitted nginx    fixed_window   admitted keep on  warn
fixed_window_admitted_redis          lighttpd fixed_window   admitted base off warn redis
fixed_window_rejected_redis          lighttpd fixed_window   rejected base off warn redis
fixed_window_admitted_redis_each     lighttpd fixed_window   admitted group off warn redis_each
fixed_window_admitted_redis_group    lighttpd fixed_window   admitted group off warn redis
fixed_window_admitted_redis_behind   lighttpd fixed_window   admitted group off warn redis_behind"

# ---- checks ----------------------------------------------------------------

check_counts BENCH_SECONDS BENCH_WARMUP BENCH_PAIRS BENCH_PROCS BENCH_THREADS \
    BENCH_WRK_THREADS BENCH_CONNECTIONS BENCH_KEEPCONN_THREADS \
    BENCH_NGINX_WORKERS BENCH_GROUP_THREADS

if [ "$BENCH_SCENARIOS" = list ]; then
	awk 'NF { print $1 }' <<<"$ALL_SCENARIOS"
	exit 0
fi
SCENARIOS=()
if [ -z "${BENCH_SCENARIOS// /}" ]; then
	while read -r id _; do
		[ -n "$id" ] && SCENARIOS+=("$id")
	done <<<"$ALL_SCENARIOS"
else
	for s in $BENCH_SCENARIOS; do
		awk -v s="$s" '$1 == s { f = 1 } END { exit !f }' <<<"$ALL_SCENARIOS" ||
			die "unknown scenario \"$s\" in BENCH_SCENARIOS (BENCH_SCENARIOS=list prints them)"
		SCENARIOS+=("$s")
	done
fi

scen_field() {   # scen_field ID N: field N (2 server .. 7 log level, 8 store)
	awk -v s="$1" -v n="$2" '$1 == s { print $n }' <<<"$ALL_SCENARIOS"
}

need_servers=
need_redis=
for s in "${SCENARIOS[@]}"; do
	need_servers="$need_servers $(scen_field "$s" 2)"
	[[ $(scen_field "$s" 8) == redis* ]] && need_redis=1
done
need_cmd wrk curl spawn-fcgi awk sort stat
[[ $need_servers == *lighttpd* ]] && { [ -x "$LIGHTTPD_BIN" ] || die "lighttpd not found (LIGHTTPD_BIN=$LIGHTTPD_BIN)"; }
[[ $need_servers == *nginx* ]] && { [ -x "$NGINX_BIN" ] || die "nginx not found (NGINX_BIN=$NGINX_BIN)"; }
if [ -n "$need_redis" ]; then
	[ -x "$REDIS_SERVER_BIN" ] ||
		die "redis-server not found (REDIS_SERVER_BIN=$REDIS_SERVER_BIN): the _redis scenarios need it (scripts/deps.sh installs redis-server)"
	[ -x "$REDIS_CLI_BIN" ] ||
		die "redis-cli not found (REDIS_CLI_BIN=$REDIS_CLI_BIN): the _redis scenarios need it (scripts/deps.sh installs redis-tools)"
fi
bench_begin

# ---- one run -----------------------------------------------------------------

# write_rlgate_conf FILE DB ALGORITHM KIND LOG_LEVEL [STORE]
# STORE: full (synchronous = full, group commit off), fullgroup (on),
# redis (backend = redis on 127.0.0.1:$REDIS_PORT, group commit auto: on;
# no DB file), redis_each (the same, group commit off), or redis_behind
# (the local+global mode: the host's table at DB-table, synced with Redis
# every 100 ms).
write_rlgate_conf() {
	local limit window burst=
	if [ "$4" = rejected ]; then
		limit=1 window=3600
		[ "$3" = token_bucket ] && burst=1
	elif [ "$3" = sliding_log ]; then
		limit=100000 window=1
	else
		limit=1000000000 window=60
		[ "$3" = token_bucket ] && burst=1000000000
	fi
	{
		echo "; written by e2e.sh"
		echo "[store]"
		case ${6:-} in
		redis*)
			echo "backend = redis"
			echo "url = redis://127.0.0.1:$REDIS_PORT"
			;;
		*) echo "path = $2" ;;
		esac
		case ${6:-} in
		full) echo "synchronous = full"; echo "group_commit = off" ;;
		fullgroup) echo "synchronous = full"; echo "group_commit = on" ;;
		redis_each) echo "group_commit = off" ;;
		redis_behind)
			echo "commit = behind"
			echo "sync_ms = 100"
			echo "path = $2"
			echo "max_clients = 100000"
			;;
		esac
		echo
		echo "[headers]"
		echo "style = draft03"
		echo
		echo "[log]"
		echo "level = $5"
		echo
		echo "[policy default]"
		echo "algorithm = $3"
		echo "limit = $limit"
		echo "window = $window"
		[ -n "$burst" ] && echo "burst = $burst"
		echo "key = ip"
	} >"$1"
}

# write_nginx_conf FILE DIR PORT SOCKET KEEPCONN(on|off)
write_nginx_conf() {
	local params upstream keep
	if [ -r /etc/nginx/fastcgi_params ]; then
		params="include /etc/nginx/fastcgi_params;"
	else
		params="fastcgi_param QUERY_STRING \$query_string;
            fastcgi_param REQUEST_METHOD \$request_method;
            fastcgi_param CONTENT_TYPE \$content_type;
            fastcgi_param CONTENT_LENGTH \$content_length;
            fastcgi_param SCRIPT_NAME \$fastcgi_script_name;
            fastcgi_param REQUEST_URI \$request_uri;
            fastcgi_param DOCUMENT_URI \$document_uri;
            fastcgi_param SERVER_PROTOCOL \$server_protocol;
            fastcgi_param GATEWAY_INTERFACE CGI/1.1;
            fastcgi_param REMOTE_ADDR \$remote_addr;
            fastcgi_param REMOTE_PORT \$remote_port;
            fastcgi_param SERVER_ADDR \$server_addr;
            fastcgi_param SERVER_PORT \$server_port;
            fastcgi_param SERVER_NAME \$server_name;"
	fi
	if [ "$5" = on ]; then
		upstream="server unix:$4;
        keepalive 16;"
		keep=on
	else
		upstream="server unix:$4;"
		keep=off
	fi
	mkdir -p "$2/nginx-tmp"
	cat >"$1" <<EOF
# written by e2e.sh
daemon off;
master_process on;
worker_processes $BENCH_NGINX_WORKERS;
pid $2/nginx.pid;
error_log $2/nginx-error.log warn;
events {
    worker_connections 1024;
}
http {
    access_log off;
    client_body_temp_path $2/nginx-tmp/body;
    proxy_temp_path $2/nginx-tmp/proxy;
    fastcgi_temp_path $2/nginx-tmp/fastcgi;
    uwsgi_temp_path $2/nginx-tmp/uwsgi;
    scgi_temp_path $2/nginx-tmp/scgi;
    upstream rlgate_backend {
        $upstream
    }
    server {
        listen 127.0.0.1:$3;
        location /api/ {
            $params
            fastcgi_pass rlgate_backend;
            fastcgi_keep_conn $keep;
        }
    }
}
EOF
}

# start_redis WHAT: a fresh redis-server on a free port of 127.0.0.1, no
# persistence, in $RUN/redis, in the background; sets REDIS_PID and
# REDIS_PORT once it answers PING (at most 10 s). A port taken before it
# binds is retried with another one, up to 3 times.
start_redis() {
	local what=$1 try
	mkdir -p "$RUN/redis" || die "mkdir $RUN/redis failed"
	for try in 1 2 3; do
		REDIS_PORT=$(free_port) || die "no free port on 127.0.0.1"
		"$REDIS_SERVER_BIN" --port "$REDIS_PORT" --bind 127.0.0.1 \
		    --save "" --appendonly no --dir "$RUN/redis" \
		    --daemonize no </dev/null >>"$RUN/redis.log" 2>&1 &
		REDIS_PID=$!
		track_pid "$REDIS_PID"
		for _ in $(seq 1 500); do
			if [ "$(timeout -k 1 2 "$REDIS_CLI_BIN" -h 127.0.0.1 \
			    -p "$REDIS_PORT" ping 2>/dev/null)" = PONG ]; then
				return 0
			fi
			pid_alive "$REDIS_PID" || break
			sleep 0.02
		done
		STOP_GRACE_MS=2000 stop_pids "$REDIS_PID"
		untrack_pid "$REDIS_PID"
		REDIS_PID=''
		grep -qs 'in use' "$RUN/redis.log" || break
		note "$what: port $REDIS_PORT was taken before redis-server could bind it (try $try); another one"
	done
	die "$what: redis-server did not answer PING on 127.0.0.1:$REDIS_PORT: $(tail -3 "$RUN/redis.log")"
}

# launch_nginx PORT SOCKET KEEPCONN WHAT: as lib-bench.sh's launch_lighttpd,
# for start_server: $RUN/nginx.conf, checked, and nginx in the background.
launch_nginx() {
	write_nginx_conf "$RUN/nginx.conf" "$RUN" "$1" "$2" "$3"
	"$NGINX_BIN" -t -q -e "$RUN/nginx-error.log" -c "$RUN/nginx.conf" \
	    -p "$RUN" >"$RUN/server.out" 2>&1 ||
		die "$4: nginx rejects its config: $(head -3 "$RUN/server.out")"
	"$NGINX_BIN" -e "$RUN/nginx-error.log" -c "$RUN/nginx.conf" \
	    -p "$RUN" </dev/null >>"$RUN/server.out" 2>&1 &
}

NRUN=0
REDIS_PORT=
REDIS_RAN=

# run_one SCENARIO KIND(rlgate|noop) PAIR: one measured run; appends its
# row to $BT/runs.tsv (server scenario kind pair rps p50 p99 requests
# non2xx sockerr server_cpu backend_cpu wrk_cpu rss_list db wal redis_cpu;
# db and wal "-" with Redis, redis_cpu "-" without).
run_one() {
	local scen=$1 kind=$2 pair=$3 server algo skind tsel keepconn threads
	local sock url what p rss db=0 wal=0 store
	server=$(scen_field "$scen" 2)
	algo=$(scen_field "$scen" 3)
	skind=$(scen_field "$scen" 4)
	tsel=$(scen_field "$scen" 5)
	keepconn=$(scen_field "$scen" 6)
	store=$(scen_field "$scen" 8)
	threads=$BENCH_THREADS
	[ "$tsel" = keep ] && threads=$BENCH_KEEPCONN_THREADS
	[ "$tsel" = group ] && threads=$BENCH_GROUP_THREADS
	NRUN=$((NRUN + 1))
	RUN=$BT/run$NRUN-$scen-$kind-$pair
	mkdir -p "$RUN" || die "mkdir $RUN failed"
	chmod 755 "$RUN" || die "chmod $RUN failed"
	what="$server $scen $kind pair $pair"
	sock=$RUN/fcgi.sock

	# the backend: spawn-fcgi -F N (the socket 0666: nginx's workers run
	# as nobody)
	if [ "$kind" = rlgate ]; then
		if [[ $store == redis* ]]; then
			start_redis "$what"
			REDIS_RAN=1
		fi
		write_rlgate_conf "$RUN/rlgate.conf" "$RUN/rlgate.db" "$algo" "$skind" \
		    "$(scen_field "$scen" 7)" "$store"
		set -- "$RLGATE_BIN" --config "$RUN/rlgate.conf" --threads "$threads"
	else
		set -- "$NOOP_BIN" --threads "$threads"
	fi
	spawn_backend "$what" "$sock" "$BENCH_PROCS" 0666 "$@"

	# the web server
	start_server "$server" "$sock" "$keepconn" "$what"
	backends_alive "$what" "exited at start"
	[ "$server" = nginx ] && add_nginx_workers

	url=http://127.0.0.1:$port$URL_PATH
	if [ "$kind" = rlgate ] && [ "$skind" = rejected ]; then
		check_answer "$url" rlgate 200 "$what (first request, using the quota up)"
		check_answer "$url" rlgate 429 "$what"
	else
		check_answer "$url" "$kind" 200 "$what"
	fi

	wrk_run "$what" "$url"
	rss=
	for p in "${BACKEND_PIDS[@]}"; do
		rss="$rss${rss:+,}$(rss_kb "$p")"
	done
	if [ -n "$REDIS_PID" ]; then
		pid_alive "$REDIS_PID" || die "$what: redis-server died during the run: $(tail -3 "$RUN/redis.log")"
		db=- wal=-
	elif [ "$kind" = rlgate ]; then
		db=$(file_size "$RUN/rlgate.db")
		wal=$(file_size "$RUN/rlgate.db-wal")
	fi
	stop_run

	# the answers must be what the scenario says: all 2xx when admitted
	# (and for noop), all 429 when rejected
	if [ "$kind" = rlgate ] && [ "$skind" = rejected ]; then
		read_wrk "$what" 429
	else
		read_wrk "$what" 2xx
	fi
	runs_row "$server" "$scen" "$kind" "$pair" "$WRK_RPS" "$WRK_P50_MS" \
	    "$WRK_P99_MS" "$WRK_REQUESTS" "$WRK_NON2XX" "$WRK_SOCKERR" \
	    "$CPU_SERVER" "$CPU_BACKEND" "$CPU_WRK" "$rss" "$db" "$wal" \
	    "$CPU_REDIS"
	note "$what: $WRK_RPS req/s, p50 $WRK_P50_MS ms, p99 $WRK_P99_MS ms"
}

# ---- the runs ----------------------------------------------------------------

runs_begin
total=$((${#SCENARIOS[@]} * BENCH_PAIRS * 2))
note "${#SCENARIOS[@]} scenarios x $BENCH_PAIRS pairs = $total runs of ${BENCH_SECONDS} s (+ ${BENCH_WARMUP} s warm-up); load average $load_start"
for scen in "${SCENARIOS[@]}"; do
	for pair in $(seq 1 "$BENCH_PAIRS"); do
		run_one "$scen" rlgate "$pair"
		run_one "$scen" noop "$pair"
	done
done
runs_end

# ---- the report -----------------------------------------------------------------

# col ROWS_FILE SERVER SCEN KIND FIELD: that field of every matching run.
col() {
	awk -F'\t' -v sv="$2" -v sc="$3" -v k="$4" -v f="$5" \
	    '$1 == sv && $2 == sc && $3 == k { print $f }' "$1"
}
fmt0() { awk -v v="$1" 'BEGIN { printf "%.0f", v }'; }
fmt2() { awk -v v="$1" 'BEGIN { printf "%.2f", v }'; }

# ratios SERVER SCEN: the per-pair ratios rlgate/noop of requests/s.
ratios() {
	awk -F'\t' -v sv="$1" -v sc="$2" '
		$1 == sv && $2 == sc && $3 == "rlgate" { r[$4] = $5 }
		$1 == sv && $2 == sc && $3 == "noop" { n[$4] = $5 }
		END { for (p in r) if (p in n && n[p] > 0) printf "%.6f\n", r[p] / n[p] }' \
	    "$BT/runs.tsv"
}

nginx_v=$("$NGINX_BIN" -v 2>&1 | head -1)
redis_v=
[ -n "$REDIS_RAN" ] &&
	redis_v="; redis-server $("$REDIS_SERVER_BIN" --version 2>/dev/null | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^v=/) { sub(/^v=/, "", $i); print $i } }')"

R=$BT/report.md
{
	echo "# rlgate end to end: rlgate vs a no-op FastCGI responder"
	echo
	echo "Medians over $BENCH_PAIRS pairs of runs (rlgate, noop, rlgate, noop, ...);"
	echo "ratio = the median of the per-pair ratios rlgate req/s / noop req/s."
	echo "noop answers 200 to everything, also in the rejected scenarios."
	for server in lighttpd nginx; do
		grep -q "^$server"$'\t' "$BT/runs.tsv" || continue
		echo
		echo "## $server"
		echo
		echo "| scenario | rlgate req/s | noop req/s | ratio | rlgate p50 ms | p99 ms | noop p50 ms | p99 ms |"
		echo "|---|---|---|---|---|---|---|---|"
		for scen in "${SCENARIOS[@]}"; do
			[ "$(scen_field "$scen" 2)" = "$server" ] || continue
			# shellcheck disable=SC2046
			printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "$scen" \
			    "$(fmt0 "$(median $(col "$BT/runs.tsv" "$server" "$scen" rlgate 5))")" \
			    "$(fmt0 "$(median $(col "$BT/runs.tsv" "$server" "$scen" noop 5))")" \
			    "$(fmt2 "$(median $(ratios "$server" "$scen"))")" \
			    "$(fmt2 "$(median $(col "$BT/runs.tsv" "$server" "$scen" rlgate 6))")" \
			    "$(fmt2 "$(median $(col "$BT/runs.tsv" "$server" "$scen" rlgate 7))")" \
			    "$(fmt2 "$(median $(col "$BT/runs.tsv" "$server" "$scen" noop 6))")" \
			    "$(fmt2 "$(median $(col "$BT/runs.tsv" "$server" "$scen" noop 7))")"
		done
	done
	echo
	echo "## Every run"
	echo
	echo "CPU: % of one core used during the measured run by the web server"
	echo "(nginx: master + workers), by the backend's workers together, by wrk,"
	echo "and by the redis-server of the _redis scenarios' rlgate runs."
	echo
	echo "| server | scenario | pair | kind | req/s | p50 ms | p99 ms | requests | non-2xx | socket errors | server CPU % | backend CPU % | wrk CPU % | redis CPU % | redis µs per request | ratio |"
	echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
	awk -F'\t' '
		$3 == "rlgate" { r[$1 SUBSEP $2 SUBSEP $4] = $5 }
		$3 == "noop" { n[$1 SUBSEP $2 SUBSEP $4] = $5 }
		{ row[NR] = $0 }
		END {
			for (i = 1; i <= NR; i++) {
				split(row[i], f, "\t")
				k = f[1] SUBSEP f[2] SUBSEP f[4]
				ratio = "-"
				if (f[3] == "rlgate" && n[k] > 0)
					ratio = sprintf("%.2f", r[k] / n[k])
				# the redis-server CPU of the measured seconds over
				# the requests answered in them
				us = "-"
				if (f[17] != "-" && f[17] != "" && f[5] > 0)
					us = sprintf("%.1f", f[17] / 100 * 1e6 / f[5])
				printf "| %s | %s | %s | %s | %.0f | %.2f | %.2f | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
				    f[1], f[2], f[4], f[3], f[5], f[6], f[7], f[8],
				    f[9], f[10], f[11], f[12], f[13], f[17], us, ratio
			}
		}' "$BT/runs.tsv"
	echo
	echo "## Memory and database"
	echo
	echo "RSS (VmRSS) of each backend worker at the end of its last measured run,"
	echo "and rlgate's database file and its -wal after it (while still open;"
	echo "\"-\" with Redis, which holds the state)."
	echo
	echo "| server | scenario | rlgate RSS kB per worker | noop RSS kB per worker | db bytes | wal bytes |"
	echo "|---|---|---|---|---|---|"
	for scen in "${SCENARIOS[@]}"; do
		server=$(scen_field "$scen" 2)
		printf '| %s | %s | %s | %s | %s | %s |\n' "$server" "$scen" \
		    "$(col "$BT/runs.tsv" "$server" "$scen" rlgate 14 | tail -1 | sed 's/,/, /g')" \
		    "$(col "$BT/runs.tsv" "$server" "$scen" noop 14 | tail -1 | sed 's/,/, /g')" \
		    "$(col "$BT/runs.tsv" "$server" "$scen" rlgate 15 | tail -1)" \
		    "$(col "$BT/runs.tsv" "$server" "$scen" rlgate 16 | tail -1)"
	done
	echo
	echo "## Machine and parameters"
	echo
	machine_line
	echo "- software: $lighttpd_v; $nginx_v; $wrk_v; $rlgate_version$redis_v"
	echo "- started $started; $BENCH_PAIRS pairs per scenario, ${BENCH_SECONDS} s measured after ${BENCH_WARMUP} s of warm-up per run"
	echo "- wrk -t$BENCH_WRK_THREADS -c$BENCH_CONNECTIONS -d${BENCH_SECONDS}s --latency http://127.0.0.1:PORT$URL_PATH (one client address)"
	echo "- backend: spawn-fcgi -F $BENCH_PROCS, --threads $BENCH_THREADS (nginx_keepconn: --threads $BENCH_KEEPCONN_THREADS; _full: --threads $BENCH_GROUP_THREADS, synchronous = full, group_commit off, then on; _redis_each, _redis_group, _redis_behind: --threads $BENCH_GROUP_THREADS, group_commit off, then on, then commit = behind), a fresh process set and database per run; rlgate [headers] style = draft03, [log] level = warn (one line per 429; _nolog: error), one [policy default]"
	echo "- lighttpd: one process, mod_fastcgi to the unix socket (no bin-path, check-local disable), no access log, other settings default"
	echo "- nginx: master_process on, worker_processes $BENCH_NGINX_WORKERS, access_log off, fastcgi_pass to the unix socket, /etc/nginx/fastcgi_params; fastcgi_keep_conn off, except nginx_keepconn: upstream keepalive 16, fastcgi_keep_conn on"
	[ -n "$REDIS_RAN" ] &&
		echo "- redis (_redis scenarios): a fresh redis-server per rlgate run on 127.0.0.1 (TCP, a free port), --save \"\" --appendonly no, on the same CPUs; rlgate [store] backend = redis, url = redis://127.0.0.1:PORT, clock = redis, other keys default (timeout_ms 500, rejection_cache 4096); one connection per worker thread"
	echo "- limits: admitted 1000000000 per 60 s (token_bucket burst 1000000000), sliding_log 100000 per 1 s; rejected 1 per 3600 s (token_bucket burst 1), used up before the warm-up"
	echo "- rlgate $RLGATE_BIN; noop $NOOP_BIN"
} >"$R"

publish "$R" 1-7 server scenario kind pair reqs_per_s p50_ms p99_ms
note "wrote $OUT and $TSV"
