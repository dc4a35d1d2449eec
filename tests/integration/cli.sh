#!/usr/bin/env bash
# cli.sh: rlgate's command line: options, exit codes (sysexits.h: 64 bad
# usage, 78 bad configuration), --check-config with file:line problems, the
# choice of config file, the shipped example config, and the [store]
# commit --check-config says applies (auto: behind where the table holds
# the file, else each and why; an explicit word as written).
: "${RLGATE_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/integration/lib.sh
. "$RLGATE_SRCDIR/tests/integration/lib.sh" || { echo "Bail out! cannot read lib.sh"; exit 99; }

setup_test timeout

# run [ENV=VALUE...] -- ARGS...: runs rlgate with a clean-ish environment,
# stdin from /dev/null (not a socket), bounded in time. Sets RC, OUT, ERR.
run() {
	split_envs "$@"
	shift "$ENVS_SHIFT"
	env -u GATEWAY_INTERFACE -u RLGATE_CONFIG "${ENVS[@]}" \
	    timeout 10 "$RLGATE_BIN" "$@" </dev/null >"$T/out" 2>"$T/err"
	RC=$?
	OUT=$(cat "$T/out")
	ERR=$(cat "$T/err")
}

# --- --version, --help, bad usage
run -- --version
is "$RC" 0 "--version exits 0"
like "$OUT" '^rlgate [0-9]+\.[0-9]+' "--version prints 'rlgate X.Y...'"

run -- --help
is "$RC" 0 "--help exits 0"
like "$OUT" '--config' "--help mentions --config"
like "$OUT" '--check-config' "--help mentions --check-config"
like "$OUT" '--threads' "--help mentions --threads"
like "$OUT" '--log' "--help mentions --log"
like "$OUT" '--version' "--help mentions --version"
# (docs.sh holds docs/rlgate.8 to exactly the options --help prints)

run -- --no-such-option
is "$RC" 64 "an unknown option exits 64"
isnt "$ERR" "" "an unknown option says so on stderr"

run -- unexpected-argument
is "$RC" 64 "a stray argument exits 64"

good="$T/good.conf"
write_rlgate_conf "$good" "$T/good.db" 5 2

for bad in 0 abc -1 "" 4x; do
	run -- --config "$good" --threads "$bad" --check-config
	is "$RC" 64 "--threads '$bad' exits 64"
done
run -- --config "$good" --threads
is "$RC" 64 "--threads without a value exits 64"
run -- --config "$good" --threads 257 --check-config
is "$RC" 64 "--threads 257 exits 64 (1 to 256)"
run -- --config "$good" --threads 256 --check-config
is "$RC" 0 "--threads 256 is accepted"

# --log is opened before anything else: a file that cannot be opened is bad
# usage (64), even when the config is bad too
run -- --config "$good" --log "$T/no-such-dir/rlgate.log"
is "$RC" 64 "--log in a missing directory exits 64"
like "$ERR" 'no-such-dir' "... and names the file"

# --- --check-config on a good file
run -- --config "$good" --check-config
is "$RC" 0 "--check-config on a good file exits 0"
is "$ERR" "" "--check-config on a good file prints nothing on stderr"
behind_auto="commit = behind (auto): decided in $T/good.db-table, written to the database every 1000 ms; each when run as CGI, one process per request"
is "$OUT" "$behind_auto
$good: configuration ok" "--check-config says which commit applies, then 'FILE: configuration ok' on stdout"
[ -e "$T/good.db" ] || [ -e "$T/good.db-table" ]
ok $((! $?)) "--check-config creates neither the database nor the table"

# --- which commit applies: auto resolved as a FastCGI worker resolves it,
# an explicit word as written; where auto cannot be behind, each and why
commit_line() {   # commit_line NAME STORE_LINES [POLICY_LINES]: RC, OUT, ERR
	printf '[store]\npath = %s\n%s\n%s\n' "$T/$1.db" "$2" "${3:-}" >"$T/$1.conf"
	run -- --config "$T/$1.conf" --check-config
}
commit_line flush 'flush_ms = 250'
is "$RC:$(head -1 <<<"$OUT")" "0:commit = behind (auto): decided in $T/flush.db-table, written to the database every 250 ms; each when run as CGI, one process per request" \
    "--check-config: commit = behind (auto), its flush_ms"
