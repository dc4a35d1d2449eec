# shellcheck shell=bash
# tests/bench/lib-bench.sh: helpers for the benchmarks behind a web server
# (e2e.sh, ceiling.sh): the checks and outputs, one run's backend
# (spawn-fcgi), web server (lighttpd; nginx through the script's
# launch_nginx), check, wrk runs and CPU accounting, and the report's
# common parts.
#
# Sourced, not run. Unlike tests/integration/lib.sh this prints no TAP: a
# benchmark either produces its tables or stops with one clear error line
# (die). The process handling follows lib.sh: every server is recorded by
# pid and stopped on exit, ports are picked free on 127.0.0.1, and every
# wait is bounded.

set -u
export LC_ALL=C
PATH=$PATH:/usr/local/sbin:/usr/sbin:/sbin

# now_ms, pid_alive, free_port, the bounded waits: shared with lib.sh
# shellcheck source=tests/lib-proc.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib-proc.sh" || {
	echo "$(basename "$0"): error: cannot read tests/lib-proc.sh" >&2
	exit 1
}

BENCH_PROG=${BENCH_PROG:-$(basename "$0")}
_bench_pids=()
BT=

# die MESSAGE...: one error line on stderr, exit 1 (the EXIT trap stops
# every server still running).
die() {
	echo "$BENCH_PROG: error: $*" >&2
	[ -z "$BT" ] || [ "${BENCH_KEEP_TMP:-0}" = 1 ] ||
		echo "$BENCH_PROG: (BENCH_KEEP_TMP=1 keeps the configs and logs)" >&2
	exit 1
}

# note MESSAGE...: a progress line on stderr (stdout carries the tables).
note() {
	echo "$BENCH_PROG: $*" >&2
}

# need_cmd CMD...: dies unless every command exists.
need_cmd() {
	local c
	for c in "$@"; do
		command -v "$c" >/dev/null 2>&1 || die "required command not found: $c"
	done
}

# track_pid PID...: stopped by pid on exit.
track_pid() {
	_bench_pids+=("$@")
}

# untrack_pid PID...: no longer stopped on exit (once stopped: the pid may
# be reused by some other process later).
untrack_pid() {
	local p q keep=()
	for p in "${_bench_pids[@]}"; do
		for q in "$@"; do
			[ "$p" = "$q" ] && continue 2
		done
		keep+=("$p")
	done
	_bench_pids=("${keep[@]}")
}

