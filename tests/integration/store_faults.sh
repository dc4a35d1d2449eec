#!/usr/bin/env bash
# store_faults.sh: store faults that need the file system under the
# database to misbehave, behind lighttpd + spawn-fcgi: a read-only file
# system, a full disk, a database file replaced by garbage. Each runs in its
# own rlgate (one process, one thread: one error-log throttle, so the log is
# exact) with on_error = closed: 503 JSON with Retry-After, exactly one line
# in the error log naming the fault, no crash, no hang, and once the fault
# goes away the SAME process answers 200 and counts exactly (RateLimit-
# Remaining and the count in the database). Then the full disk once more
# with on_error = open: requests pass, one log line.
#
# These faults are of the SQLite transaction each decision is with commit
# = each, which every part here sets. With commit = behind (the default)
# the decisions are made in the decision table beside the database: a
# database replaced (by a read-only copy, by garbage) is noticed the same
# way and the table built again from it, which parts 5 and 6 hold to the
# same answers; store_failure.sh holds behind to a locked database. Part 7
# fills the disk under a running table: new clients past the room it took
# get on_error, the others are decided, and the worker lives.
#
# The databases live on small tmpfs mounts made here, so this needs root (or
# CAP_SYS_ADMIN); without it the whole script is skipped.
#
# The read-only file system: Linux refuses `mount -o remount,ro` of a file
# system on which a process holds files open for writing (EBUSY), and
# rlgate keeps its database, -wal and -shm open between requests. So the
# fault is made the way rlgate meets it: a read-only tmpfs holding a copy
# of the database is mounted over the directory (mount_ro_copy); rlgate
# notices within 1 s that the path names another file, reopens it, and finds
# it read-only. `mount -o remount,rw` of that tmpfs ends the fault.
: "${RLGATE_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/integration/lib.sh
. "$RLGATE_SRCDIR/tests/integration/lib.sh" || { echo "Bail out! cannot read lib.sh"; exit 99; }

setup_test lighttpd spawn-fcgi sqlite3 curl mount umount dd timeout

# every request must be answered well within this (never a hang)
CURL_MAX_TIME=5
MAX_MS=2000

# ---- tmpfs mounts, unmounted on exit ---------------------------------------

MOUNTS=()

# is_mounted DIR: true if DIR is a mount point.
# shellcheck disable=SC2317  # also called from the EXIT trap
is_mounted() {
	awk -v d="$1" '$2 == d { found = 1 } END { exit !found }' /proc/self/mounts
}

# mount_tmpfs DIR SIZE [OPTIONS]: a tmpfs of SIZE on DIR (made if missing),
# unmounted on exit. Fails if mount fails.
mount_tmpfs() {
	mkdir -p "$1" || return 1
	mount -t tmpfs -o "size=$2${3:+,$3}" tmpfs "$1" 2>"$T/mount.err" ||
		return 1
	MOUNTS+=("$1")
	chmod 755 "$1"
}

# mount_ro_copy DIR SIZE FILE: a read-only tmpfs holding a copy of FILE as
# $db, mounted over DIR. It is filled and made read-only aside and only then
# bound over DIR: rlgate reopens the path as soon as it names another file
# (a worker, the flusher, the overrides reader), and a file it holds open
# for writing would make the remount fail (EBUSY).
mount_ro_copy() {
	local stage
	stage="$T/stage-${#MOUNTS[@]}"
	mount_tmpfs "$stage" "$2" || return 1
	cp "$3" "$stage/$(basename "$db")" 2>"$T/mount.err" || return 1
	mount -o remount,ro "$stage" 2>"$T/mount.err" || return 1
	mount --bind "$stage" "$1" 2>"$T/mount.err" || return 1
	MOUNTS+=("$1")
}

# unmount_all: unmounts every tmpfs made here, the last one first, every
# layer of a stacked mount point; bounded, lazy (-l) if one stays busy.
# shellcheck disable=SC2317  # called from the EXIT trap
unmount_all() {
	local i d try
	for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do
		d=${MOUNTS[i]}
		for try in 1 2 3 4 5; do
			is_mounted "$d" || break
			if [ "$try" -lt 3 ]; then
				timeout 5 umount "$d" 2>/dev/null
			else
				timeout 5 umount -l "$d" 2>/dev/null
			fi
		done
		is_mounted "$d" && echo "# could not unmount $d"
	done
	MOUNTS=()
}

