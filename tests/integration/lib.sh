# tests/integration/lib.sh: shared helpers for rlgate's integration tests.
#
# Sourced by the bash scripts beside it. They print TAP (run by automake's
# tap-driver.sh under `make check`, or directly by hand):
#
#     RLGATE_BIN=$PWD/app/rlgate RLGATE_SRCDIR=$PWD RLGATE_BUILDDIR=$PWD \
#         bash tests/integration/lighttpd.sh
#
# Environment (set by `make check`):
#   RLGATE_BIN        absolute path of app/rlgate (default: BUILDDIR/app/rlgate)
#   RLGATE_SRCDIR     the source tree (www/ configs, this file; default: the
#                     tree the script is in)
#   RLGATE_BUILDDIR   the build tree (default: RLGATE_SRCDIR)
#   RLGATE_KEEP_TMP   if set to 1, the temporary directory is kept (for a
#                     post-mortem) and its name printed
#
# Every server a script starts is recorded by pid and stopped on exit; all
# traffic goes to 127.0.0.0/8; every wait is bounded.
#
# Variables set here (STATUS, BODY, ...) are read by the sourcing scripts.
# shellcheck disable=SC2034

set -u

: "${RLGATE_SRCDIR:?RLGATE_SRCDIR must be the source tree}"
: "${RLGATE_BUILDDIR:=$RLGATE_SRCDIR}"
: "${RLGATE_BIN:=$RLGATE_BUILDDIR/app/rlgate}"
export RLGATE_SRCDIR RLGATE_BUILDDIR RLGATE_BIN
export LC_ALL=C
# lighttpd, apache2 and spawn-fcgi live in sbin directories
PATH=$PATH:/usr/local/sbin:/usr/sbin:/sbin

# now_ms, pid_alive, free_port, the bounded waits: shared with the benchmarks
# shellcheck source=tests/lib-proc.sh
. "$RLGATE_SRCDIR/tests/lib-proc.sh" || { echo "Bail out! cannot read tests/lib-proc.sh"; exit 99; }

# The start of every rlgate log line (ERE, no anchor): the time, RFC 3339
# in UTC with milliseconds, then "rlgate[PID]: ".
LOG_RE='[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z rlgate\[[0-9]+\]: '

CURL_MAX_TIME=${CURL_MAX_TIME:-10}
APACHE_BIN=${APACHE_BIN:-/usr/sbin/apache2}
APACHE_MODULES=${APACHE_MODULES:-/usr/lib/apache2/modules}
LIGHTTPD_BIN=${LIGHTTPD_BIN:-$(command -v lighttpd 2>/dev/null || echo /usr/sbin/lighttpd)}

# ---- TAP --------------------------------------------------------------------

_tap_n=0
_tap_failed=0
_tap_done=0

# pass DESC: a passing test.
pass() {
	_tap_n=$((_tap_n + 1))
	echo "ok $_tap_n - $1"
}

# fail DESC [DIAG...]: a failing test, with diagnostic lines.
fail() {
	local d=$1
	shift
	_tap_n=$((_tap_n + 1))
	_tap_failed=$((_tap_failed + 1))
	echo "not ok $_tap_n - $d"
	local line
	for line in "$@"; do
		diag "$line"
	done
}

# diag TEXT...: TAP comment lines (each input line prefixed with "# ").
diag() {
	local IFS=$'\n'
	printf '%s\n' "$*" | sed 's/^/# /'
}

# ok COND_EXIT_STATUS DESC: `ok $? "desc"` style; 0 passes.
ok() {
	if [ "$1" -eq 0 ]; then pass "$2"; else fail "$2" "exit status $1"; fi
}

# is GOT EXPECTED DESC
is() {
	if [ "$1" == "$2" ]; then
		pass "$3"
	else
		fail "$3" "     got: '$1'" "expected: '$2'"
	fi
}

# isnt GOT UNEXPECTED DESC
isnt() {
	if [ "$1" != "$2" ]; then
		pass "$3"
	else
		fail "$3" "     got: '$1'" "expected anything else"
	fi
}

# like GOT ERE DESC: GOT matches the extended regex ERE (bash =~).
like() {
	if [[ $1 =~ $2 ]]; then
		pass "$3"
	else
		fail "$3" "     got: '$1'" "expected to match: /$2/"
	fi
}

# unlike GOT ERE DESC
unlike() {
	if [[ $1 =~ $2 ]]; then
		fail "$3" "     got: '$1'" "expected not to match: /$2/"
	else
		pass "$3"
	fi
}

# between GOT MIN MAX DESC: an integer in [MIN, MAX].
between() {
	if [[ $1 =~ ^-?[0-9]+$ ]] && [ "$1" -ge "$2" ] && [ "$1" -le "$3" ]; then
		pass "$4"
	else
		fail "$4" "     got: '$1'" "expected an integer from $2 to $3"
	fi
}

# done_testing: prints the plan; exits 1 if a test failed, else 0.
done_testing() {
	_tap_done=1
	echo "1..$_tap_n"
	if [ "$_tap_failed" -gt 0 ]; then
		diag "$_tap_failed of $_tap_n tests failed"
		exit 1
	fi
	exit 0
}

# bail_out REASON: a fatal setup failure; stops the script.
bail_out() {
	_tap_done=1
	echo "Bail out! $*"
	exit 99
}

# skip_all REASON: nothing can be tested here (e.g. a server not installed).
skip_all() {
	_tap_done=1
	echo "1..0 # SKIP $*"
	exit 0
}

# need_cmd CMD...: bails out unless every command exists.
need_cmd() {
	local c
	for c in "$@"; do
		command -v "$c" >/dev/null 2>&1 || bail_out "required command not found: $c"
	done
}

# ---- processes and cleanup -------------------------------------------------

_pids=()
T=