# stop_pids PID...: SIGTERM, up to STOP_GRACE_MS (default 3000) ms to go,
# then SIGKILL; reaps those that are our children. Bounded.
stop_pids() {
	local p alive deadline
	[ $# -gt 0 ] || return 0
	for p in "$@"; do
		pid_alive "$p" && kill -TERM "$p" 2>/dev/null
	done
	deadline=$(($(now_ms) + ${STOP_GRACE_MS:-3000}))
	while :; do
		alive=0
		for p in "$@"; do
			pid_alive "$p" && alive=1
		done
		[ $alive -eq 0 ] && break
		[ "$(now_ms)" -ge "$deadline" ] && break
		sleep 0.02
	done
	for p in "$@"; do
		pid_alive "$p" && kill -KILL "$p" 2>/dev/null
	done
	for p in "$@"; do
		wait "$p" 2>/dev/null
	done
	return 0
}

_bench_cleanup() {
	local rc=$?
	trap - EXIT INT TERM HUP
	stop_and_remove "${BENCH_KEEP_TMP:-0}" "$BT" "${_bench_pids[@]}" ||
		note "kept temporary directory $BT"
	exit $rc
}
trap_exit _bench_cleanup

# bench_tmpdir: sets BT to a new temporary directory, mode 755 (nginx
# workers run as nobody and must reach the sockets inside), removed on exit.
bench_tmpdir() {
	BT=$(mktemp -d "${TMPDIR:-/tmp}/rlgate-bench.XXXXXX") || die "mktemp -d failed"
	chmod 755 "$BT" || die "chmod $BT failed"
	[ -x "$(dirname "$BT")" ] || die "$(dirname "$BT") is not traversable"
}

# cpu_ticks PID...: prints the user + system clock ticks the processes
# have used so far (0 for one that is gone). Divide by CLK_TCK.
cpu_ticks() {
	local p line rest sum=0
	local -a f
	for p in "$@"; do
		line=
		{ read -r line <"/proc/$p/stat"; } 2>/dev/null
		[ -n "$line" ] || continue
		rest=${line##*) }         # after "(comm) ": state is field 3
		read -r -a f <<<"$rest"
		sum=$((sum + f[11] + f[12]))   # utime, stime: fields 14, 15
	done
	echo "$sum"
}

# children_ticks: the user + system ticks of this shell's waited-for
# children so far (cutime + cstime of /proc/$$/stat).
children_ticks() {
	local line rest
	local -a f
	read -r line <"/proc/$$/stat"
	rest=${line##*) }
	read -r -a f <<<"$rest"
	echo $((f[13] + f[14]))           # cutime, cstime: fields 16, 17
}

# rss_kb PID: VmRSS of PID in kB (empty if gone).
rss_kb() {
	awk '$1 == "VmRSS:" { print $2 }' "/proc/$1/status" 2>/dev/null
}

# file_size PATH: bytes, 0 if absent.
file_size() {
	if [ -e "$1" ]; then stat -c %s "$1"; else echo 0; fi
}

# median NUMBER...: the median (the mean of the two middle ones for an even
# count), printed with %.6g precision kept by awk.
median() {
	printf '%s\n' "$@" | sort -g | awk '
		{ v[NR] = $1 }
		END {
			if (NR == 0) exit 1
			if (NR % 2) print v[(NR + 1) / 2]
			else printf "%.6f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2
		}'
}

# wrk_ms VALUE: a wrk duration ("812.00us", "1.07ms", "2.01s", "1.00m")
# in milliseconds, 3 decimals.
wrk_ms() {
	awk -v v="$1" 'BEGIN {
		if (v ~ /us$/)      { sub(/us$/, "", v); printf "%.3f\n", v / 1000 }
		else if (v ~ /ms$/) { sub(/ms$/, "", v); printf "%.3f\n", v }
		else if (v ~ /m$/)  { sub(/m$/, "", v);  printf "%.3f\n", v * 60000 }
		else if (v ~ /s$/)  { sub(/s$/, "", v);  printf "%.3f\n", v * 1000 }
		else exit 1
	}'
}

# parse_wrk FILE: sets WRK_RPS, WRK_P50_MS, WRK_P99_MS, WRK_REQUESTS,
# WRK_NON2XX (0 if wrk printed none) and WRK_SOCKERR (the sum of connect,
# read, write and timeout errors) from wrk --latency output; fails if a
# value is missing.
parse_wrk() {
	local file=$1 v
	WRK_RPS=$(awk '$1 == "Requests/sec:" { print $2 }' "$file")
	v=$(awk '$1 == "50%" { print $2 }' "$file")
	WRK_P50_MS=$(wrk_ms "$v" 2>/dev/null)
	v=$(awk '$1 == "99%" { print $2 }' "$file")
	WRK_P99_MS=$(wrk_ms "$v" 2>/dev/null)
	WRK_REQUESTS=$(awk '$2 == "requests" && $3 == "in" { print $1 }' "$file")
	WRK_NON2XX=$(awk '/Non-2xx or 3xx responses:/ { print $NF }' "$file")
	: "${WRK_NON2XX:=0}"
	WRK_SOCKERR=$(awk '/Socket errors:/ {
		gsub(/,/, ""); print $4 + $6 + $8 + $10 }' "$file")
	: "${WRK_SOCKERR:=0}"
	[[ $WRK_RPS =~ ^[0-9]+(\.[0-9]+)?$ ]] &&
	    [[ $WRK_P50_MS =~ ^[0-9]+\.[0-9]+$ ]] &&
	    [[ $WRK_P99_MS =~ ^[0-9]+\.[0-9]+$ ]] &&
	    [[ $WRK_REQUESTS =~ ^[0-9]+$ ]]
}

# ---- set-up --------------------------------------------------------------------

# bench_defaults VAR=VALUE...: sets every VAR that is unset or empty to
# VALUE (as : "${VAR:=VALUE}" would).
bench_defaults() {
	local a n
	for a in "$@"; do
		n=${a%%=*}
		[ -n "${!n:-}" ] || printf -v "$n" '%s' "${a#*=}"
	done
}

# The defaults both scripts share (set before sourcing to override; the
# rest, BENCH_PAIRS say, each script sets itself).
: "${RLGATE_SRCDIR:=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
: "${RLGATE_BUILDDIR:=$RLGATE_SRCDIR}"
: "${RLGATE_BIN:=$RLGATE_BUILDDIR/app/rlgate}"
: "${NOOP_BIN:=$RLGATE_BUILDDIR/tests/bench/noop}"
bench_defaults BENCH_SECONDS=5 BENCH_WARMUP=1 BENCH_WRK_THREADS=2 \
    BENCH_CONNECTIONS=16
LIGHTTPD_BIN=${LIGHTTPD_BIN:-$(command -v lighttpd 2>/dev/null || echo /usr/sbin/lighttpd)}
# shellcheck disable=SC2034  # for the sourcing script
URL_PATH=/api/v1/resources

# bench_outputs OUTFILE: sets OUT to OUTFILE and TSV to it with .md
# replaced by (or followed by) .tsv.
bench_outputs() {
	OUT=$1
	case $OUT in
	*.md) TSV=${OUT%.md}.tsv ;;
	*) TSV=$OUT.tsv ;;
	esac
}