# The servers hold files on the mounts: stop them (the tracked ones, and an
# rlgate whose pid file was written but not yet read when a signal came),
# unmount, then the shared cleanup (which removes $T and keeps the exit
# status).
# shellcheck disable=SC2317  # the EXIT trap
_faults_cleanup() {
	local rc=$? p
	local stop=("${_pids[@]}")
	trap - EXIT
	if [ -n "$T" ]; then
		# shellcheck disable=SC2013
		for p in $(cat "$T"/*.pid 2>/dev/null); do
			pid_alive "$p" && grep -qF "$T/" "/proc/$p/cmdline" 2>/dev/null &&
				stop+=("$p")
		done
	fi
	if [ ${#stop[@]} -gt 0 ]; then
		STOP_GRACE_MS=2000 stop_pids "${stop[@]}"
	fi
	unmount_all
	(exit "$rc")
	_cleanup
}
trap _faults_cleanup EXIT

mount_tmpfs "$T/probe" 64k || skip_all "mount not permitted ($(head -1 "$T/mount.err"))"
umount "$T/probe" || bail_out "cannot unmount $T/probe"
MOUNTS=()

# ---- servers ---------------------------------------------------------------

make_rundir

LIMIT=20
# one window for the whole run (it never ends in the middle of a fault)
WINDOW=86400

demo_lighttpd_conf

# nlines TEXT: its number of non-empty lines.
nlines() { printf '%s\n' "$1" | grep -c .; }

# start NAME DB ON_ERROR: an rlgate for DB (one process, one thread) on the
# socket lighttpd uses, with commit = $COMMIT; sets PID.
COMMIT=each
start() {
	write_rlgate_conf "$T/$1.conf" "$2" $LIMIT $WINDOW "$3"
	start_rlgate_fcgi "$1" "$sock" "$T/$1.conf" 1 --threads 1
	PID=$(cat "$T/$1.pid")
}

# serve N CLIENT: N requests from 127.0.0.CLIENT, each must be 200.
serve() {
	local i
	for i in $(seq 1 "$1"); do
		req --interface "127.0.0.$2" "$url"
		[ "$STATUS" = 200 ] || bail_out "before the fault: got $STATUS from 127.0.0.$2"
	done
}

# during_fault DESC CLIENT...: one request from each 127.0.0.CLIENT, with
# on_error = closed: each must get a 503 JSON answer with Retry-After and no
# RateLimit-Remaining, in under MAX_MS.
during_fault() {
	local desc=$1 c t0 ms codes='' bad_ra='' bad_body='' bad_type='' counted='' slow=''
	shift
	for c in "$@"; do
		t0=$(now_ms)
		req --interface "127.0.0.$c" "$url"
		ms=$(($(now_ms) - t0))
		codes="$codes $STATUS"
		[[ $(header Retry-After) =~ ^[0-9]+$ ]] &&
		    [ "$(header Retry-After)" -ge 1 ] && [ "$(header Retry-After)" -le 60 ] ||
			bad_ra="$bad_ra 127.0.0.$c:'$(header Retry-After)'"
		[[ $BODY =~ $(re_err 503) ]] || bad_body="$bad_body 127.0.0.$c:'$BODY'"
		[ "$(header Content-Type)" = application/json ] ||
			bad_type="$bad_type 127.0.0.$c:'$(header Content-Type)'"
		has_header RateLimit-Remaining && counted="$counted 127.0.0.$c"
		[ "$ms" -lt "$MAX_MS" ] || slow="$slow 127.0.0.$c:${ms}ms"
	done
	is "${codes# }" "$(printf '503 %.0s' "$@" | sed 's/ $//')" "$desc: $# requests, every one 503"
	is "${bad_ra# }" "" "$desc: every 503 has Retry-After in 1..60"
	is "${bad_body# }${bad_type}" "" "$desc: every 503 has a JSON error body (application/json)"
	is "${counted# }" "" "$desc: no RateLimit-Remaining (nothing was counted)"
	is "${slow# }" "" "$desc: every answer in under $MAX_MS ms"
}

# check_fault_log NAME OFFSET ERE DESC SPAN_MS [REOPENED]: the store lines
# logged since OFFSET, over a fault that lasted SPAN_MS: exactly one error
# line, matching ERE, and a "still failing" line for each whole interval
# of the gateway's error pacing (10 s) the fault lasted at the most (none
# on a quiet machine: a slow one may stretch the fault past it); with
# REOPENED, the line that says the file was replaced, and nothing else.
check_fault_log() {
	local lines errs stills most=$(($5 / 10000)) others
	lines=$(new_store_lines "$1" "$2")
	errs=$(printf '%s\n' "$lines" | grep -E 'store error')
	stills=$(printf '%s\n' "$lines" | grep -cE 'store still failing')
	is "$(nlines "$errs")" 1 "$4: one error line in the log (not one per request)"
	like "$errs" "$3" "$4: ... naming the problem"
	ok "$([ "$stills" -le "$most" ]; echo $?)" \
	    "$4: ... and at most one line per 10 s after it ($stills in $5 ms)"
	others=$(printf '%s\n' "$lines" | grep -vcE 'store (error|still failing)')
	if [ -n "${6:-}" ]; then
		like "$lines" 'deleted or replaced: reopening' \
		    "$4: the log says the file was replaced"
		is "$others" 1 "$4: and nothing else about the store"
	else
		is "$others" 0 "$4: and nothing else about the store"
	fi
	diag "log: $lines"
}

# health_is CODE DESC [ERE]: GET /rlgate/health answers CODE: 200 with
# {"status":"ok"}, or 503 with {"status":"failing","reason":...} whose
# reason matches ERE.
health_is() {
	req "$base/rlgate/health"
	is "$STATUS" "$1" "$2: /rlgate/health answers $1"
	if [ "$1" = 200 ]; then
		is "$BODY" '{"status":"ok"}' "... {\"status\":\"ok\"}"
	else
		like "$BODY" "^\\{\"status\":\"failing\",\"reason\":\".*$3.*\"\\}\$" \
		    "... {\"status\":\"failing\"} with the reason"
	fi
	is "$(header Content-Type)" application/json "... as JSON"
}

# check_alive NAME DESC: the process started as $PID still runs.
check_alive() {
	is "$(cat "$T/$1.pid")" "$PID" "$2: the same process"
	pid_alive "$PID"
	ok $? "$2: ... which is still running"
}

# count DB CLIENT: the count stored for 127.0.0.CLIENT (empty if no row).
count() {
	sql "$1" "SELECT count FROM rlg_state WHERE client = '127.0.0.$2'"
}

# part NAME DIR SIZE ON_ERROR: dir ($T/DIR) and db (dir/rlgate.db), dir a
# tmpfs of SIZE (a plain directory when SIZE is -), and start NAME on db.
part() {
	dir="$T/$2"
	db="$dir/rlgate.db"
	if [ "$3" = - ]; then
		mkdir -p "$dir"
	else
		mount_tmpfs "$dir" "$3" || bail_out "mount tmpfs on $dir failed: $(cat "$T/mount.err")"
	fi
	start "$1" "$db" "$4"
}

# fill DIR: a filler file takes every free block of DIR's file system.
fill() {
	dd if=/dev/zero of="$1/filler" bs=4096 2>/dev/null
	: # dd ends with ENOSPC
	! head -c 4096 /dev/zero 2>/dev/null >>"$1/filler.more"
}

# fault NAME DESC ERE REOPENED CLIENT...: with the fault on (on_error =
# closed), during_fault "DESC, closed" for the CLIENTs, check_fault_log
# (ERE; REOPENED "reopened" or "-") and check_alive. A reopened file is
# noticed within a second: it waits for that first.
fault() {
	local name=$1 desc=$2 ere=$3 reopened=${4#-} off t0
	shift 4
	off=$(log_size "$name")
	t0=$(now_ms)
	# rlgate checks once a second whether the path still names its file
	[ -n "$reopened" ] && sleep 1.1
	during_fault "$desc, closed" "$@"
	check_fault_log "$name" "$off" "$ere" "$desc" $(($(now_ms) - t0)) \
	    "$reopened"
	check_alive "$name" "$desc"
}

# fault_gone NAME WHAT REMAINING NOTE CMD...: CMD ends the fault (OFF, the
# size of NAME's log before it); then a request from 127.0.0.1 gets 200
# ("WHAT: the running rlgate answers 200") with RateLimit-Remaining
# REMAINING ("... NOTE").
fault_gone() {
	local name=$1 what=$2 left=$3 note=$4
	shift 4
	OFF=$(log_size "$name")
	"$@" || bail_out "$* failed"
	req "$url"
	is "$STATUS" 200 "$what: the running rlgate answers 200"
	is "$(header RateLimit-Remaining)" "$left" "... $note"
}

# recovered NAME DESC: the log of NAME says, in one line since OFF, that
# the store recovered; the same process still runs; then it is stopped.
recovered() {
	local lines
	lines=$(new_store_lines "$1" "$OFF")
	like "$lines" 'store recovered' "$2: the log says the store recovered"
	is "$(nlines "$lines")" 1 "... in one line"
	check_alive "$1" "$2, after"
	stop_rlgate_fcgi "$1"
}

ensure_window_room $WINDOW 60

# ============================================================================
# 1. read-only file system (on_error = closed)
part ro ro 4m closed
start_lighttpd "$T/lighttpd.conf" "$PORT"
serve 3 1
is "$(header RateLimit-Remaining)" $((LIMIT - 3)) "read-only fs: 3 requests served from the tmpfs"
health_is 200 "read-only fs: before"

if mount -o remount,ro "$dir" 2>"$T/remount.err"; then
	# not expected: the kernel refuses while rlgate holds files open
	diag "mount -o remount,ro $dir succeeded while rlgate held the database"
	mount -o remount,rw "$dir" || bail_out "cannot remount $dir rw"
else
	diag "mount -o remount,ro while rlgate holds the database: $(head -1 "$T/remount.err")"
fi

# a copy of the database on a tmpfs over the directory, made read-only
sql "$db" "VACUUM INTO '$T/ro-copy.db'" || bail_out "VACUUM INTO failed"
mount_ro_copy "$dir" 16m "$T/ro-copy.db" || bail_out "a read-only tmpfs over $dir: $(cat "$T/mount.err")"
( : >"$dir/probe" ) 2>/dev/null && bail_out "$dir is still writable"
fault ro "read-only fs" '(read-only|Read-only|READONLY)' reopened 1 1 2 3 1
health_is 503 "read-only fs" '(read-only|readonly|READONLY)'

fault_gone ro "read-only fs: remounted rw" $((LIMIT - 4)) \
    "and counts on (RateLimit-Remaining $((LIMIT - 4)): the 503s were not counted)" \
    mount -o remount,rw "$dir"
health_is 200 "read-only fs: remounted rw"
is "$(count "$db" 1)" 4 "... the database holds count 4 for 127.0.0.1"
is "$(sql "$db" "SELECT count(*) FROM rlg_state")" 1 "... and no row for the clients refused"
recovered ro "read-only fs"

# ============================================================================
# 2. disk full (on_error = closed)
part full full 1m closed
serve 3 1
serve 1 2
is "$(header RateLimit-Remaining)" $((LIMIT - 1)) "disk full: 4 requests served from the tmpfs (2 clients)"
fill "$dir"
ok $? "disk full: the file system is full"
# new clients need a new row, existing ones an updated one: every commit
# appends a frame (page + header, more than one page) to the -wal
fault full "disk full" '(full|disk)' - 3 4 5 6 1 2 7 1

fault_gone full "disk full: filler deleted" $((LIMIT - 4)) \
    "and counts on (RateLimit-Remaining $((LIMIT - 4)): the 503s were not counted)" \
    rm -f "$dir/filler" "$dir/filler.more"
req --interface 127.0.0.3 "$url"
is "$STATUS" 200 "disk full: a client refused during the fault now gets 200"
is "$(header RateLimit-Remaining)" $((LIMIT - 1)) "... counted once (RateLimit-Remaining $((LIMIT - 1)))"
is "$(count "$db" 1)" 4 "... the database holds count 4 for 127.0.0.1"
is "$(count "$db" 2)" 1 "... count 1 for 127.0.0.2"
is "$(count "$db" 3)" 1 "... count 1 for 127.0.0.3"
is "$(sql "$db" "SELECT count(*) FROM rlg_state")" 3 "... and no row for the clients refused"
is "$(sql "$db" "PRAGMA integrity_check")" ok "... and the database is intact"
recovered full "disk full"

# ============================================================================
# 3. the database replaced by garbage (on_error = closed)
part corrupt corrupt - closed
serve 3 1
is "$(header RateLimit-Remaining)" $((LIMIT - 3)) "corrupt: 3 requests served"

# as an operator would: a new file moved over the live one, -wal and -shm
# removed
head -c 65536 /dev/urandom >"$dir/garbage" || bail_out "cannot write garbage"
mv -f "$dir/garbage" "$db" || bail_out "mv failed"
rm -f "$db-wal" "$db-shm"
fault corrupt "corrupt" '(not a database|corrupt|malformed)' reopened 1 2 1 3 1

fault_gone corrupt "corrupt: garbage removed" $((LIMIT - 1)) \
    "counting afresh in a new database (RateLimit-Remaining $((LIMIT - 1)))" \
    rm -f "$db"
like "$(sql "$db" "PRAGMA user_version")" '^[1-9][0-9]*$' "... which it created with its schema (user_version set)"
is "$(count "$db" 1)" 1 "... holding count 1 for 127.0.0.1"
is "$(sql "$db" "SELECT count(*) FROM rlg_state")" 1 "... and no other row"
recovered corrupt "corrupt"

# ============================================================================
# 4. disk full with on_error = open
part open full-open 1m open
serve 2 1
fill "$dir"
ok $? "disk full, open: the file system is full"
off=$(log_size open)
codes=
counted=
for c in 1 1 3 4 1 5 1; do
	req --interface "127.0.0.$c" "$url"
	codes="$codes $STATUS"
	has_header RateLimit-Remaining && counted="$counted 127.0.0.$c"
done
is "${codes# }" "200 200 200 200 200 200 200" "disk full, open: 7 requests (new and known clients) pass"
like "$BODY" "$RE_BODY_200" "disk full, open: success JSON body"
is "${counted# }" "" "disk full, open: no RateLimit-Remaining (nothing was counted)"
lines=$(new_store_lines open "$off")
is "$(nlines "$lines")" 1 "disk full, open: one line in the log"
like "$lines" 'store error: .*(full|disk).*on_error = open' "... naming the problem"
diag "log: $lines"
check_alive open "disk full, open"

rm -f "$dir/filler" "$dir/filler.more"
req "$url"
is "$STATUS" 200 "disk full, open: filler deleted: 200"
is "$(header RateLimit-Remaining)" $((LIMIT - 3)) \
    "... and counting resumes (RateLimit-Remaining $((LIMIT - 3)))"
is "$(count "$db" 1)" 3 "... the database holds count 3 for 127.0.0.1"
is "$(sql "$db" "SELECT count(*) FROM rlg_state")" 1 "... and no row for the clients let through"
check_alive open "disk full, open, after"
stop_rlgate_fcgi open

# ============================================================================
# 5., 6. commit = behind (the default): the database replaced by a
# read-only copy, then by garbage, under a running rlgate. The decisions
# are the table's, which stays mapped: requests are decided and counted on
# (never a 503) while the flush fails and says so; once the fault is gone
# the same process writes the database again, and it agrees with the
# answers.
COMMIT=

# behind_fault NAME DESC ERE CLIENT...: after the replacement is noticed,
# one request from each 127.0.0.CLIENT: each a 200 with RateLimit-Remaining
# (counted), in under MAX_MS; the log says the flush failed (ERE), and
# nothing about a store error; the same process runs.
behind_fault() {
	local name=$1 desc=$2 ere=$3 c t0 ms codes='' uncounted='' slow='' lines
	shift 3
	sleep 1.1
	for c in "$@"; do
		t0=$(now_ms)
		req --interface "127.0.0.$c" "$url"
		ms=$(($(now_ms) - t0))
		codes="$codes $STATUS"
		has_header RateLimit-Remaining || uncounted="$uncounted 127.0.0.$c"
		[ "$ms" -lt "$MAX_MS" ] || slow="$slow 127.0.0.$c:${ms}ms"
	done
	is "${codes# }" "$(printf '200 %.0s' "$@" | sed 's/ $//')" "$desc, behind: $# requests, every one decided (200)"
	is "${uncounted# }" "" "$desc, behind: each counted (RateLimit-Remaining)"
	is "${slow# }" "" "$desc, behind: every answer in under $MAX_MS ms"
	sleep 1.1
	lines=$(log_since "$name" "$OFF")
	like "$(printf '%s\n' "$lines" | grep 'flush failed')" "$ere" "$desc, behind: the log says the flush failed, and why"
	is "$(printf '%s\n' "$lines" | grep -c 'store error')" 0 "$desc, behind: no store error (no request failed)"
	diag "log: $(printf '%s\n' "$lines" | sort -u | head -4)"
	check_alive "$name" "$desc, behind"
}

# behind_agrees NAME DESC: one request from 127.0.0.1 is a 200, and the
# database, once the table is flushed to it, holds the count its
# RateLimit-Remaining says.
behind_agrees() {
	req "$url"
	is "$STATUS" 200 "$2: the running rlgate answers 200"
	is "$(sql_flushed "$T/$1.conf" "$db" "SELECT count FROM rlg_state WHERE client = '127.0.0.1'")" \
	    "$((LIMIT - $(header RateLimit-Remaining)))" "$2: the database is written again and agrees with the answer"
	check_alive "$1" "$2, after"
}

part behind behind 16m closed
[ -f "$db-table" ]
ok $? "behind: the table beside the database"
serve 3 1
sql_flushed "$T/behind.conf" "$db" "VACUUM INTO '$T/behind-copy.db'" || bail_out "VACUUM INTO failed"
mount_ro_copy "$dir" 16m "$T/behind-copy.db" || bail_out "a read-only tmpfs over $dir: $(cat "$T/mount.err")"
OFF=$(log_size behind)
behind_fault behind "read-only fs" '(read-only|READONLY)' 1 1 2 3 1
# decided from the table, but what it cannot write behind is at risk
health_is 503 "read-only fs, behind" '(read-only|readonly|READONLY)'
mount -o remount,rw "$dir" || bail_out "mount -o remount,rw $dir failed"
sleep 1.1
behind_agrees behind "read-only fs: remounted rw"
health_is 200 "read-only fs, behind: remounted rw"

head -c 65536 /dev/urandom >"$dir/garbage" || bail_out "cannot write garbage"
mv -f "$dir/garbage" "$db" || bail_out "mv failed"
rm -f "$db-wal" "$db-shm"
OFF=$(log_size behind)
behind_fault behind "corrupt" '(not a database|NOTADB|corrupt|malformed)' 1 2 1 3 1
rm -f "$db"
sleep 1.1
behind_agrees behind "corrupt: garbage removed"
like "$(sql "$db" "PRAGMA user_version")" '^[1-9][0-9]*$' "corrupt, behind: the new database has its schema"
stop_rlgate_fcgi behind

# ============================================================================
# 7. commit = behind on a full disk: the table's file is sparse, and its
# blocks are taken a group of 64 slots at a time, when the group's first
# client comes (a page first written on a full file system would kill
# the worker with SIGBUS). New clients whose group is not taken get the
# store's answer (on_error = closed: 503; clients land at random slots,
# so most of them), known ones are decided on, the worker lives, and once
# room is made new clients are admitted again.
dir="$T/tablefull"
db="$dir/rlgate.db"
mount_tmpfs "$dir" 8m || bail_out "mount tmpfs on $dir failed: $(cat "$T/mount.err")"
cat >"$T/tablefull.conf" <<CONF
[store]
path = $db
on_error = closed
commit = behind
max_clients = 2000
flush_ms = 200

[client]
key_secret = store-faults-table-secret

[policy default]
limit = $LIMIT
window = $WINDOW
key = header:X-API-Key
new_keys_per_ip = 0
CONF
start_rlgate_fcgi tablefull "$sock" "$T/tablefull.conf" 1 --threads 1
PID=$(cat "$T/tablefull.pid")
req -H "X-API-Key: known" "$url"
is "$STATUS" 200 "table, disk full: a client before the fault gets 200"
sleep 0.5
fill "$dir"
ok $? "table, disk full: the file system is full"
OFF=$(log_size tablefull)
codes=$(for i in $(seq 1 300); do
	curl -s -o /dev/null -w '%{http_code}\n' --max-time "$CURL_MAX_TIME" \
	    -H "X-API-Key: new-$i" "$url"
done | sort | uniq -c | awk '{printf "%s:%s ", $2, $1}')
diag "300 new clients on a full disk: $codes"
like "$codes" '(^| )503:[1-9][0-9]* ' "table, disk full: new clients past them get 503 (on_error = closed)"
is "$(printf '%s' "$codes" | tr ' ' '\n' | grep -cvE '^(200|503):|^$')" 0 "table, disk full: no other answer (no 000, no 502)"
req -H "X-API-Key: known" "$url"
is "$STATUS" 200 "table, disk full: the known client is still decided (200)"
is "$(header RateLimit-Remaining)" $((LIMIT - 2)) "... and counted"
like "$(log_since tablefull "$OFF" | grep 'store error' | head -1)" 'no room for new clients on its file system' \
    "table, disk full: the log says the table has no room"
check_alive tablefull "table, disk full"
rm -f "$dir/filler" "$dir/filler.more"
req -H "X-API-Key: after-room" "$url"
is "$STATUS" 200 "table, disk full: room made, a new client gets 200"
check_alive tablefull "table, disk full, after"
stop_rlgate_fcgi tablefull

done_testing
