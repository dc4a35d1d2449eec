#!/usr/bin/env bash
# files.sh: the files rlgate writes. A database (and its -wal, -shm and
# decision table) that others may read or write draws one warning at
# start, in the log,
# and one in --check-config's output, with the modes and the chmod, and
# the exit status stays 0; a database rlgate creates is 0600 and draws
# none. --log refuses a symbolic link (exit 64, the file it points to
# untouched), creates the log with mode 0640 (whatever the umask lets
# through of it), and warns about an existing log others may read.
# SIGUSR1 reopens the log after a rotation moved it (the lines after it go
# to a new file at the path, the worker lives); without --log it changes
# nothing.
: "${RLGATE_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/integration/lib.sh
. "$RLGATE_SRCDIR/tests/integration/lib.sh" || { echo "Bail out! cannot read lib.sh"; exit 99; }

setup_test spawn-fcgi sqlite3 curl timeout

# check ARGS...: rlgate --check-config ARGS, bounded. Sets RC, OUT, ERR.
check() {
	env -u GATEWAY_INTERFACE -u RLGATE_CONFIG timeout 10 "$RLGATE_BIN" \
	    --check-config "$@" </dev/null >"$T/out" 2>"$T/err"
	RC=$?
	OUT=$(cat "$T/out")
	ERR=$(cat "$T/err")
}

mode_of() {
	stat -c %a "$1"
}

make_rundir
db="$T/files.db"
conf="$T/rlgate.conf"
write_rlgate_conf "$conf" "$db" 5 60
# what --check-config says first: commit = auto is behind here
commit_line="commit = behind (auto): decided in $db-table, written to the database every 1000 ms; each when run as CGI, one process per request"

# --- a database rlgate creates: 0600, no warning
start_rlgate_fcgi made "$run/made.sock" "$conf" 1 --threads 1 \
    --log "$T/made-log"
PORT=$(free_port) || bail_out "no free port"
write_lighttpd_demo_conf "$T/lighttpd.conf" "$PORT" "$run" "$run/made.sock"
start_lighttpd "$T/lighttpd.conf" "$PORT"
url="http://127.0.0.1:$PORT/api/v1/resources"
req "$url"
is "$STATUS" 200 "a request: 200"
is "$(mode_of "$db")" 600 "the database rlgate created has mode 0600"
is "$(mode_of "$db-wal")" 600 "so has its -wal"
is "$(mode_of "$db-shm")" 600 "and its -shm"
is "$(mode_of "$db-table")" 600 "and the decision table (commit = behind, the default)"
check --config "$conf"
is "$RC" 0 "--check-config: exit 0"
is "$OUT" "$commit_line
$conf: configuration ok" "--check-config: no warning for mode 0600"
is "$(grep -c warning "$T/made-log")" 0 "no warning in the log"
stop_rlgate_fcgi made

# --- an existing database of mode 0644 (and its files 0644 and 0666);
# the worker stopped gracefully, closing the database, which took its
# -wal and -shm away: empty ones stand for those a running or killed
# worker leaves
[ -e "$db-wal" ] || : >"$db-wal"
[ -e "$db-shm" ] || : >"$db-shm"
chmod 0644 "$db" "$db-shm" "$db-table"
chmod 0666 "$db-wal"
check --config "$conf"
is "$RC" 0 "--check-config with a 0644 database: still exit 0"
is "$ERR" "" "--check-config: nothing on stderr"
like "$OUT" "warning: store $db: the database has mode 0644 \\(group-readable, world-readable\\), its -wal has mode 0666 \\(group-readable, group-writable, world-readable, world-writable\\), its -shm has mode 0644 \\(group-readable, world-readable\\), its -table has mode 0644 \\(group-readable, world-readable\\): users other than rlgate's can read the clients' state and change their counts" \
    "--check-config names each file, its mode and what others may do"
like "$OUT" "chmod go-rwx $db $db-wal $db-shm $db-table" "--check-config gives the chmod"
like "$OUT" "$conf: configuration ok\$" "--check-config: the verdict comes last"

: >"$T/made-log"
start_rlgate_fcgi made "$run/made.sock" "$conf" 1 --threads 1 \
    --log "$T/made-log"
req "$url"
is "$STATUS" 200 "served as before"
is "$(grep -c 'warning: store' "$T/made-log")" 1 "one warning line in the log at start"
like "$(grep 'warning: store' "$T/made-log")" \
    "^${LOG_RE}warning: store $db: the database has mode 0644 .*: chmod go-rwx $db" \
    "the log's warning names the database, its mode and the chmod"
is "$(mode_of "$db")" 644 "rlgate leaves the mode as the operator set it"
stop_rlgate_fcgi made
chmod 0600 "$db" "$db-wal" "$db-shm" "$db-table"
check --config "$conf"
is "$OUT" "$commit_line
$conf: configuration ok" "after the chmod: no warning"

# --- the log: a symbolic link is refused, the file behind it untouched
printf 'precious\n' >"$T/target"
ln -s "$T/target" "$T/link.log"
env -u GATEWAY_INTERFACE timeout 10 "$RLGATE_BIN" --config "$conf" \
    --log "$T/link.log" </dev/null >"$T/out" 2>"$T/err"