# check_counts VAR...: dies unless every VAR holds an integer from 1 to
# 9999, or unless BENCH_CONNECTIONS is at least BENCH_WRK_THREADS.
check_counts() {
	local v
	for v in "$@"; do
		[[ ${!v} =~ ^[1-9][0-9]{0,3}$ ]] ||
			die "$v must be an integer from 1 to 9999 (got \"${!v}\")"
	done
	[ "$BENCH_CONNECTIONS" -ge "$BENCH_WRK_THREADS" ] ||
		die "BENCH_CONNECTIONS ($BENCH_CONNECTIONS) must be at least BENCH_WRK_THREADS ($BENCH_WRK_THREADS)"
}

# bench_begin: the last checks (rlgate and noop there, OUT and TSV
# writable), then CLK_TCK and the temporary directory BT.
bench_begin() {
	[ -x "$RLGATE_BIN" ] || die "rlgate not found or not executable: $RLGATE_BIN (set RLGATE_BIN or RLGATE_BUILDDIR)"
	[ -x "$NOOP_BIN" ] || die "noop not found or not executable: $NOOP_BIN (make tests/bench/noop, or set NOOP_BIN)"
	{ : >"$OUT"; } 2>/dev/null || die "cannot write $OUT"
	{ : >"$TSV"; } 2>/dev/null || die "cannot write $TSV"
	CLK_TCK=$(getconf CLK_TCK 2>/dev/null || echo 100)
	bench_tmpdir
}

# ---- one run ---------------------------------------------------------------------
#
# A run works in its directory RUN. Its processes: SERVER_PID (the web
# server; SERVER_PIDS, it and its workers, for the CPU accounting),
# BACKEND_PIDS and REDIS_PID (e2e.sh's _redis scenarios); all tracked,
# stopped by stop_run.

SERVER_PID=
SERVER_PIDS=()
BACKEND_PIDS=()
REDIS_PID=

