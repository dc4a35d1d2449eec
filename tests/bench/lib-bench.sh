# shellcheck shell=bash
# tests/bench/lib-bench.sh: helpers for the end-to-end benchmark (e2e.sh).
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