commit_line each 'commit = each'
is "$RC:$OUT" "0:commit = each: one SQLite transaction per decision
$T/each.conf: configuration ok" "--check-config: an explicit commit = each, as written"
commit_line behind 'commit = behind'
is "$RC:$(head -1 <<<"$OUT")" "0:commit = behind: decided in $T/behind.db-table, written to the database every 1000 ms" \
    "--check-config: an explicit commit = behind (no CGI note: CGI keeps it)"
commit_line slog 'commit = auto' $'[policy fast]\n[policy strict]\nalgorithm = sliding_log'
is "$RC:$(head -1 <<<"$OUT")" "0:commit = each (auto: [policy strict] is a sliding_log, whose log lives in the database): one SQLite transaction per decision" \
    "--check-config: auto with a sliding_log policy is each, and says why"
commit_line unbounded 'max_clients = 0'
is "$RC:$(head -1 <<<"$OUT")" "0:commit = each (auto: max_clients = 0, and the table is sized by it): one SQLite transaction per decision" \
    "--check-config: auto with max_clients = 0 is each, and says why"
commit_line slogflush $'flush_ms = 250' $'[policy strict]\nalgorithm = sliding_log'
is "$RC" 78 "flush_ms where auto gives each: exit 78"
is "$ERR" "$T/slogflush.conf:3: [store] flush_ms: commit = auto resolves to each here ([policy strict] is a sliding_log, whose log lives in the database): flush_ms applies only to commit = behind
rlgate: $T/slogflush.conf: 1 problem, not starting" "... naming why auto chose each, at the flush_ms line"
commit_line slogbehind $'commit = behind' $'[policy strict]\nalgorithm = sliding_log'
is "$RC" 78 "an explicit commit = behind with a sliding_log policy: exit 78"
like "$ERR" "slogbehind.conf:3: \\[store\\] commit: behind does not keep \\[policy strict\\]" "... at the commit line"
printf '[store]\nbackend = redis\nurl = redis://127.0.0.1:1\n' >"$T/redis.conf"
run -- --config "$T/redis.conf" --check-config
is "$RC:$OUT" "0:$T/redis.conf: configuration ok" "--check-config: no commit line for Redis"
ls "$T"/*-table >/dev/null 2>&1
ok $((! $?)) "--check-config made no table file"

run -- --config "$good" --threads 8 --check-config
is "$RC" 0 "--threads 8 is accepted"

# --- --check-config on a file with several problems: every one reported,
# each as file:line: with the right line number.
bad="$T/bad.conf"
cat >"$bad" <<'EOF'
; line 1: a comment
[store]
busy_timeout_ms = -5
on_error = sometimes

[headers]
style = fancy

[policy default]
algorithm = magic
limit = 0
window = abc
key = ip
limt = 5
this line is not ini
[nonsense]
EOF
# problem lines: 3 busy_timeout_ms, 4 on_error, 7 style, 10 algorithm,
# 11 limit, 12 window, 14 unknown key, 15 syntax, 16 unknown section
want_lines="3 4 7 10 11 12 14 15 16"
run -- --config "$bad" --check-config
is "$RC" 78 "--check-config on a bad file exits 78"
got_lines=$(grep -oE "^$bad:[0-9]+:" "$T/err" | sed -E 's/.*:([0-9]+):$/\1/' |
    sort -n | uniq | tr '\n' ' ' | sed 's/ $//')
is "$got_lines" "$want_lines" "every problem is reported at its line (file:line:)"
for l in $want_lines; do
	msg=$(grep -E "^$bad:$l: " "$T/err" | head -1)
	like "$msg" "^$bad:$l: .+" "line $l has a 'file:$l: message' line"
done
like "$(grep -E "^$bad:4: " "$T/err")" 'sometimes' "the on_error problem quotes the bad value"
like "$(grep -E "^$bad:14: " "$T/err")" 'limt' "the unknown key problem names the key"
diag "stderr of --check-config on the bad file:" "$ERR"

# an empty limit and window are problems too
cat >"$T/bad2.conf" <<'EOF'
[policy default]
limit =
window = 0
EOF
run -- --config "$T/bad2.conf" --check-config
is "$RC" 78 "an empty limit and a zero window exit 78"
like "$ERR" "$T/bad2.conf:2: " "the empty limit is reported at line 2"
like "$ERR" "$T/bad2.conf:3: " "the zero window is reported at line 3"

# a bad config stops a normal start as well (exit 78, before anything else)
run GATEWAY_INTERFACE=CGI/1.1 REQUEST_METHOD=GET REQUEST_URI=/api/v1/resources \
    REMOTE_ADDR=127.0.0.1 -- --config "$bad"
is "$RC" 78 "a bad config stops a CGI run with 78"

# --- a missing config file
run -- --config "$T/nope.conf" --check-config
is "$RC" 78 "a missing config file exits 78"
like "$ERR" "$T/nope.conf" "the message names the missing file"

# --- $RLGATE_CONFIG
run RLGATE_CONFIG="$bad" -- --check-config
is "$RC" 78 "\$RLGATE_CONFIG naming a bad file exits 78"
like "$ERR" "^$bad:[0-9]+: " "\$RLGATE_CONFIG's file is the one checked"

run RLGATE_CONFIG="$good" -- --check-config
is "$RC" 0 "\$RLGATE_CONFIG naming a good file exits 0"

run RLGATE_CONFIG="$bad" -- --config "$good" --check-config
is "$RC" 0 "--config wins over \$RLGATE_CONFIG"

run RLGATE_CONFIG="$T/nope.conf" -- --check-config
is "$RC" 78 "\$RLGATE_CONFIG naming a missing file exits 78"

# an empty $RLGATE_CONFIG is the same as none: the default path (which
# --help names) if it exists, else the built-in defaults
default_conf=$("$RLGATE_BIN" --help | sed -n 's/.*else \(.*\) if it exists.*/\1/p')
isnt "$default_conf" "" "--help names the default config path"
if [ -n "$default_conf" ] && [ ! -e "$default_conf" ]; then
	run RLGATE_CONFIG= -- --check-config
	default_dir=$(sed -n 's/^built-in defaults: path: directory \(.*\) does not exist: .*/\1/p' <<<"$ERR")
	if [ -z "$default_dir" ]; then
		is "$RC:$(tail -1 <<<"$OUT")" "0:built-in defaults: configuration ok" "an empty \$RLGATE_CONFIG runs on the built-in defaults"
		like "$(head -1 <<<"$OUT")" "^commit = behind \\(auto\\): decided in .*/rlgate.db-table," "... with commit = behind (auto)"
	else
		# the default database's directory is not there (nothing installed)
		is "$RC" 78 "an empty \$RLGATE_CONFIG checks the built-in defaults: their database's directory is missing here, exit 78"
		like "$ERR" "^built-in defaults: path: directory .* does not exist: create it" \
		    "... and says which directory to create"
	fi