is "$?" 64 "--log on a symbolic link: exit 64"
like "$(cat "$T/err")" "--log $T/link.log: is a symbolic link, which rlgate does not follow" \
    "--log on a symbolic link: says so"
is "$(cat "$T/target")" precious "the file behind the link is untouched"
# a symbolic link to a file that does not exist yet: not created either
ln -s "$T/new-target" "$T/dangling.log"
env -u GATEWAY_INTERFACE timeout 10 "$RLGATE_BIN" --config "$conf" \
    --log "$T/dangling.log" </dev/null >/dev/null 2>&1
is "$?" 64 "--log on a dangling symbolic link: exit 64"
ok "$([ ! -e "$T/new-target" ]; echo $?)" "nothing created behind it"
check --config "$conf" --log "$T/link.log"
is "$RC" 0 "--check-config --log on a link: exit 0"
like "$OUT" "warning: the log $T/link.log is a symbolic link: rlgate will refuse to open it \\(exit 64\\)" \
    "--check-config warns that the log would be refused"

# spawn-fcgi: the worker exits at once, nothing served
spawn-fcgi -s "$run/link.sock" -M 0666 -F 1 -P "$T/link.pid" -- \
    "$RLGATE_BIN" --config "$conf" --log "$T/link.log" \
    </dev/null >"$T/link.spawn" 2>&1
sleep 0.5
p=$(cat "$T/link.pid" 2>/dev/null)
alive=no
if [ -n "$p" ]; then
	track_pid "$p"
	pid_alive "$p" && alive=yes
fi
is "$alive" no "under spawn-fcgi the worker refuses to start"
is "$(cat "$T/target")" precious "the file behind the link is still untouched"

# --- the log is created 0640, with a permissive umask too
(umask 000 && start_rlgate_fcgi fresh "$run/fresh.sock" "$conf" 1 \
    --threads 1 --log "$T/fresh-log")
track_pid $(cat "$T/fresh.pid")
wait_for_file "$T/fresh-log" 5
is "$(mode_of "$T/fresh-log")" 640 "--log creates the file with mode 0640 (umask 000)"
stop_rlgate_fcgi fresh

# --- an existing log others may read and write: one warning line
: >"$T/open-log"
chmod 0666 "$T/open-log"
start_rlgate_fcgi open "$run/open.sock" "$conf" 1 --threads 1 \
    --log "$T/open-log"
like "$(grep 'warning: the log' "$T/open-log")" \
    "warning: the log $T/open-log has mode 0666 \\(group-writable, world-readable, world-writable\\): users other than rlgate's can write into it .*: chmod g-w,o-rw $T/open-log" \
    "a log of mode 0666: a warning with the chmod"
is "$(grep -c 'warning: the log' "$T/open-log")" 1 "one line"
stop_rlgate_fcgi open
check --config "$conf" --log "$T/open-log"
is "$RC" 0 "--check-config --log on a 0666 log: exit 0"
like "$OUT" "warning: the log $T/open-log has mode 0666" "--check-config warns about it too"
chmod 0640 "$T/open-log"
check --config "$conf" --log "$T/open-log"
is "$OUT" "$commit_line
$conf: configuration ok" "a 0640 log: no warning"

# --- SIGUSR1: the log reopened after a rotation moved it away
write_rlgate_conf "$T/rot.conf" "$T/rot.db" 1 60
start_rlgate_fcgi rot "$run/made.sock" "$T/rot.conf" 1 --threads 2 \
    --log "$T/rot-log"
rot_pid=$(cat "$T/rot.pid")
req --interface 127.0.0.2 "$url"
req --interface 127.0.0.2 "$url"
is "$STATUS" 429 "rotation: a rejection to log"
mv "$T/rot-log" "$T/rot-log.1"
kill -USR1 "$rot_pid"
wait_for_file "$T/rot-log" 5
req --interface 127.0.0.3 "$url"
req --interface 127.0.0.3 "$url"
is "$STATUS" 429 "after SIGUSR1: the worker answers (a rejection to log)"
pid_alive "$rot_pid"
ok $? "after SIGUSR1: the same worker runs"
ok "$([ -f "$T/rot-log" ]; echo $?)" "after SIGUSR1: a new file at the log's path"
is "$(mode_of "$T/rot-log")" 640 "... of mode 0640"
is "$(grep -c 'client=127.0.0.3' "$T/rot-log")" 1 "... which gets the lines after it"
is "$(grep -c 'client=127.0.0.2' "$T/rot-log")" 0 "... and none before"
is "$(grep -c 'client=127.0.0.2' "$T/rot-log.1")" 1 "the moved file kept the lines before it"
is "$(grep -c 'client=127.0.0.3' "$T/rot-log.1")" 0 "... and got none after"
stop_rlgate_fcgi rot
# without --log (stderr is the wrapper's file): nothing to reopen, and no stop
start_rlgate_fcgi plain "$run/made.sock" "$T/rot.conf" 1 --threads 1
plain_pid=$(cat "$T/plain.pid")
kill -USR1 "$plain_pid"
sleep 0.3
req --interface 127.0.0.4 "$url"
is "$STATUS" 200 "without --log, after SIGUSR1: the worker answers"
pid_alive "$plain_pid"
ok $? "... the same worker"
stop_rlgate_fcgi plain

done_testing
