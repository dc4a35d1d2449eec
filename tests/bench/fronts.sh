#!/bin/bash
# tests/bench/fronts.sh: what guarding a static file with rlgate costs end
# to end, under nginx (auth_request, the shipped www/nginx/rlgate.conf and
# guard.conf) and under Caddy (forward_auth over FastCGI), side by side
# with the same server serving the same file unguarded.
#
#     bash tests/bench/fronts.sh [OUTFILE]        (default ./bench-fronts.md)
#
# One rlgate (spawn-fcgi -F BENCH_PROCS of rlgate --threads BENCH_THREADS
# on a unix socket, a SQLite database in a temporary directory, a limit of
# 1000000000 requests per 3600 s: nothing is refused) serves both servers.
# Each server (one nginx, worker_processes BENCH_NGINX_WORKERS; one
# Caddy) has two locations for the same 13-byte file: /direct/ (not
# guarded) and /guarded/ (rlgate asked first). A curl checks each (200, and
# the guarded one counted: rlgate's database holds the client; nginx also
# passes RateLimit-Limit on), then the runs alternate
# direct, guarded, no-op, direct, guarded, no-op... (BENCH_ROUNDS rounds),
# where no-op is the guarded file with the no-op FastCGI responder
# (NOOP_BIN, the same -F and threads) on rlgate's socket in its place: the
# ceiling of guarding through that server. Each run is
#     wrk -t BENCH_WRK_THREADS -c BENCH_CONNECTIONS -d BENCH_SECONDS --latency
# after BENCH_WARMUP s of warm-up (discarded). The summary: the medians
# over the rounds of requests/s and latency p50 and p99, and the medians
# of the per-round ratios guarded / direct, no-op / direct and
# guarded / no-op, and of the added p50 (guarded - direct).
#
# Output: the table (markdown) on stdout and in OUTFILE; one row per run
# in OUTFILE with .md replaced by (or followed by) .tsv:
#     server  kind  round  reqs_per_s  p50_ms  p99_ms
# Progress goes to stderr. Exit 0 with the table, 1 on any error.
#
# Environment:
#   RLGATE_SRCDIR, RLGATE_BUILDDIR, RLGATE_BIN, NOOP_BIN   as for e2e.sh
#   BENCH_SECONDS      measured seconds per run (default 5)
#   BENCH_WARMUP       warm-up seconds per run, discarded (default 1)
#   BENCH_ROUNDS       direct/guarded rounds per server (default 3)
#   BENCH_PROCS        spawn-fcgi -F (default 2)
#   BENCH_THREADS      rlgate --threads (default 2)
#   BENCH_WRK_THREADS  wrk -t (default 2)
#   BENCH_CONNECTIONS  wrk -c (default 32)
#   BENCH_NGINX_WORKERS  nginx worker_processes (default 1)
#   BENCH_FRONTS       the servers to measure (default "nginx caddy"; a
#                      server that is not installed is left out with a note)
#   BENCH_KEEP_TMP     1 keeps the temporary directory and prints its name
#   NGINX_BIN, CADDY_BIN  the servers (default: from PATH, else
#                      /usr/sbin/nginx, /usr/bin/caddy)

BENCH_PROG=fronts.sh
: "${BENCH_CONNECTIONS:=32}"
# shellcheck source=tests/bench/lib-bench.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib-bench.sh"

bench_defaults BENCH_ROUNDS=3 BENCH_PROCS=2 BENCH_THREADS=2 \
    BENCH_NGINX_WORKERS=1 "BENCH_FRONTS=nginx caddy"
NGINX_BIN=${NGINX_BIN:-$(command -v nginx 2>/dev/null || echo /usr/sbin/nginx)}
CADDY_BIN=${CADDY_BIN:-$(command -v caddy 2>/dev/null || echo /usr/bin/caddy)}
LIMIT=1000000000

bench_outputs "${1:-./bench-fronts.md}"
check_counts BENCH_SECONDS BENCH_WARMUP BENCH_ROUNDS BENCH_PROCS BENCH_THREADS \
    BENCH_WRK_THREADS BENCH_CONNECTIONS BENCH_NGINX_WORKERS
need_cmd wrk curl spawn-fcgi awk sort sqlite3 pgrep