else
	pass "an empty \$RLGATE_CONFIG: $default_conf exists here, not checked # SKIP"
	pass "... # SKIP"
fi

# --- the database's directory: missing, or not writable by the user
printf '[store]\npath = %s\n' "$T/no-such-dir/r.db" >"$T/nodir.conf"
run -- --config "$T/nodir.conf" --check-config
is "$RC" 78 "--check-config: the database's directory missing: exit 78"
is "$ERR" "$T/nodir.conf:2: path: directory $T/no-such-dir does not exist: create it for the user rlgate runs as (mkdir -p $T/no-such-dir; chown USER $T/no-such-dir)
$T/nodir.conf: 1 problem, not starting" "... names the directory and what to do"
printf '[store]\npath = %s\n' "$T/good.conf/r.db" >"$T/notdir.conf"
run -- --config "$T/notdir.conf" --check-config
is "$RC" 78 "--check-config: the database's directory a file: exit 78"
like "$ERR" "^$T/notdir.conf:2: path: directory $T/good.conf is not a directory" "... says so, at its line"
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
	mkdir -p "$T/ro-dir"
	chmod 755 "$T" "$T/ro-dir"
	printf '[store]\npath = %s\n' "$T/ro-dir/r.db" >"$T/rodir.conf"
	chmod 644 "$T/rodir.conf"
	setpriv --reuid=65534 --regid=65534 --clear-groups "$RLGATE_BIN" \
	    --config "$T/rodir.conf" --check-config >"$T/ro.out" 2>"$T/ro.err"
	is "$?" 78 "--check-config as a user who cannot write the directory: exit 78"
	like "$(cat "$T/ro.err")" "$T/ro-dir is not writable by this user \\(uid 65534\\)" "... names it and the user"
	run -- --config "$T/rodir.conf" --check-config
	is "$RC" 0 "... and the same file checked by its owner: exit 0"