# pids_gone PID...: true when none of them runs any more (for wait_until).
# shellcheck disable=SC2317  # called through wait_until
pids_gone() {
	local p
	for p in "$@"; do
		pid_alive "$p" && return 1
	done
	return 0
}

# track_pid PID...: stopped by pid on exit.
track_pid() {
	_pids+=("$@")
}

# stop_pids PID...: SIGTERM, STOP_GRACE_MS (default 3000) ms to go, then
# SIGKILL. Bounded.
stop_pids() {
	local p
	[ $# -gt 0 ] || return 0
	term_and_wait "${STOP_GRACE_MS:-3000}" "$@" && return 0
	for p in "$@"; do
		if pid_alive "$p"; then
			kill -KILL "$p" 2>/dev/null
		fi
	done
	# reap our own children, without blocking on anyone else's
	for p in "$@"; do
		wait "$p" 2>/dev/null
	done
	# and see the others (spawn-fcgi's, reparented to init) gone, so
	# that their sockets are closed before anything reuses them (the
	# kernel closes a process's files after tearing down its memory: for
	# an ASan build, terabytes of shadow mappings, seconds on a loaded
	# machine)
	for p in "$@"; do
		wait_until 15000 pid_gone "$p"
	done
	return 0
}

# pid_gone PID: true once PID no longer runs.
pid_gone() {
	! pid_alive "$1"
}

_cleanup() {
	local rc=$?
	trap - EXIT INT TERM HUP
	stop_and_remove "${RLGATE_KEEP_TMP:-0}" "$T" "${_pids[@]}" ||
		echo "# kept temporary directory $T"
	if [ $_tap_done -eq 0 ]; then
		# died without a plan: make the failure visible to the TAP driver
		echo "Bail out! test script stopped early (status $rc)"
		[ $rc -eq 0 ] && rc=99
	fi
	exit $rc
}
trap_exit _cleanup

# make_tmpdir: sets T to a new temporary directory, mode 755 (servers that
# drop to another user must reach sockets inside), removed on exit.
make_tmpdir() {
	T=$(mktemp -d "${TMPDIR:-/tmp}/rlgate-test.XXXXXX") || bail_out "mktemp -d failed"
	chmod 755 "$T" || bail_out "chmod $T failed"
	# the directories above must be traversable too
	local d
	d=$(dirname "$T")
	[ -x "$d" ] || bail_out "$d is not traversable"
}

# timing_sensitive: for a script whose checks need requests answered within
# a few hundred milliseconds (it retries a run that was too slow, up to a
# bound), or a load to run while a page samples it. scripts/test.sh runs three test streams at once on a machine
# that may have 2 cores: as root, this script and everything it starts
# afterwards (the servers, every curl) run at nice -10, so the other
# streams' loads do not take its milliseconds. A no-op for other users.
timing_sensitive() {
	machine_alone
	[ "$(id -u)" -eq 0 ] && renice -n -10 -p $$ >/dev/null 2>&1
	return 0
}

# cpu_bound: for a soak whose checks are about bounds, not time (WAL size,
# RSS, exact counts): it and everything it starts afterwards run at nice
# 10, so that the streams scripts/test.sh runs beside it keep their
# milliseconds.
cpu_bound() {
	machine_alone
	renice -n 10 -p $$ >/dev/null 2>&1
	return 0
}

# machine_alone: waits (at most 15 minutes) until no other cpu_bound or
# timing_sensitive script runs on the machine, of this build or another,
# and keeps it so until this script ends: a reservation named "alone"
# beside the ports' (lib-proc.sh's reserve_port; released on exit, taken
# over from a script that died). Two soaks at once, or a soak beside a
# timing run, starve each other on 2 cores.
machine_alone() {
	local _
	for _ in $(seq 1 1800); do
		reserve_port alone && return 0
		sleep 0.5
	done
	diag "machine_alone: another script kept the machine for 15 minutes; going on"
	return 0
}

# setup_test CMD...: the start of a script: bails out unless every CMD and
# the rlgate binary exist, then make_tmpdir.
setup_test() {
	need_cmd "$@"
	[ -x "$RLGATE_BIN" ] || bail_out "no rlgate binary at $RLGATE_BIN"
	make_tmpdir
}

# split_envs [ENV=VALUE...] -- ARGS...: for a wrapper that takes both:
# ENVS, the words before "--"; ENVS_SHIFT, how many words to shift to reach
# ARGS ("--" included).
split_envs() {
	ENVS=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		ENVS+=("$1")
		shift
	done
	ENVS_SHIFT=${#ENVS[@]}
	[ $# -gt 0 ] && ENVS_SHIFT=$((ENVS_SHIFT + 1))
}

# ---- ports and waiting ---------------------------------------------------

# make_rundir: the run directory of the test's rlgate, $run ($T/run, mode
# 755: the web server reaches the socket in it), and that socket, $sock.
make_rundir() {
	run="$T/run"
	mkdir -p "$run"
	chmod 755 "$run"
	sock="$run/rlgate.sock"
}

# demo_lighttpd_conf [SOCKET]: a free port PORT and the demo lighttpd's
# config for it, $T/lighttpd.conf (write_lighttpd_demo_conf, on $run and
# SOCKET); base and url, its site and its rate-limited endpoint.
demo_lighttpd_conf() {
	PORT=$(free_port) || bail_out "no free port"
	write_lighttpd_demo_conf "$T/lighttpd.conf" "$PORT" "$run" "$@"
	base="http://127.0.0.1:$PORT"
	url="$base/api/v1/resources"
}

# demo_lighttpd [SOCKET]: demo_lighttpd_conf, and that lighttpd started.
demo_lighttpd() {
	demo_lighttpd_conf "$@"
	start_lighttpd "$T/lighttpd.conf" "$PORT"
}

# sleep_ms MS
sleep_ms() {
	[ "$1" -gt 0 ] || return 0
	sleep "$(printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)))"
}

# ms_left_in_window SECONDS: milliseconds until the next multiple of the
# window (windows are aligned on multiples of the window length).
ms_left_in_window() {
	local w=$(($1 * 1000)) now
	now=$(now_ms)
	echo $((w - now % w))
}

# wait_for_window_start SECONDS [AFTER_MS]: sleeps until AFTER_MS (default
# 100) ms after the next multiple of SECONDS of wall-clock time, so a test
# that must stay within one window has the whole window before it.
wait_for_window_start() {
	local after=${2:-100} left
	left=$(ms_left_in_window "$1")
	sleep_ms $((left + after))
}

# ensure_window_room SECONDS NEED_S: if less than NEED_S seconds are left in
# the current window, waits for the next one to start.
ensure_window_room() {
	local left
	left=$(ms_left_in_window "$1")
	if [ "$left" -lt $(($2 * 1000)) ]; then
		wait_for_window_start "$1"
	fi
}

# ---- HTTP ------------------------------------------------------------------

# req [CURL_ARGS...] URL: one request. Sets
#   STATUS   the HTTP status ("000" when curl failed)
#   BODY     the body
#   HDRS     the header block (CR removed), of the last response
# and keeps the header block in $T/last.headers for header().
req() {
	local hfile="$T/last.headers" bfile="$T/last.body" efile="$T/last.curlerr"
	: >"$hfile"
	: >"$bfile"
	STATUS=$(curl -sS --max-time "$CURL_MAX_TIME" -D "$hfile" -o "$bfile" \
	    -w '%{http_code}' "$@" 2>"$efile") || {
		diag "curl $*: $(cat "$efile")"
		STATUS=000
	}
	HDRS=$(tr -d '\r' <"$hfile")
	BODY=$(cat "$bfile")
}

# body_kind FILE: what the answer body in FILE is, by its first line: ok
# (the success JSON), e503 (the 503 JSON error), e429, or other.
body_kind() {
	local b=
	read -r b <"$1" 2>/dev/null
	case $b in
	'{"status":"success","data":'*) echo ok ;;
	'{"error":{"code":503,'*) echo e503 ;;
	'{"error":{"code":429,'*) echo e429 ;;
	*) echo other ;;
	esac
}