FRONTS=()
for f in $BENCH_FRONTS; do
	case $f in
	nginx)
		if [ -x "$NGINX_BIN" ] && "$NGINX_BIN" -V 2>&1 | grep -q -- --with-http_auth_request_module; then
			FRONTS+=(nginx)
		else
			note "nginx (with auth_request) not found (NGINX_BIN=$NGINX_BIN): left out"
		fi
		;;
	caddy)
		if [ -x "$CADDY_BIN" ]; then
			FRONTS+=(caddy)
		else
			note "caddy not found (CADDY_BIN=$CADDY_BIN): left out"
		fi
		;;
	*) die "unknown server \"$f\" in BENCH_FRONTS (nginx, caddy)" ;;
	esac
done
[ ${#FRONTS[@]} -gt 0 ] || die "no server to measure"

# bench_begin without noop (this benchmark does not use it)
[ -x "$RLGATE_BIN" ] || die "rlgate not found or not executable: $RLGATE_BIN (set RLGATE_BIN or RLGATE_BUILDDIR)"
{ : >"$OUT"; } 2>/dev/null || die "cannot write $OUT"
{ : >"$TSV"; } 2>/dev/null || die "cannot write $TSV"
CLK_TCK=$(getconf CLK_TCK 2>/dev/null || echo 100)
bench_tmpdir

# ---- the file and rlgate ------------------------------------------------------

RUN=$BT/rlgate
mkdir -p "$RUN" "$BT/htdocs/direct" "$BT/htdocs/guarded" || die "mkdir failed"
chmod 755 "$RUN" "$BT/htdocs" "$BT/htdocs/direct" "$BT/htdocs/guarded"
for d in direct guarded; do
	echo 'hello, world' >"$BT/htdocs/$d/hello.txt"
	chmod 644 "$BT/htdocs/$d/hello.txt"
done
SOCK=$RUN/rlgate.sock
cat >"$RUN/rlgate.conf" <<EOF
; written by fronts.sh
[store]
path = $RUN/rlgate.db

[headers]
style = draft03

[policy default]
algorithm = fixed_window
limit = $LIMIT
window = 3600
key = ip
EOF
"$RLGATE_BIN" --check-config --config "$RUN/rlgate.conf" >"$RUN/check.out" 2>&1 ||
	die "rlgate rejects its config: $(head -3 "$RUN/check.out")"
# use_backend rlgate|noop: the socket served by rlgate, or by the no-op
# responder (the ceiling of guarding: what the server's own subrequest
# and FastCGI connection cost with an answer that costs nothing), the
# same -F and threads, spawned afresh unless it already serves.
CUR_BACKEND=
use_backend() {
	[ "$1" = "$CUR_BACKEND" ] && return 0
	if [ ${#BACKEND_PIDS[@]} -gt 0 ]; then
		STOP_GRACE_MS=3000 stop_pids "${BACKEND_PIDS[@]}"
		untrack_pid "${BACKEND_PIDS[@]}"
	fi
	rm -f "$SOCK"
	# shellcheck disable=SC2153  # set by bench_defaults
	if [ "$1" = noop ]; then
		spawn_backend noop "$SOCK" "$BENCH_PROCS" 0666 \
		    "$NOOP_BIN" --threads "$BENCH_THREADS"
	else
		spawn_backend rlgate "$SOCK" "$BENCH_PROCS" 0666 \
		    "$RLGATE_BIN" --config "$RUN/rlgate.conf" --threads "$BENCH_THREADS"
	fi
	sleep 0.3
	backends_alive "$1" "exited at start"
	CUR_BACKEND=$1
}
[ -x "$NOOP_BIN" ] || die "noop not found or not executable: $NOOP_BIN (make tests/bench/noop, or set NOOP_BIN)"
use_backend rlgate

# ---- the servers --------------------------------------------------------------------

# launch_nginx PORT SOCKET KEEPCONN WHAT: for lib-bench.sh's start_server.
launch_nginx() {
	mkdir -p "$RUN/tmp"
	cat >"$RUN/nginx.conf" <<EOF
# written by fronts.sh
daemon off;
master_process on;
worker_processes $BENCH_NGINX_WORKERS;
pid $RUN/nginx.pid;
error_log $RUN/nginx-error.log warn;
events {
    worker_connections 1024;
}
http {
    access_log off;
    client_body_temp_path $RUN/tmp/body;
    proxy_temp_path $RUN/tmp/proxy;
    fastcgi_temp_path $RUN/tmp/fastcgi;
    uwsgi_temp_path $RUN/tmp/uwsgi;
    scgi_temp_path $RUN/tmp/scgi;
    default_type text/plain;
    upstream rlgate {
        server unix:$2;
    }
    server {
        listen 127.0.0.1:$1;
        root $BT/htdocs;
        include $RLGATE_SRCDIR/www/nginx/rlgate.conf;
        location /direct/ {
        }
        location /guarded/ {
            include $RLGATE_SRCDIR/www/nginx/guard.conf;
        }
    }
}
EOF
	"$NGINX_BIN" -t -q -e "$RUN/nginx-error.log" -c "$RUN/nginx.conf" \
	    -p "$RUN" >"$RUN/server.out" 2>&1 ||
		die "$4: nginx rejects its config: $(head -3 "$RUN/server.out")"
	"$NGINX_BIN" -e "$RUN/nginx-error.log" -c "$RUN/nginx.conf" \
	    -p "$RUN" </dev/null >>"$RUN/server.out" 2>&1 &
}

# launch_caddy PORT SOCKET KEEPCONN WHAT: the same for Caddy: the shipped
# www/caddy/rlgate.caddy guard (forward_auth's reverse_proxy to rlgate over
# FastCGI, the rate-limit headers copied onto admitted answers), imported
# inside the guarded handle, then file_server.
launch_caddy() {
	mkdir -p "$RUN/caddy"
	cat >"$RUN/Caddyfile" <<EOF
# written by fronts.sh
{
	admin off
	auto_https off
	storage file_system $RUN/caddy
	log {
		output file $RUN/caddy.log
		level ERROR
	}
}
import $RLGATE_SRCDIR/www/caddy/rlgate.caddy
http://127.0.0.1:$1 {
	bind 127.0.0.1
	root * $BT/htdocs
	handle /guarded/* {
		import rlgate unix/$2
		file_server
	}
	handle {
		file_server
	}
}
EOF
	HOME=$RUN/caddy XDG_DATA_HOME=$RUN/caddy XDG_CONFIG_HOME=$RUN/caddy \
	    "$CADDY_BIN" validate --adapter caddyfile --config "$RUN/Caddyfile" \
	    >"$RUN/server.out" 2>&1 ||
		die "$4: caddy rejects its config: $(grep -i error "$RUN/server.out" | head -3)"
	HOME=$RUN/caddy XDG_DATA_HOME=$RUN/caddy XDG_CONFIG_HOME=$RUN/caddy \
	    "$CADDY_BIN" run --adapter caddyfile --config "$RUN/Caddyfile" \
	    </dev/null >>"$RUN/server.out" 2>&1 &
}

# known_client ADDR: true once rlgate's database holds a state for client
# ADDR (the decision table flushed first by a --reset of a client no one
# is, as tests/integration/lib.sh's flush_table does).
known_client() {
	"$RLGATE_BIN" --config "$RUN/rlgate.conf" --reset flush.barrier >/dev/null 2>&1
	[ "$(sqlite3 -cmd '.timeout 5000' "$RUN/rlgate.db" \
	    "SELECT COUNT(*) FROM rlg_state WHERE client = '$1';" 2>/dev/null)" -ge 1 ]
}

# counted_check SERVER BASE CLIENT: the direct and the guarded file are
# served, and the guarded one, asked from CLIENT (an address of 127/8),
# was counted by rlgate (nginx passes the RateLimit headers on, too).
counted_check() {
	local hdr=$RUN/check.headers got
	got=$(curl -sS --max-time 5 -o /dev/null -w '%{http_code}' "$2/direct/hello.txt" 2>&1)
	[ "$got" = 200 ] || die "$1: expected 200 from $2/direct/hello.txt, got $got"
	got=$(curl -sS --max-time 5 --interface "$3" -D "$hdr" -o "$RUN/check.body" \
	    -w '%{http_code}' "$2/guarded/hello.txt" 2>"$RUN/check.err") ||
		die "$1: curl $2/guarded/hello.txt failed: $(cat "$RUN/check.err")"
	if [ "$got" != 200 ] || [ "$(cat "$RUN/check.body")" != 'hello, world' ]; then
		die "$1: expected 200 and the file from $2/guarded/hello.txt, got $got: $(head -c 300 "$RUN/check.body"); rlgate: $(tail -n 2 "$RUN/backend.log")"
	fi
	if [ "$1" = nginx ]; then
		grep -qi "^RateLimit-Limit: $LIMIT" "$hdr" ||
			die "$1: the guarded answer has no RateLimit-Limit: $LIMIT: is rlgate asked?"
	fi
	known_client "$3" ||
		die "$1: rlgate did not count the guarded request from $3: is it asked? $(tail -n 2 "$RUN/backend.log")"
}

# ---- the runs --------------------------------------------------------------------

ncheck=0
runs_begin
note "servers: ${FRONTS[*]}; $BENCH_ROUNDS rounds of direct + guarded, ${BENCH_SECONDS} s each (+ ${BENCH_WARMUP} s warm-up); load average $load_start"
for server in "${FRONTS[@]}"; do
	use_backend rlgate
	start_server "$server" "$SOCK" off "$server"
	[ "$server" = nginx ] && add_nginx_workers
	base=http://127.0.0.1:$port
	ncheck=$((ncheck + 1))
	counted_check "$server" "$base" "127.0.0.$((ncheck + 1))"
	for round in $(seq 1 "$BENCH_ROUNDS"); do
		for kind in direct guarded noop; do
			what="$server $kind round $round"
			case $kind in
			guarded) use_backend rlgate ;;
			noop) use_backend noop ;;
			esac
			url_kind=$kind
			[ "$kind" = noop ] && url_kind=guarded
			wrk_run "$what" "$base/$url_kind/hello.txt"
			read_wrk "$what" 2xx
			runs_row "$server" "$kind" "$round" "$WRK_RPS" "$WRK_P50_MS" \
			    "$WRK_P99_MS" "$WRK_REQUESTS" "$WRK_NON2XX" "$WRK_SOCKERR" \
			    "$CPU_SERVER" "$CPU_BACKEND" "$CPU_WRK"
			note "$what: $WRK_RPS req/s, p50 $WRK_P50_MS ms, p99 $WRK_P99_MS ms"
		done
	done
	# stop the server only; rlgate serves the next one
	STOP_GRACE_MS=3000 stop_pids "$SERVER_PID"
	untrack_pid "$SERVER_PID"
	SERVER_PID=''
	SERVER_PIDS=()
done
runs_end

# ---- the report ------------------------------------------------------------------

col() {   # col SERVER KIND FIELD: that field of every matching run
	awk -F'\t' -v sv="$1" -v k="$2" -v f="$3" '$1 == sv && $2 == k { print $f }' "$BT/runs.tsv"
}
ratios() {   # ratios SERVER FIELD [A B]: per round, A / B (guarded / direct)
	awk -F'\t' -v sv="$1" -v f="$2" -v a="${3:-guarded}" -v b="${4:-direct}" '
		$1 == sv && $2 == a { g[$3] = $f }
		$1 == sv && $2 == b { d[$3] = $f }
		END { for (r in g) if (r in d && d[r] > 0) printf "%.6f\n", g[r] / d[r] }' \
	    "$BT/runs.tsv"
}
added() {   # added SERVER: per round, guarded p50 - direct p50 (ms)
	awk -F'\t' -v sv="$1" '
		$1 == sv && $2 == "guarded" { g[$3] = $5 }
		$1 == sv && $2 == "direct" { d[$3] = $5 }
		END { for (r in g) if (r in d) printf "%.6f\n", g[r] - d[r] }' \
	    "$BT/runs.tsv"
}
fmt0() { awk -v v="$1" 'BEGIN { printf "%.0f", v }'; }
fmt2() { awk -v v="$1" 'BEGIN { printf "%.2f", v }'; }
med() {   # med SERVER KIND FIELD
	# shellcheck disable=SC2046
	median $(col "$1" "$2" "$3")
}

nginx_v=$("$NGINX_BIN" -v 2>&1 | head -1)
caddy_v=$("$CADDY_BIN" version 2>/dev/null | awk '{ print "caddy " $1 }')
R=$BT/report.md
{
	echo "# rlgate guarding a static file: nginx auth_request, Caddy forward_auth"
	echo
	echo "The same server serving the same 13-byte file directly, guarded by"
	echo "rlgate (asked first, over FastCGI, for every request) and guarded by the"
	echo "no-op FastCGI responder on the same socket (the ceiling of guarding: what"
	echo "the server's own subrequest and FastCGI connection cost, with an answer"
	echo "that costs nothing); runs alternated direct, guarded, no-op, ...; medians"
	echo "over $BENCH_ROUNDS rounds; each ratio is the median of the per-round ratios;"
	echo "added p50: the median of the per-round guarded p50 - direct p50."
	echo
	echo "| server | direct req/s | guarded req/s | guarded / direct | no-op guarded req/s | no-op / direct | guarded / no-op | added p50 ms | direct p50 ms | p99 ms | guarded p50 ms | p99 ms |"
	echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
	for server in "${FRONTS[@]}"; do
		# shellcheck disable=SC2046
		printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$server" \
		    "$(fmt0 "$(med "$server" direct 4)")" \
		    "$(fmt0 "$(med "$server" guarded 4)")" \
		    "$(fmt2 "$(median $(ratios "$server" 4))")" \
		    "$(fmt0 "$(med "$server" noop 4)")" \
		    "$(fmt2 "$(median $(ratios "$server" 4 noop direct))")" \
		    "$(fmt2 "$(median $(ratios "$server" 4 guarded noop))")" \
		    "$(fmt2 "$(median $(added "$server"))")" \
		    "$(fmt2 "$(med "$server" direct 5)")" \
		    "$(fmt2 "$(med "$server" direct 6)")" \
		    "$(fmt2 "$(med "$server" guarded 5)")" \
		    "$(fmt2 "$(med "$server" guarded 6)")"
	done
	echo
	echo "## Every run"
	echo
	echo "CPU: % of one core used during the measured run by the web server"
	echo "(nginx: master + workers), by the FastCGI workers together (rlgate's,"
	echo "or the no-op's in the no-op runs), and by wrk."
	echo
	echo "| server | kind | round | req/s | p50 ms | p99 ms | requests | non-2xx | socket errors | server CPU % | FastCGI CPU % | wrk CPU % |"
	echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
	awk -F'\t' '{ printf "| %s | %s | %s | %.0f | %.2f | %.2f | %s | %s | %s | %s | %s | %s |\n",
	    $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12 }' "$BT/runs.tsv"
	echo
	echo "## Machine and parameters"
	echo
	machine_line
	echo "- software: $nginx_v; ${caddy_v:-caddy (not run)}; $wrk_v; $rlgate_version"
	echo "- started $started; $BENCH_ROUNDS rounds per server, ${BENCH_SECONDS} s measured after ${BENCH_WARMUP} s of warm-up per run"
	echo "- wrk -t$BENCH_WRK_THREADS -c$BENCH_CONNECTIONS -d${BENCH_SECONDS}s --latency http://127.0.0.1:PORT/{direct,guarded}/hello.txt (one client address)"
	echo "- rlgate: spawn-fcgi -F $BENCH_PROCS, --threads $BENCH_THREADS, one unix socket for both servers, SQLite in a temporary directory (commit auto), [headers] style = draft03, one fixed_window policy of $LIMIT per 3600 s"
	echo "- nginx: worker_processes $BENCH_NGINX_WORKERS, access_log off, www/nginx/rlgate.conf + guard.conf (auth_request, a new FastCGI connection per request)"
	echo "- caddy: admin off, auto_https off, file_server; guarded: the shipped www/caddy/rlgate.caddy guard (import rlgate unix/SOCKET: forward_auth's reverse_proxy with transport fastcgi, RLGATE_ROLE forward_auth, the rate-limit headers copied onto the answer)"
} >"$R"

publish "$R" 1-6 server kind round reqs_per_s p50_ms p99_ms
note "wrote $OUT and $TSV"