else
	pass "an unwritable directory: needs root and setpriv # SKIP"
	pass "... # SKIP"
	pass "... # SKIP"
fi

# --- no socket on stdin and no GATEWAY_INTERFACE: refuses, clearly
run -- --config "$good"
isnt "$RC" 0 "without a FastCGI socket or GATEWAY_INTERFACE it exits non-zero"
isnt "$RC" 124 "... at once (does not wait)"
like "$ERR" '(FastCGI|GATEWAY_INTERFACE|spawn-fcgi)' "... with a message that says why"

# --- --hash-key: API keys on stdin, their client keys (k:HASH) on stdout
keyed="$T/keyed.conf"
printf '[store]\npath = %s\n[client]\nkey_secret = 0123456789abcdef0123456789abcdef\n' "$T/keyed.db" >"$keyed"
# hash_keys CONFIG TEXT: rlgate --hash-key with TEXT (printf) on stdin.
hash_keys() {
	printf "$2" | env -u GATEWAY_INTERFACE -u RLGATE_CONFIG timeout 10 \
	    "$RLGATE_BIN" --config "$1" --hash-key >"$T/out" 2>"$T/err"
	RC=$?
	OUT=$(cat "$T/out")
	ERR=$(cat "$T/err")
}
hash_keys "$keyed" 'abc\nsecond key\n'
is "$RC" 0 "--hash-key exits 0"
is "$(wc -l <"$T/out")" 2 "--hash-key: a line out per key in"
is "$(grep -cE '^k:[0-9a-f]{32}$' "$T/out")" 2 "--hash-key: each line is k: and 32 hex digits"
is "$ERR" "" "--hash-key with a key_secret: nothing on stderr"
first=$(sed -n 1p "$T/out")
isnt "$first" "$(sed -n 2p "$T/out")" "--hash-key: two keys, two hashes"
hash_keys "$keyed" 'abc\r\n'
is "$OUT" "$first" "--hash-key: a CRLF line end is not part of the key"
hash_keys "$good" 'abc\n'
is "$RC" 0 "--hash-key without key_secret exits 0"
isnt "$OUT" "$first" "--hash-key: the hash depends on key_secret"
like "$ERR" 'key_secret is not set' "--hash-key without key_secret says the hashes are unkeyed"
hash_keys "$keyed" 'abc\n\nxyz\n'
is "$RC" 64 "--hash-key: an empty line exits 64"
like "$ERR" 'line 2 is empty' "... naming the line"
is "$OUT" "$first" "... after the keys before it"

# --- the shipped example config is valid
# (as the build made it from the template, its directories filled in)
example="${RLGATE_BUILDDIR:-.}/gen/www/rlgate.conf.example"
[ -f "$example" ] || bail_out "no $example: make builds it"
is "$(grep -c '@[a-z]*@' "$example")" 0 "the example config has no @dir@ left"
# its database where this test may write it
sed "s|^path = /.*/lib/rlgate/rlgate.db\$|path = $T/example.db|" "$example" >"$T/example.conf"
grep -q "^path = $T/example.db\$" "$T/example.conf"
ok $? "www/rlgate.conf.example sets path = LOCALSTATEDIR/lib/rlgate/rlgate.db"
run -- --config "$T/example.conf" --check-config
is "$RC" 0 "www/rlgate.conf.example passes --check-config"
is "$ERR" "" "www/rlgate.conf.example has no problems"
# the example an operator starts from keeps the fast path: no policy of it
# (a sliding_log) turns commit = auto into each for the whole store
like "$(head -1 <<<"$OUT")" '^commit = behind \(auto\): decided in ' \
    "www/rlgate.conf.example: commit = behind (auto), the decision table"
# and it names every key
for key in path busy_timeout_ms on_error style report_exempt errors ipv6_prefix forwarded_header level algorithm limit window burst key mode exempt methods policies; do
	grep -qE "^$key = " "$example"
	ok $? "www/rlgate.conf.example sets $key"
done

done_testing