# spawn_backend WHAT SOCKET PROCS MODE CMD [ARGS...]: spawn-fcgi -F PROCS of
# CMD on the unix socket SOCKET (mode MODE), its stderr in
# $RUN/backend.log; sets BACKEND_PIDS. Dies unless PROCS workers started
# and the socket is there.
spawn_backend() {
	local what=$1 sock=$2 procs=$3 mode=$4 rc p
	shift 4
	# spawn-fcgi points the workers' stderr at /dev/null: a /bin/sh
	# wrapper keeps it and execs the backend (same pid). The pids it wrote
	# are tracked before its status is looked at, so a partial start
	# leaves nothing running.
	# shellcheck disable=SC2016
	spawn-fcgi -s "$sock" -M "$mode" -F "$procs" -P "$RUN/backend.pid" \
	    -- /bin/sh -c 'log=$1; shift; exec "$@" 2>>"$log"' backend-log \
	    "$RUN/backend.log" "$@" </dev/null >"$RUN/spawn.log" 2>&1
	rc=$?
	BACKEND_PIDS=()
	if [ -r "$RUN/backend.pid" ]; then
		while read -r p || [ -n "$p" ]; do
			[[ $p =~ ^[0-9]+$ ]] || continue
			BACKEND_PIDS+=("$p")
			track_pid "$p"
		done <"$RUN/backend.pid"
	fi
	[ "$rc" -eq 0 ] || die "$what: spawn-fcgi failed: $(tail -3 "$RUN/spawn.log"); backend log: $(tail -3 "$RUN/backend.log" 2>/dev/null)"
	[ ${#BACKEND_PIDS[@]} -eq "$procs" ] ||
		die "$what: spawn-fcgi -F $procs wrote ${#BACKEND_PIDS[@]} pids"
	[ -S "$sock" ] || die "$what: no socket at $sock"
}

# backends_alive WHAT WHEN: dies, saying "backend pid P WHEN", if a
# backend worker is gone.
backends_alive() {
	local p
	for p in "${BACKEND_PIDS[@]}"; do
		pid_alive "$p" || die "$1: backend pid $p $2: $(tail -3 "$RUN/backend.log")"
	done
}

# stop_run: stops the web server, the backend and the redis-server of the
# current run.
stop_run() {
	local pids=()
	[ -n "${SERVER_PID:-}" ] && pids+=("$SERVER_PID")
	[ ${#BACKEND_PIDS[@]} -gt 0 ] && pids+=("${BACKEND_PIDS[@]}")
	[ -n "${REDIS_PID:-}" ] && pids+=("$REDIS_PID")
	STOP_GRACE_MS=3000 stop_pids "${pids[@]}"
	untrack_pid "${pids[@]}"
	SERVER_PID=''
	SERVER_PIDS=()
	BACKEND_PIDS=()
	REDIS_PID=''
}

# write_lighttpd_conf FILE DIR PORT SOCKET: lighttpd 1.4 defaults but for
# these lines; no mod_accesslog, so no access log. The mount is the one of
# www/lighttpd/rlgate.conf.
write_lighttpd_conf() {
	mkdir -p "$2/htdocs"
	write_lighttpd_base "$1" "$3" "$2/htdocs" "$2/lighttpd.pid" "$2/lighttpd-error.log" <<EOF
server.upload-dirs   = ( "$2" )
server.modules      += ( "mod_fastcgi" )
fastcgi.server       = (
    "/api/" => ((
        "socket"      => "$4",
        "check-local" => "disable",
    ))
)
EOF
}

# launch_lighttpd PORT SOCKET KEEPCONN WHAT: writes $RUN/lighttpd.conf
# (KEEPCONN unused), dies if lighttpd rejects it, starts lighttpd in the
# background (its pid in $!). A script's launch_nginx does the same for
# nginx.
launch_lighttpd() {
	write_lighttpd_conf "$RUN/lighttpd.conf" "$RUN" "$1" "$2"
	"$LIGHTTPD_BIN" -tt -f "$RUN/lighttpd.conf" >"$RUN/server.out" 2>&1 ||
		die "$4: lighttpd rejects its config: $(head -3 "$RUN/server.out")"
	"$LIGHTTPD_BIN" -D -f "$RUN/lighttpd.conf" </dev/null >>"$RUN/server.out" 2>&1 &
}

# start_server SERVER SOCKET KEEPCONN WHAT: SERVER (lighttpd, or nginx)
# on a free port of 127.0.0.1, in the background (launch_SERVER); sets
# SERVER_PID, SERVER_PIDS and port. A port taken between the choice and
# the bind (by a client's ephemeral port, say) is retried with another
# one, up to 3 times.
start_server() {
	local server=$1 sock=$2 keepconn=$3 what=$4 try
	for try in 1 2 3; do
		port=$(free_port) || die "no free port on 127.0.0.1"
		"launch_$server" "$port" "$sock" "$keepconn" "$what"
		SERVER_PID=$!
		SERVER_PIDS=("$SERVER_PID")
		track_pid "$SERVER_PID"
		wait_for_port "$port" 10 "$SERVER_PID" && return 0
		STOP_GRACE_MS=2000 stop_pids "$SERVER_PID"
		untrack_pid "$SERVER_PID"
		SERVER_PID=''
		SERVER_PIDS=()
		grep -qs 'in use' "$RUN/server.out" "$RUN"/*error.log || break
		note "$what: port $port was taken before $server could bind it (try $try); another one"
		rm -f "$RUN"/*error.log
	done
	die "$what: $server did not listen on 127.0.0.1:$port: $(tail -3 "$RUN/server.out"; tail -3 "$RUN"/*error.log 2>/dev/null)"
}

# add_nginx_workers: adds the workers of the nginx master SERVER_PID (by
# parent pid, once BENCH_NGINX_WORKERS are up) to SERVER_PIDS.
add_nginx_workers() {
	local spid=() _
	for _ in $(seq 1 100); do
		mapfile -t spid < <(pgrep -P "$SERVER_PID")
		[ ${#spid[@]} -ge "$BENCH_NGINX_WORKERS" ] && break
		sleep 0.02
	done
	SERVER_PIDS+=("${spid[@]}")
}

# check_answer URL BACKEND EXPECT WHAT [CURL_ARGS...]: one curl; dies
# unless the status is EXPECT and the answer comes from BACKEND (rlgate:
# a RateLimit-Limit header, and a Retry-After on a 429; any other, noop's
# or naive's X-Noop-Limit-00).
check_answer() {
	local url=$1 backend=$2 want=$3 what=$4 got hdr="$RUN/check.headers"
	shift 4
	got=$(curl -sS --max-time 5 "$@" -D "$hdr" -o "$RUN/check.body" \
	    -w '%{http_code}' "$url" 2>"$RUN/check.err") ||
		die "$what: curl $url failed: $(cat "$RUN/check.err")"
	[ "$got" = "$want" ] ||
		die "$what: expected HTTP $want from $url, got $got: $(head -c 300 "$RUN/check.body"); backend log: $(tail -n 2 "$RUN/backend.log" 2>/dev/null); server log: $(tail -n 2 "$RUN"/*error.log 2>/dev/null)"
	if [ "$backend" = rlgate ]; then
		grep -qi '^RateLimit-Limit:' "$hdr" ||
			die "$what: the $got from $url has no RateLimit-Limit header: is it rlgate?"
		if [ "$want" = 429 ]; then
			grep -qi '^Retry-After:' "$hdr" ||
				die "$what: the 429 from $url has no Retry-After"
		fi
	else
		grep -qi '^X-Noop-Limit-00:' "$hdr" ||
			die "$what: the answer from $url has no X-Noop-Limit-00 header: is it $backend?"
	fi
}

# cpu_pct TICKS0 TICKS1: the ticks between as % of one core over WALL_MS.
cpu_pct() {
	awk -v a="$1" -v b="$2" -v hz="$CLK_TCK" -v ms="$WALL_MS" \
	    'BEGIN { printf "%.0f", (b - a) / hz / (ms / 1000) * 100 }'
}

# wrk_run WHAT URL [WRK_ARGS...]: the warm-up (BENCH_WARMUP s, discarded),
# then the measured wrk --latency run (BENCH_SECONDS s) into $RUN/wrk.out,
# each bounded by timeout(1); dies if wrk fails or a backend worker died.
# Sets WALL_MS and the CPU used during the measured run, in % of one core:
# CPU_SERVER (SERVER_PIDS), CPU_BACKEND (BACKEND_PIDS), CPU_WRK (this
# shell's children) and CPU_REDIS (REDIS_PID; "-" without).
# shellcheck disable=SC2034  # for the sourcing script
wrk_run() {
	local what=$1 url=$2 t0 t1 s0 s1 b0 b1 w0 w1 r0=0 r1=0
	shift 2
	timeout -k 5 $((BENCH_WARMUP + 30)) wrk -t"$BENCH_WRK_THREADS" \
	    -c"$BENCH_CONNECTIONS" -d"${BENCH_WARMUP}s" "$@" \
	    "$url" >"$RUN/warmup.out" 2>&1 ||
		die "$what: the warm-up wrk failed: $(tail -3 "$RUN/warmup.out")"

	s0=$(cpu_ticks "${SERVER_PIDS[@]}")
	b0=$(cpu_ticks "${BACKEND_PIDS[@]}")
	w0=$(children_ticks)
	[ -n "$REDIS_PID" ] && r0=$(cpu_ticks "$REDIS_PID")
	t0=$(now_ms)
	timeout -k 5 $((BENCH_SECONDS + 30)) wrk -t"$BENCH_WRK_THREADS" \
	    -c"$BENCH_CONNECTIONS" -d"${BENCH_SECONDS}s" --latency \
	    "$@" "$url" >"$RUN/wrk.out" 2>&1 ||
		die "$what: wrk failed: $(tail -3 "$RUN/wrk.out")"
	t1=$(now_ms)
	s1=$(cpu_ticks "${SERVER_PIDS[@]}")
	b1=$(cpu_ticks "${BACKEND_PIDS[@]}")
	w1=$(children_ticks)
	[ -n "$REDIS_PID" ] && r1=$(cpu_ticks "$REDIS_PID")
	backends_alive "$what" "died during the run"

	WALL_MS=$((t1 - t0))
	[ "$WALL_MS" -gt 0 ] || WALL_MS=1
	CPU_SERVER=$(cpu_pct "$s0" "$s1")
	CPU_BACKEND=$(cpu_pct "$b0" "$b1")
	CPU_WRK=$(cpu_pct "$w0" "$w1")
	CPU_REDIS=-
	[ -n "$REDIS_PID" ] && CPU_REDIS=$(cpu_pct "$r0" "$r1")
	return 0
}

# read_wrk WHAT WANT(2xx|429): parse_wrk of $RUN/wrk.out (dies if it
# cannot), then a warning for every answer not WANT and for socket errors.
read_wrk() {
	parse_wrk "$RUN/wrk.out" ||
		die "$1: cannot read wrk's output: $(cat "$RUN/wrk.out")"
	if [ "$2" = 429 ]; then
		[ "$WRK_NON2XX" -eq "$WRK_REQUESTS" ] ||
			note "WARNING: $1: $((WRK_REQUESTS - WRK_NON2XX)) of $WRK_REQUESTS answers were not 429"
	elif [ "$WRK_NON2XX" -ne 0 ]; then
		note "WARNING: $1: $WRK_NON2XX of $WRK_REQUESTS answers were not 2xx"
	fi
	[ "$WRK_SOCKERR" -eq 0 ] || note "WARNING: $1: $WRK_SOCKERR socket errors"
}

# runs_row FIELD...: one row, tab-separated, appended to $BT/runs.tsv.
runs_row() {
	local IFS=$'\t'
	printf '%s\n' "$*" >>"$BT/runs.tsv"
}

# ---- the runs and the report -------------------------------------------------------

# runs_begin: the start (load_start, started, t_start) and an empty
# $BT/runs.tsv.
# shellcheck disable=SC2034  # for the sourcing script
runs_begin() {
	load_start=$(cut -d' ' -f1-3 /proc/loadavg)
	started=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
	t_start=$(now_ms)
	: >"$BT/runs.tsv"
}

# runs_end: the end (load_end; elapsed_s since runs_begin), and what the
# report says of the machine and the software (rlgate_version, cpu_model,
# lighttpd_v, wrk_v).
# shellcheck disable=SC2034  # for the sourcing script
runs_end() {
	load_end=$(cut -d' ' -f1-3 /proc/loadavg)
	elapsed_s=$((($(now_ms) - t_start) / 1000))
	rlgate_version=$("$RLGATE_BIN" --version 2>/dev/null | head -1)
	cpu_model=$(awk -F': *' '$1 ~ /^model name/ { print $2; exit }' /proc/cpuinfo)
	lighttpd_v=$("$LIGHTTPD_BIN" -v 2>&1 | head -1)
	wrk_v=$(wrk -v 2>&1 | head -1 | awk '{ print $1, $2 }')
}

# machine_line: the report's line on the machine and its load.
machine_line() {
	echo "- machine: $(nproc) CPUs, $cpu_model; load average $load_start at the start, $load_end at the end"
}

# publish REPORT FIELDS COLUMN...: REPORT to OUT and stdout; to TSV, a
# header line ("# " and the COLUMNs) and the FIELDS (cut -f) of every run.
publish() {
	local report=$1 fields=$2 IFS=$'\t'
	shift 2
	cp "$report" "$OUT" || die "cannot write $OUT"
	{
		printf '# %s\n' "$*"
		cut -f "$fields" "$BT/runs.tsv"
	} >"$TSV" || die "cannot write $TSV"
	cat "$report"
}