# bg_load J SECONDS MAX CLIENTS PREFIX URL...: a background load, until
# $T/bg.stop exists (SECONDS s and MAX requests at most): one request at a
# time, to each URL in turn, each from the next of CLIENTS addresses
# PREFIX.1, PREFIX.2, ... (so no client nears its limit); one line per
# answer in $T/bg.J:
#   SENT_MS URL_N STATUS|Retry-After|RateLimit-Remaining|Content-Type BODY
# URL_N from 1; BODY as body_kind says; STATUS 000 when no answer came.
bg_load() {
	local j=$1 secs=$2 max=$3 nclients=$4 prefix=$5 i g t r b deadline
	shift 5
	deadline=$(($(now_ms) + secs * 1000))
	: >"$T/bg.$j"
	for ((i = 0; i < max; i++)); do
		[ -e "$T/bg.stop" ] && break
		t=$(now_ms)
		[ "$t" -ge "$deadline" ] && break
		g=$((i % $# + 1))
		r=$(curl -sS --max-time 5 --interface "$prefix.$((i % nclients + 1))" \
		    -o "$T/bg.$j.body" \
		    -w '%{http_code}|%header{retry-after}|%header{ratelimit-remaining}|%{content_type}' \
		    "${!g}" 2>/dev/null) || r="000|||"
		b=$(body_kind "$T/bg.$j.body")
		echo "$t $g $r $b" >>"$T/bg.$j"
	done
}

# keep NAME [CURL_ARGS...] URL: req, and keeps the answer under NAME, so a
# run of requests that must fit in one window sends them all first and
# checks them afterwards (recall).
keep() {
	local n=$1
	shift
	req "$@"
	cp "$T/last.headers" "$T/keep.$n.headers"
	printf '%s' "$BODY" >"$T/keep.$n.body"
	echo "$STATUS" >"$T/keep.$n.status"
}

# recall NAME: makes the answer kept under NAME the last one (STATUS, BODY,
# header()).
recall() {
	cp "$T/keep.$1.headers" "$T/last.headers"
	STATUS=$(cat "$T/keep.$1.status")
	BODY=$(cat "$T/keep.$1.body")
}

# keep_many CLIENT NAME URL [NAME URL]...: like keep, one request per NAME
# to its URL from CLIENT, sent back to back by one curl process over one
# connection (no process start between them: on a loaded machine that is
# what takes time).
keep_many() {
	local cl=$1 n i=0
	local -a args=() names=()
	shift
	while [ $# -ge 2 ]; do
		n=$1
		[ $i -gt 0 ] && args+=(--next)
		args+=(-sS --max-time "$CURL_MAX_TIME" --interface "$cl"
		    -D "$T/keep.$n.headers" -o "$T/keep.$n.body" -w '%{http_code}\n' "$2")
		: >"$T/keep.$n.headers"
		: >"$T/keep.$n.body"
		names+=("$n")
		i=$((i + 1))
		shift 2
	done
	curl "${args[@]}" >"$T/burst.codes" 2>"$T/burst.err" ||
		diag "curl burst ${names[*]}: $(head -3 "$T/burst.err")"
	i=1
	for n in "${names[@]}"; do
		STATUS=$(sed -n "${i}p" "$T/burst.codes")
		echo "${STATUS:-000}" >"$T/keep.$n.status"
		i=$((i + 1))
	done
}

# keep_burst CLIENT NAME...: keep_many, every request to $url.
keep_burst() {
	local cl=$1 n
	local -a pairs=()
	shift
	for n in "$@"; do
		pairs+=("$n" "$url")
	done
	keep_many "$cl" "${pairs[@]}"
}

# in_one_window SECONDS CMD [ARGS...]: waits for the start of a window, runs
# CMD (requests kept with keep, and what must happen between them), and if CMD did not finish inside the
# window it started in (a slow machine), runs it again in the next one: a
# fixed window starts every count afresh. Up to 5 tries (a loaded machine
# can take a few); fails after that.
in_one_window() {
	local w=$1 try w0 w1
	shift
	for try in 1 2 3 4 5; do
		wait_for_window_start "$w"
		w0=$(($(now_ms) / (w * 1000)))
		"$@"
		w1=$(($(now_ms) / (w * 1000)))
		[ "$w0" = "$w1" ] && return 0
		diag "the requests took longer than one $w s window (try $try); again"
	done
	return 1
}

# seq_codes N [CURL_ARGS...] URL: N requests; prints "STATUS:Remaining ..."
# ("-" for a missing RateLimit-Remaining).
seq_codes() {
	local n=$1 r out=
	shift
	for _ in $(seq 1 "$n"); do
		req "$@"
		r=$(header RateLimit-Remaining)
		out="$out $STATUS:${r:--}"
	done
	printf '%s' "${out# }"
}

# spellings IP BASE [-X METHOD] PATH...: one request of each PATH, sent as
# it is (--path-as-is), from IP; "429" for each answered 429, else "-".
spellings() {
	local ip=$1 base=$2 v out= m=()
	shift 2
	if [ "${1:-}" = -X ]; then
		m=(-X "$2")
		shift 2
	fi
	for v in "$@"; do
		req --path-as-is --interface "$ip" "${m[@]}" "$base$v"
		case $STATUS in 429) out="$out 429" ;; *) out="$out -" ;; esac
	done
	printf '%s' "${out# }"
}

# hreq [CURL_ARGS...] URL: a HEAD request (curl -I): STATUS and headers as
# req; BODY is empty (curl reads no body for HEAD).
hreq() {
	req -I "$@"
	BODY=
}

# header NAME: the value of header NAME (case-insensitive) in the last
# response of req/hreq, or in $1's file with header_in. Empty if absent.
header() {
	header_in "$T/last.headers" "$1"
}

# header_in FILE NAME: the value of header NAME in a header block in FILE
# (the last value if repeated, whitespace trimmed).
header_in() {
	tr -d '\r' <"$1" | awk -v name="$2" '
		BEGIN { name = tolower(name) }
		/^$/ { next }
		{
			i = index($0, ":")
			if (i > 0 && tolower(substr($0, 1, i - 1)) == name) {
				v = substr($0, i + 1)
				sub(/^[ \t]+/, "", v); sub(/[ \t]+$/, "", v)
				val = v
			}
		}
		END { printf "%s", val }'
}

# has_header NAME: true if the last response has header NAME.
has_header() {
	tr -d '\r' <"$T/last.headers" | grep -qi "^$1:"
}

# Expected JSON bodies (the contract; exact).
BODY_429='{"error":{"code":429,"message":"Too Many Requests. Rate limit exceeded."}}'
RE_BODY_200='^\{"status":"success","data":.*\}$'
RE_BODY_ERR='^\{"error":\{"code":%d,.*\}\}$'

# check_429 LIMIT WINDOW: the last answer is the seed's 429 for a fixed
# window of LIMIT per WINDOW seconds: status, type, every header, body.
check_429() {
	is "$STATUS" 429 "request $(($1 + 1)): 429"
	is "$(header Content-Type)" application/json "429: Content-Type: application/json"
	is "$(header RateLimit-Limit)" "$1" "429: RateLimit-Limit $1"
	is "$(header RateLimit-Remaining)" 0 "429: RateLimit-Remaining 0"
	between "$(header RateLimit-Reset)" 1 "$2" "429: RateLimit-Reset in 1..$2"
	between "$(header Retry-After)" 1 "$2" "429: Retry-After in 1..$2"
	is "$BODY" "$BODY_429" "429: the seed's JSON error body"
}

# check_200_headers I LIMIT WINDOW: the last answer, request I in a fixed
# window of LIMIT per WINDOW seconds, has the seed's JSON type and its
# RateLimit-Limit, -Remaining (LIMIT - I) and -Reset (1..WINDOW).
check_200_headers() {
	is "$(header Content-Type)" application/json "request $1: Content-Type: application/json"
	is "$(header RateLimit-Limit)" "$2" "request $1: RateLimit-Limit $2"
	is "$(header RateLimit-Remaining)" $(($2 - $1)) "request $1: RateLimit-Remaining $(($2 - $1))"
	between "$(header RateLimit-Reset)" 1 "$3" "request $1: RateLimit-Reset in 1..$3"
}

# check_first_window LIMIT WINDOW [STRICT]: the answers kept as r1 ..
# r(LIMIT+2), sent in one fixed window of LIMIT per WINDOW seconds: LIMIT
# 200s (check_200_headers, the success body; with STRICT, no Retry-After
# either), the 429 (check_429), and a 429 for the last one, sent with a
# query string.
check_first_window() {
	local i
	for i in $(seq 1 "$1"); do
		recall "r$i"
		is "$STATUS" 200 "request $i: 200"
		check_200_headers "$i" "$1" "$2"
		if [ -n "${3:-}" ]; then
			has_header Retry-After
			ok $((! $?)) "request $i: no Retry-After on a 200"
		fi
		like "$BODY" "$RE_BODY_200" "request $i: success JSON body"
	done
	recall "r$(($1 + 1))"
	check_429 "$1" "$2"
	recall "r$(($1 + 2))"
	is "$STATUS" 429 "a query string does not get around the limit"
}

# check_404_405: a GET of another path under $base/api/ from 127.0.0.9 and
# a POST to $url from 127.0.0.10 get rlgate's JSON 404 and 405 (with Allow).
check_404_405() {
	req --interface 127.0.0.9 "$base/api/v1/nothing-here"
	is "$STATUS" 404 "another path under /api/: 404"
	is "$(header Content-Type)" application/json "404: Content-Type: application/json"
	like "$BODY" "$(re_err 404)" "404: JSON error body"
	req --interface 127.0.0.10 -X POST -d 'a=1' "$url"
	is "$STATUS" 405 "POST: 405"
	is "$(header Allow)" "GET, HEAD" "405: Allow: GET, HEAD"
	is "$(header Content-Type)" application/json "405: Content-Type: application/json"
	like "$BODY" "$(re_err 405)" "405: JSON error body"
}

# codes NAME...: "STATUS:RateLimit-Remaining" of each answer kept under
# NAME (keep), space-separated.
codes() {
	local n s=
	for n in "$@"; do
		recall "$n"
		s="$s $STATUS:$(header RateLimit-Remaining)"
	done
	echo "${s# }"
}

# re_err CODE: the regex for a JSON error body with that code.
re_err() {
	# shellcheck disable=SC2059
	printf "$RE_BODY_ERR" "$1"
}

# ---- rlgate configs --------------------------------------------------------

# write_rlgate_conf FILE DB LIMIT WINDOW [ON_ERROR [BUSY_MS]]; with
# COMMIT set, [store] commit = $COMMIT (else the default, auto).
write_rlgate_conf() {
	cat >"$1" <<EOF
; written by $(basename "$0")
[store]
path = $2
busy_timeout_ms = ${6:-2000}
on_error = ${5:-closed}${COMMIT:+
commit = $COMMIT}

[headers]
style = draft03

[policy default]
algorithm = fixed_window
limit = $3
window = $4
key = ip
EOF
}

# write_store_conf NAME: $T/NAME.conf, a [store] section on a database of
# its own, $T/NAME.db (sets DB), with rejection_cache = ${CACHE:-0} and,
# with COMMIT set, commit = $COMMIT; the rest of the config from stdin.
DB=
write_store_conf() {
	DB="$T/$1.db"
	{
		echo "; written by $(basename "$0")"
		echo "[store]"
		echo "path = $DB"
		echo "rejection_cache = ${CACHE:-0}"
		[ -n "${COMMIT:-}" ] && echo "commit = $COMMIT"
		echo
		cat
	} >"$T/$1.conf"
}

# check_conf NAME: bails out unless rlgate --check-config accepts
# $T/NAME.conf (its report in $T/NAME.check).
check_conf() {
	"$RLGATE_BIN" --check-config --config "$T/$1.conf" >"$T/$1.check" 2>&1 ||
		bail_out "rlgate rejects $1.conf: $(head -5 "$T/$1.check")"
}

# ---- spawn-fcgi ------------------------------------------------------------

# start_rlgate_fcgi NAME SOCKET CONFIG NPROC [RLGATE_ARGS...]: spawn-fcgi
# starts NPROC rlgate processes on SOCKET (mode 0666, so a server that drops
# privileges can connect). The pids are in $T/NAME.pid (spawn-fcgi -F N
# writes one pid a line) and tracked. Bails out if they do not stay up.
#
# rlgate's stderr goes to $T/NAME.log. spawn-fcgi (unless -n) points its
# children's stdout and stderr at /dev/null, so a redirection of spawn-fcgi's
# own stderr would catch nothing from rlgate: a /bin/sh wrapper sets the
# log up and execs rlgate (same pid). spawn-fcgi's messages go to
# $T/NAME.spawn.log.
start_rlgate_fcgi() {
	local name=$1 sock=$2 conf=$3 n=$4 p try
	shift 4
	rm -f "$T/$name.pid"
	: >>"$T/$name.log"
	# A process of the previous set on this socket may still be exiting
	# (see stop_pids): spawn-fcgi then finds the socket in use. Up to 10 s.
	for try in $(seq 1 20); do
		# shellcheck disable=SC2016
		spawn-fcgi -s "$sock" -M 0666 -F "$n" -P "$T/$name.pid" \
		    -- /bin/sh -c 'log=$1; shift; exec "$@" 2>>"$log"' rlgate-log \
		    "$T/$name.log" "$RLGATE_BIN" --config "$conf" "$@" \
		    </dev/null >>"$T/$name.spawn.log" 2>&1 && break
		if [ "$try" -eq 20 ] ||
		    ! tail -1 "$T/$name.spawn.log" | grep -q 'already in use'; then
			bail_out "spawn-fcgi failed: $(tail -5 "$T/$name.spawn.log")"
		fi
		sleep 0.5
	done
	RLGATE_PIDS=()
	# shellcheck disable=SC2013
	for p in $(cat "$T/$name.pid"); do
		RLGATE_PIDS+=("$p")
		track_pid "$p"
	done
	[ ${#RLGATE_PIDS[@]} -eq "$n" ] ||
		bail_out "spawn-fcgi -F $n wrote ${#RLGATE_PIDS[@]} pids"
	[ -S "$sock" ] || bail_out "no socket at $sock"
	# a bad config or a crash at start shows within a moment
	sleep 0.3
	for p in "${RLGATE_PIDS[@]}"; do
		pid_alive "$p" || bail_out "rlgate (pid $p) exited at start: $(tail -5 "$T/$name.log")"
	done
}

# restart_rlgate NAME ROOM_S: stops the rlgate named CUR (if any), starts
# NAME ($T/NAME.conf, check_conf first) on $sock, 2 processes x 2 threads,
# and sets CUR=NAME; then waits for a fresh window of $WINDOW s when less
# than ROOM_S seconds are left in this one.
CUR=
restart_rlgate() {
	[ -n "$CUR" ] && stop_rlgate_fcgi "$CUR"
	rm -f "$sock"
	check_conf "$1"
	start_rlgate_fcgi "$1" "$sock" "$T/$1.conf" 2 --threads 2
	CUR=$1
	ensure_window_room "$WINDOW" "$2"
}

# start_rlgate_tcp NAME PORT CONFIG NPROC [RLGATE_ARGS...]: as
# start_rlgate_fcgi, but spawn-fcgi listens on 127.0.0.1:PORT.
start_rlgate_tcp() {
	local name=$1 port=$2 conf=$3 n=$4 p
	shift 4
	rm -f "$T/$name.pid"
	: >>"$T/$name.log"
	# shellcheck disable=SC2016
	spawn-fcgi -a 127.0.0.1 -p "$port" -F "$n" -P "$T/$name.pid" \
	    -- /bin/sh -c 'log=$1; shift; exec "$@" 2>>"$log"' rlgate-log \
	    "$T/$name.log" "$RLGATE_BIN" --config "$conf" "$@" \
	    </dev/null >>"$T/$name.spawn.log" 2>&1 ||
		bail_out "spawn-fcgi -p $port failed: $(tail -5 "$T/$name.spawn.log")"
	# shellcheck disable=SC2013
	for p in $(cat "$T/$name.pid"); do
		track_pid "$p"
	done
	wait_for_port "$port" 5 || bail_out "rlgate does not listen on 127.0.0.1:$port"
	sleep 0.3
	rlgate_pids_alive "$name" || bail_out "rlgate exited at start: $(tail -5 "$T/$name.log")"
}

# stop_rlgate_fcgi NAME: stops the processes listed in $T/NAME.pid (SIGTERM,
# then SIGKILL after 1 s: a test that wants a clean exit on SIGTERM checks it
# with term_and_wait).
stop_rlgate_fcgi() {
	local pids
	pids=$(cat "$T/$1.pid" 2>/dev/null)
	# shellcheck disable=SC2086
	[ -n "$pids" ] && STOP_GRACE_MS=1000 stop_pids $pids
	return 0
}

# term_and_wait TIMEOUT_MS PID...: sends SIGTERM and waits until every PID
# is gone (reaping those that are our children); fails if one is still
# running after TIMEOUT_MS.
term_and_wait() {
	local deadline p alive
	deadline=$(($(now_ms) + $1))
	shift
	for p in "$@"; do
		kill -TERM "$p" 2>/dev/null
	done
	while :; do
		alive=0
		for p in "$@"; do
			pid_alive "$p" && alive=1
		done
		if [ $alive -eq 0 ]; then
			for p in "$@"; do
				wait "$p" 2>/dev/null
			done
			return 0
		fi
		[ "$(now_ms)" -ge "$deadline" ] && return 1
		sleep 0.05
	done
}

# rlgate_pids_alive NAME: true if every process in $T/NAME.pid still runs.
rlgate_pids_alive() {
	local p
	# shellcheck disable=SC2013
	for p in $(cat "$T/$1.pid"); do
		pid_alive "$p" || return 1
	done
	return 0
}

# store_log_lines FILE: the lines of an rlgate log that report the store
# (excluding rlgate's start-up banner, which names the store's path).
store_log_lines() {
	grep -i 'store' "$1" 2>/dev/null | grep -v 'serving FastCGI'
}

# log_size NAME: bytes in $T/NAME.log now; log_since NAME OFFSET: the lines
# logged since; new_store_lines NAME OFFSET: those of them about the store.
log_size() { wc -c <"$T/$1.log"; }
log_since() { tail -c +$(($2 + 1)) "$T/$1.log"; }
new_store_lines() {
	log_since "$1" "$2" >"$T/$1.log.new"
	store_log_lines "$T/$1.log.new"
}

# ---- lighttpd ----------------------------------------------------------------

# write_lighttpd_demo_conf FILE PORT RUNDIR [SOCKET]: a wrapper, as
# scripts/demo.sh writes one, that sets the variables of the shipped
# www/lighttpd/demo.conf and the port, then includes it (it mounts rlgate
# through www/lighttpd/rlgate.conf on SOCKET, default RUNDIR/rlgate.sock).
# Lines can be appended to FILE afterwards (":=" to override).
write_lighttpd_demo_conf() {
	cat >"$1" <<EOF
# written by $(basename "$0")
var.rlgate_root   = "$RLGATE_SRCDIR/www"
var.rlgate_run    = "$3"
var.rlgate_socket = "${4:-$3/rlgate.sock}"
server.port       = $2
include "$RLGATE_SRCDIR/www/lighttpd/demo.conf"
EOF
}

# start_lighttpd_front DIR PORT BACKEND_PORT: a lighttpd on PORT (config
# DIR.conf, files in DIR) that proxies everything (mod_proxy) to
# 127.0.0.1:BACKEND_PORT, adding the client's address to X-Forwarded-For;
# lines from stdin (more settings) go after that. Started.
start_lighttpd_front() {
	mkdir -p "$1"
	chmod 755 "$1"
	{
		printf 'server.modules      += ( "mod_proxy" )\n'
		printf 'proxy.server         = ( "" => (( "host" => "127.0.0.1", "port" => %s )) )\n' "$3"
		cat
	} | write_lighttpd_base "$1.conf" "$2" "$1" "$1/lighttpd.pid" "$1/error.log"
	start_lighttpd "$1.conf" "$2"
}

# start_authorizer_lighttpd DIR PORT SOCKET GUARD: a lighttpd on PORT in DIR
# (DIR/lighttpd.conf, docroot DIR/htdocs) that asks rlgate on SOCKET, as
# its Authorizer, before serving anything under GUARD (the shipped
# www/lighttpd/authorizer.conf); lines from stdin go before that. Started.
start_authorizer_lighttpd() {
	{
		cat
		printf 'var.rlgate_authorizer_socket = "%s"\n' "$3"
		printf 'var.rlgate_guard             = "%s"\n' "$4"
		printf 'include "%s/www/lighttpd/authorizer.conf"\n' "$RLGATE_SRCDIR"
	} | write_lighttpd_base "$1/lighttpd.conf" "$2" "$1/htdocs" "$1/lighttpd.pid" \
	    "$1/error.log"
	start_lighttpd "$1/lighttpd.conf" "$2"
}

# start_lighttpd CONF PORT: lighttpd -D in the background, tracked by pid;
# waits until PORT accepts. Sets LIGHTTPD_PID.
start_lighttpd() {
	local conf=$1 port=$2 log
	log="${conf%.conf}.out"
	"$LIGHTTPD_BIN" -tt -f "$conf" >"$log" 2>&1 ||
		bail_out "lighttpd rejects $conf: $(head -5 "$log")"
	"$LIGHTTPD_BIN" -D -f "$conf" </dev/null >>"$log" 2>&1 &
	LIGHTTPD_PID=$!
	track_pid "$LIGHTTPD_PID"
	wait_for_port "$port" 10 "$LIGHTTPD_PID" ||
		bail_out "lighttpd did not listen on $port: $(tail -5 "$log")"
}

# ---- Redis -------------------------------------------------------------------

REDIS_SERVER=${REDIS_SERVER:-redis-server}
REDIS_CLI=${REDIS_CLI:-redis-cli}

# rcli ARGS...: one redis-cli command on the test's redis-server (RPORT),
# raw output, bounded.
rcli() {
	timeout 5 "$REDIS_CLI" -h 127.0.0.1 -p "$RPORT" "$@" 2>>"$T/redis-cli.err"
}

# shellcheck disable=SC2317  # called through wait_until
redis_up() {
	[ "$(rcli PING)" = PONG ]
}

# start_test_redis [PORT]: a redis-server child on 127.0.0.1 at PORT, or
# at a free port, RPORT, without persistence, in $T/redis (REDIS_PID,
# stopped with the test); waits until it answers PING (10 s at most).
start_test_redis() {
	RPORT=${1:-}
	[ -n "$RPORT" ] || RPORT=$(free_port) || bail_out "no free port"
	mkdir -p "$T/redis"
	"$REDIS_SERVER" --port "$RPORT" --bind 127.0.0.1 --save "" \
	    --appendonly no --dir "$T/redis" --daemonize no \
	    </dev/null >>"$T/redis.log" 2>&1 &
	REDIS_PID=$!
	track_pid "$REDIS_PID"
	wait_until 10000 redis_up ||
		bail_out "redis-server (pid $REDIS_PID) did not answer PING on $RPORT: $(tail -5 "$T/redis.log")"
}

# ---- Apache ------------------------------------------------------------------

# apache_available: true if an Apache 2.4 with mod_proxy_fcgi is installed.
apache_available() {
	[ -x "$APACHE_BIN" ] && [ -f "$APACHE_MODULES/mod_proxy_fcgi.so" ]
}

# _apache_module NAME: a LoadModule line guarded for modules built in.
_apache_module() {
	printf '<IfModule !%s_module>\n    LoadModule %s_module %s/mod_%s.so\n</IfModule>\n' \
	    "$1" "$1" "$APACHE_MODULES" "$1"
}

# write_apache_conf FILE PORT DIR [EXTRA_LINES]: a self-contained Apache 2.4
# config: mpm_event, listening on 127.0.0.1:PORT, pid file, logs, runtime
# and mutex files in DIR, dropping to User/Group daemon. EXTRA_LINES (e.g.
# Define + Include of the shipped snippet) are appended.
write_apache_conf() {
	local f=$1 port=$2 dir=$3 extra=${4:-}
	mkdir -p "$dir/htdocs"
	chmod 755 "$dir" "$dir/htdocs"
	{
		echo "# written by $(basename "$0")"
		echo "ServerRoot \"$dir\""
		_apache_module mpm_event
		_apache_module unixd
		_apache_module authz_core
		_apache_module log_config
		_apache_module proxy
		_apache_module proxy_fcgi
		cat <<EOF
ServerName 127.0.0.1
Listen 127.0.0.1:$port
User daemon
Group daemon
PidFile "$dir/httpd.pid"
DefaultRuntimeDir "$dir"
Mutex file:$dir default
ErrorLog "$dir/error.log"
LogLevel warn
LogFormat "%a %l %u %t \"%r\" %>s %b" common
CustomLog "$dir/access.log" common
DocumentRoot "$dir/htdocs"
<Directory "$dir/htdocs">
    Require all granted
</Directory>
Timeout 15
ProxyTimeout 15
EOF
		printf '%s\n' "$extra"
	} >"$f"
}

# start_apache CONF PORT: apache2 -DFOREGROUND in the background, tracked by
# pid; waits until PORT accepts. Sets APACHE_PID.
start_apache() {
	local conf=$1 port=$2 log
	log="${conf%.conf}.out"
	"$APACHE_BIN" -t -f "$conf" >"$log" 2>&1 ||
		bail_out "apache2 rejects $conf: $(head -5 "$log")"
	"$APACHE_BIN" -f "$conf" -DFOREGROUND </dev/null >>"$log" 2>&1 &
	APACHE_PID=$!
	track_pid "$APACHE_PID"
	wait_for_port "$port" 15 "$APACHE_PID" ||
		bail_out "apache2 did not listen on $port: $(tail -5 "$log")"
}

# shipped_apache SOCKET: Apache in $T/apache (write_apache_conf) on a free
# port AP_PORT, with the shipped www/apache/rlgate.conf on SOCKET, started;
# AP is its base URL.
shipped_apache() {
	AP_PORT=$(free_port) || bail_out "no free port"
	write_apache_conf "$T/apache/httpd.conf" "$AP_PORT" "$T/apache" \
	    "Define RLGATE_SOCKET $1
Include \"$RLGATE_SRCDIR/www/apache/rlgate.conf\""
	start_apache "$T/apache/httpd.conf" "$AP_PORT"
	AP="http://127.0.0.1:$AP_PORT"
}

# ---- tests/loadgen (load.sh, sustained.sh, crash.sh) ------------------------

# need_loadgen: LOADGEN, the load generator tests/loadgen; skips the whole
# script without it.
need_loadgen() {
	LOADGEN=$RLGATE_BUILDDIR/tests/loadgen
	[ -x "$LOADGEN" ] || skip_all "no tests/loadgen (configure found no libcurl)"
}

# start_load_gateway DB LIMIT WINDOW NPROC NTHREADS [STORE_LINES]: rlgate
# on DB (a fixed window of LIMIT per WINDOW s, busy_timeout_ms 5000, and
# STORE_LINES added to [store]), NPROC processes x NTHREADS threads
# (RLGATE_PIDS, log $T/rlgate.log), behind the demo lighttpd (url).
start_load_gateway() {
	make_rundir
	write_rlgate_conf "$T/rlgate.conf" "$1" "$2" "$3" closed 5000
	[ -n "${6:-}" ] && printf '%s\n' "$6" >"$T/store.lines" &&
	    sed -i "/^\[store\]\$/r $T/store.lines" "$T/rlgate.conf"
	start_rlgate_fcgi rlgate "$run/rlgate.sock" "$T/rlgate.conf" "$4" --threads "$5"
	demo_lighttpd "$run/rlgate.sock"
}

# run_loadgen TAG ARGS...: tests/loadgen against $url from $CLIENTS clients
# on 32 connections, in windows of $WINDOW s (500 ms of guard), with ARGS:
# the cells in $T/cells, then loadgen_report TAG. Returns loadgen's status.
run_loadgen() {
	local tag=$1 rc
	shift
	"$LOADGEN" --url "$url" --out "$T/cells" --clients "$CLIENTS" \
	    --concurrency 32 --window-ms $((WINDOW * 1000)) --guard-ms 500 "$@" \
	    >"$T/summary" 2>"$T/loadgen.err"
	rc=$?
	loadgen_report "$tag"
	return $rc
}

# loadgen_report TAG: loadgen's summary ($T/summary) as diagnostics, one
# "TAG: KEY VALUE" a line. loadgen_val KEY: one value of it.
loadgen_report() {
	local k v
	while read -r k v; do
		diag "$1: $k $v"
	done <"$T/summary"
}
loadgen_val() { awk -v k="$1" '$1 == k { print $2 }' "$T/summary"; }

# check_load_counts LIMIT NPROC: after a load on start_load_gateway's
# gateway: per client and window ($T/cells), admitted == min(sent, LIMIT);
# no store error in rlgate's log; only 200s and 429s in lighttpd's access
# log; all NPROC workers still run.
check_load_counts() {
	local bad errors dead=0 p
	bad=$(awk -v L="$1" '{ want = $3 < L ? $3 : L
		if ($4 != want || $4 + $5 != $3)
			print "window " $1 " client " $2 ": sent " $3 ", 200: " $4 ", 429: " $5 " (want " want " admitted)" }' "$T/cells")
	is "$(printf '%s' "$bad" | grep -c .)" 0 "per client and window: admitted == min(sent, $1)" \
	    "$(printf '%s\n' "$bad" | head -5)"
	errors=$(grep -v 'serving FastCGI' "$T/rlgate.log" | grep -ciE 'error|busy|locked|fail')
	is "$errors" 0 "no store error in rlgate's log (SQLITE_BUSY included)" \
	    "$(grep -v 'serving FastCGI' "$T/rlgate.log" | head -3)"
	is "$(awk '$9 != 200 && $9 != 429' "$run/lighttpd-access.log" | wc -l)" 0 \
	    "lighttpd logged no status but 200 and 429"
	for p in "${RLGATE_PIDS[@]}"; do
		pid_alive "$p" || dead=$((dead + 1))
	done
	is "$dead" 0 "all $2 rlgate workers survived the load"
}

# ---- sqlite3 -----------------------------------------------------------------

# sql DB QUERY: runs QUERY with the sqlite3 shell (waits up to 5 s for locks).
sql() {
	sqlite3 -cmd '.timeout 5000' "$1" "$2"
}

# flush_table CONF: with [store] commit = behind (the default), writes
# what the decision table of CONF's database holds to the database now, so
# that the sqlite3 shell sees every decision made so far: a process that
# closes the table flushes it (as a stopping worker does), and rlgate
# --reset of a client no request has opens and closes it. With commit =
# each it deletes nothing and the database is current anyway. A failure
# is a failed test. Use CONF exactly as the workers do: the table's size
# comes from it, and a table of another size would be built anew. Its
# output (stdout) is checked exactly; its log (stderr) may say what it
# found, as any process's does (e.g. that it bound the table to a
# database made anew, before the workers noticed it).
flush_table() {
	local out err="${T:-/tmp}/flush_table.err"
	if ! out=$("$RLGATE_BIN" --config "$1" --reset flush.barrier 2>"$err") ||
	    [ "$out" != "rlgate: reset flush.barrier: 0 states deleted" ]; then
		fail "flush_table $1" "$(cat "$err")
$out"
		return 1
	fi
}

# sql_flushed CONF DB QUERY: flush_table CONF, then sql DB QUERY.
sql_flushed() {
	flush_table "$1"
	sql "$2" "$3"
}
