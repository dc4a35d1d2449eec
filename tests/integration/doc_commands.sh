#!/usr/bin/env bash
# doc_commands.sh: every command the docs show runs, as shown.
#
# It reads the fenced blocks of README.md and docs/*.md, and db/queries.sql:
#   - in a block tagged sh, bash, shell or console: every line that is not
#     a comment (a line ending in \ goes on with the next);
#   - in an untagged block: a line after a "$ " prompt (and its "> "
#     continuation lines), a line after a "sqlite> " prompt (and its
#     "...> " lines), an ACL line (a Redis command), and any other line
#     whose first word is a command (a program, a shell builtin, rlgate, a
#     path to the tree's scripts); blocks tagged with a config language
#     (ini, lighttpd, caddyfile, yaml...) hold no commands;
#   - in db/queries.sql: every SQL statement, and in its comments the
#     indented lines that are commands ("sqlite> ", a dot command, a
#     program).
# Each runs against a scratch setup this script makes: rlgate under
# spawn-fcgi (2 processes x 2 threads, the demo's policy) behind the
# demo's lighttpd, its SQLite database, a redis-server, with the paths,
# ports and hosts the docs name replaced by the scratch ones (REPLACE).
# A shell command must exit 0 (or the status EXPECT names); a SQL
# statement or sqlite3 dot command must be accepted by sqlite3 against
# the gateway's database; an ACL line must be accepted by redis-server.
# A command that cannot run here is named in SKIP with the reason; one
# that is neither run (RUN) nor listed fails the test, so that a command
# added to the docs is either run here or explicitly excused.
# Then: the sizes the docs give for the decision table are the real
# table's (264 bytes an entry, 354,506,800 bytes for a million), and the
# docs stand alone: no reference to files or articles outside the
# repository or to issues, README.md's glossary explains its terms,
# docs/benchmarks.md starts with the current figures.
: "${RLGATE_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/integration/lib.sh
. "$RLGATE_SRCDIR/tests/integration/lib.sh" || { echo "Bail out! cannot read lib.sh"; exit 99; }

setup_test sqlite3 curl spawn-fcgi redis-server redis-cli timeout
S=$RLGATE_SRCDIR

# ---- what is not run, and why (ERE on the command as the doc writes it) --

SKIP=(
	'^bash scripts/demo\.sh$'
	"the demo installs packages with apt-get as root and serves on port 8080; scripts.sh checks demo.sh, and this test runs the demo's commands against a gateway like it"
	'^bash scripts/test\.sh$'
	'the whole suite: about 30 minutes, as root (it installs packages); CI runs it'
	'^make -C [^ ]+ (bench|soak)|^BASE_BIN=.* make |^tests/bench/|^RLGATE_SRCDIR=.*tests/bench/'
	'a benchmark: minutes each (bench_smoke.sh runs them shortened)'
	'^autoreconf |^\./configure|^make( |$)'
	'builds, tests or installs the tree itself (scripts/build.sh, make check and install.sh do)'
	'^dpkg-buildpackage |^dpkg '
	'builds or installs the Debian package as root (tests/package.sh builds it)'
	'^adduser |^install .*/etc/systemd/|^systemctl '
	'changes the system: a user, systemd units (systemd.sh runs the units under a private systemd)'
	'^a2enmod '
	"changes the machine's Apache as root (apache.sh loads the modules in its own config)"
	'^rlgate \[|^rlgate --version \|'
	'a usage synopsis, not a command (docs.sh holds rlgate(8) to --help)'
	'^redis-cli (-c )?-h 10\.0\.0\.5 -p 7000|^redis-cli --cluster |^for m in \$\(redis-cli -h 10\.0\.0\.5'
	'needs a Redis Cluster on several nodes (redis_cluster.sh drives one)'
)

# ---- what is run, and how (ERE on the command as the doc writes it) -------
# sh: bash -c CMD; spawn: spawn-fcgi that forks (-F, -P), its processes
# checked up, then stopped; spawn_fg: spawn-fcgi -n, in the background,
# checked up, then stopped; cgi: one CGI request (GATEWAY_INTERFACE set).

# shellcheck disable=SC2034  # read through match's nameref
RUN=(
	'^curl ' sh
	'^for i in [0-9 ]+; do curl ' sh
	'^sqlite3 ' sh
	'^rlgate ' sh
	'^redis-cli ' sh
	'^bash scripts/demo\.sh stop$' sh
	'^kill -(USR1|HUP|TERM) ' sh
	'^install -d ' sh
	'^(du|ls) ' sh
	'^spawn-fcgi .* -n ' spawn_fg
	'^spawn-fcgi ' spawn
	'^exec [^ ]*rlgate ' cgi
)

# Exit statuses other than 0 that a doc shows (ERE, status).
# shellcheck disable=SC2034  # read through match's nameref
EXPECT=(
	'^rlgate --check-config --config bad\.conf$' 78
)

# ---- the scratch setup -----------------------------------------------------

make_rundir
conf=$T/rlgate.conf
db=$T/rlgate.db
write_rlgate_conf "$conf" "$db" 5 60
start_rlgate_fcgi gw "$sock" "$conf" 2 --threads 2
demo_lighttpd
# shellcheck disable=SC2119  # a free port
start_test_redis
mkdir -p "$T/doc" "$T/bin" "$T/tree/scripts"
chmod 755 "$T/doc"
ln -s "$RLGATE_BIN" "$T/bin/rlgate"
# the tree the commands run in: scripts/demo.sh of its own, so that
# `demo.sh stop` stops no demo of the source tree
cp "$S/scripts/demo.sh" "$T/tree/scripts/"
printf 'my-api-key\nanother key\n' >"$T/keys"
# bad.conf: the problems docs/operations.md shows --check-config reporting
cat >"$T/bad.conf" <<'EOF'
[store]
path =
busy_timeout_ms = abc
[policy default]
limit = 0
algorithm = leaky
[bogus]
EOF
# strict.conf: a sliding_log policy, which takes commit = each
cat >"$T/strict.conf" <<EOF
[store]
path = $T/strict.db
[policy strict]
algorithm = sliding_log
limit = 5
window = 10
EOF

# What the docs name, and what stands for it here. Literal strings, in
# order: the packaged and the hand-installed spellings both.
REPLACE=(
	/etc/rlgate/rlgate.conf "$conf"
	/etc/rlgate.conf "$conf"
	'--config FILE' "--config $conf"
	'< KEYS' "< $T/keys"
	/var/lib/rlgate/rlgate.db "$db"
	demo/rlgate.db "$db"
	/var/backups/rlgate.db "$T/backup.db"
	/run/rlgate/rlgate.sock "$T/doc/rlgate.sock"
	/run/rlgate/rlgate.pid "$T/doc/rlgate.pid"
	/var/log/rlgate/rlgate.log "$T/doc/rlgate.log"
	/run/rlgate "$T/doc"
	/usr/local/bin/rlgate "$RLGATE_BIN"
	/usr/sbin/rlgate "$RLGATE_BIN"
	'-u rlgate -g rlgate ' ''
	'127.0.0.1:8080' "127.0.0.1:$PORT"
	'redis-cli ' "redis-cli -h 127.0.0.1 -p $RPORT "
	' bad.conf' " $T/bad.conf"
	' strict.conf' " $T/strict.conf"
)

# spawn-fcgi gives a socket to another owner only as root
[ "$(id -u)" -eq 0 ] || REPLACE+=('-U www-data -G www-data' "-U $(id -un) -G $(id -gn)")

replace() {
	local s=$1 i
	for ((i = 0; i < ${#REPLACE[@]}; i += 2)); do
		s=${s//"${REPLACE[i]}"/"${REPLACE[i + 1]}"}
	done
	printf '%s' "$s"
}

# ---- extracting the commands -------------------------------------------------
# Each command: WHERE<TAB>KIND<TAB>TEXT, KIND one of sh (a shell command),
# sql (for sqlite3), redis (one Redis command), maybe (a line of an
# untagged block: a command if its first word is one).

extract_md() {
	awk -v file="$1" '
	function emit() {
		# a trailing comment (one without quotes) is not the command
		if (kind == "sh" && match(cur, /[ \t]+#[^\047"]*$/))
			cur = substr(cur, 1, RSTART - 1)
		if (cur != "") printf "%s:%d\t%s\t%s\n", file, at, kind, cur
		cur = ""
	}
	function start(k, text) { emit(); kind = k; at = NR; cur = text }
	/^```/ {
		if (!inb) { inb = 1; tag = substr($0, 4); gsub(/[ \t]/, "", tag); cur = ""; next }
		emit(); inb = 0; next
	}
	!inb { next }
	tag ~ /^(sh|bash|shell|console)$/ {
		line = $0
		if (cur != "" && cur ~ /\\$/) { sub(/\\$/, "", cur); sub(/^[ \t]+/, " ", line); cur = cur line; next }
		emit()
		sub(/^\$ /, "", line)
		if (line ~ /^[ \t]*(#|$)/) next
		start("sh", line); next
	}
	tag != "" { next }
	/^\$ / { line = $0; sub(/^\$ /, "", line); start("sh", line); next }
	/^> / && kind == "sh" && cur != "" { line = $0; sub(/^> +/, " ", line); cur = cur line; next }
	/^sqlite> / { line = $0; sub(/^sqlite> /, "", line); start("sql", line); next }
	/^ *\.\.\.> / && kind == "sql" && cur != "" { line = $0; sub(/^ *\.\.\.> +/, " ", line); cur = cur line; next }
	{ emit() }
	/^[ \t]*(#|$)/ { next }
	/^ACL / { start("redis", $0); emit(); next }
	{ line = $0; sub(/^[ \t]+/, "", line); start("maybe", line); emit() }
	' "$S/$1"
}

extract_sql() {
	awk -v file="$1" '
	/^--/ {
		body = substr($0, 3)
		if (body !~ /^  +[^ ]/) next
		sub(/^ +/, "", body)
		if (body ~ /^sqlite> /) { sub(/^sqlite> /, "", body); kind = "sql" }
		else if (body ~ /^\./) kind = "sql"
		else kind = "maybe"
		printf "%s:%d\t%s\t%s\n", file, NR, kind, body
		next
	}
	/^[ \t]*$/ { next }
	{
		if (stmt == "") { at = NR; stmt = $0 } else stmt = stmt " " $0
		if ($0 ~ /;[ \t]*$/) { printf "%s:%d\tsql\t%s\n", file, at, stmt; stmt = "" }
	}
	END { if (stmt != "") printf "%s:%d\tsql\t%s\n", file, at, stmt }
	' "$S/$1"
}

cmds=$T/commands
{
	extract_md README.md
	for f in "$S"/docs/*.md; do
		extract_md "docs/${f##*/}"
	done
	extract_sql db/queries.sql
} >"$cmds"
[ -s "$cmds" ] || bail_out "no commands found in the docs"

# is_command WORD: true if WORD is a program or a shell builtin
# (asked of a shell without this script's functions), rlgate or a path to
# one of the tree's scripts; not a shell keyword.
is_command() {
	case $1 in
	'' | '{' | '}' | '!' | '[[' | ']]' | '(' | ')') return 1 ;;
	rlgate | */rlgate | scripts/* | tests/* | ./*) return 0 ;;
	esac
	# shellcheck disable=SC2016  # $1 is the inner shell's
	case $(env -i PATH="$PATH" bash --norc --noprofile -c 'type -t "$1"' _ "$1" 2>/dev/null) in
	file | builtin) return 0 ;;
	esac
	# a keyword (for, if, time...) starts prose as often as a command
	return 1
}

# first_word TEXT: the first word after VAR=VALUE assignments.
first_word() {
	local w
	for w in $1; do
		case $w in
		[A-Za-z_]*=*) continue ;;
		esac
		printf '%s' "$w"
		return
	done
}

# match TABLE_NAME TEXT: the value paired with the first ERE of the table
# that matches TEXT (nothing, status 1, if none does).
match() {
	local -n tab=$1
	local i
	for ((i = 0; i < ${#tab[@]}; i += 2)); do
		if [[ $2 =~ ${tab[i]} ]]; then
			printf '%s' "${tab[i + 1]}"
			return 0
		fi
	done
	return 1
}

# ---- running them --------------------------------------------------------------

# run_sh TEXT: the command, replaced, in the scratch tree, bounded; the
# output in $T/out.
run_sh() {
	(cd "$T/tree" && PATH="$T/bin:$PATH" timeout 20 bash -c "$1") \
	    </dev/null >"$T/out" 2>&1
}

# stop_doc_gateway: the processes a doc's spawn-fcgi started.
stop_doc_gateway() {
	local pids
	pids=$(cat "$T/doc/rlgate.pid" 2>/dev/null)
	# shellcheck disable=SC2086
	[ -n "$pids" ] && STOP_GRACE_MS=3000 stop_pids $pids
	rm -f "$T/doc/rlgate.sock" "$T/doc/rlgate.pid"
}

# spawned_up: the socket is there and every pid in the pid file runs.
spawned_up() {
	local p n=0
	[ -S "$T/doc/rlgate.sock" ] || return 1
	# shellcheck disable=SC2013  # one pid a line
	for p in $(cat "$T/doc/rlgate.pid" 2>/dev/null); do
		pid_alive "$p" || return 1
		n=$((n + 1))
	done
	[ $n -gt 0 ]
}

ran=0
skipped=0
declare -A used_skip=()
while IFS=$'\t' read -r where kind text; do
	t=${text//#/\\#}     # TAP reads a bare '#' as a directive
	if [ "$kind" = maybe ]; then
		w=$(first_word "$text")
		is_command "$w" || continue
		# shellcheck disable=SC2209  # the kind's name, not a command
		kind=sh
	fi
	case $kind in
	sql)
		ran=$((ran + 1))
		if sqlite3 -bail -cmd '.timeout 5000' -cmd '.parameter set :limit 60' \
		    "$db" "$(replace "$text")" </dev/null >"$T/out" 2>&1 &&
		    ! grep -qE '^(Error|Parse error)' "$T/out"; then
			pass "$where: sqlite3 accepts: $t"
		else
			fail "$where: sqlite3 accepts: $t" "$(head -5 "$T/out")"
		fi
		continue
		;;
	redis)
		ran=$((ran + 1))
		read -ra words <<<"$text"
		out=$(timeout 5 redis-cli -h 127.0.0.1 -p "$RPORT" "${words[@]}" 2>&1)
		is "$out" OK "$where: redis-server accepts: $t"
		continue
		;;
	esac
	if reason=$(match SKIP "$text"); then
		skipped=$((skipped + 1))
		used_skip[$reason]=1
		pass "$where: not run here: $t ($reason)"
		continue
	fi
	if ! mode=$(match RUN "$text"); then
		fail "$where: a command neither run nor listed in doc_commands.sh: $t" \
		    "run it (RUN, REPLACE) or say in SKIP why it cannot run here"
		continue
	fi
	want=$(match EXPECT "$text") || want=0
	cmd=$(replace "$text")
	ran=$((ran + 1))
	case $mode in
	sh)
		run_sh "$cmd"
		rc=$?
		;;
	spawn)
		stop_doc_gateway
		run_sh "$cmd"
		rc=$?
		if [ $rc -eq 0 ]; then
			# shellcheck disable=SC2046
			track_pid $(cat "$T/doc/rlgate.pid" 2>/dev/null)
			sleep 0.5
			spawned_up || { rc=1; echo "rlgate is not up: $(tail -3 "$T/doc/rlgate.log" 2>/dev/null)" >>"$T/out"; }
		fi
		;;
	spawn_fg)
		stop_doc_gateway
		(cd "$T/tree" && PATH="$T/bin:$PATH" exec bash -c "exec $cmd") </dev/null >"$T/out" 2>&1 &
		fg=$!
		track_pid "$fg"
		echo "$fg" >"$T/doc/rlgate.pid"
		if wait_until 10000 spawned_up && sleep 0.5 && spawned_up; then
			rc=0
		else
			rc=1
		fi
		;;
	cgi)
		(cd "$T/tree" && PATH="$T/bin:$PATH" GATEWAY_INTERFACE=CGI/1.1 \
		    SERVER_PROTOCOL=HTTP/1.1 SERVER_NAME=127.0.0.1 SERVER_PORT=80 \
		    REQUEST_METHOD=GET REQUEST_URI=/api/v1/resources \
		    REMOTE_ADDR=127.0.0.9 timeout 20 bash -c "$cmd") \
		    </dev/null >"$T/out" 2>&1
		rc=$?
		grep -q '"status":"success"' "$T/out" || rc=1
		;;
	esac
	if [ "$rc" -eq "$want" ]; then
		pass "$where: runs (exit $want): $t"
	else
		fail "$where: runs (exit $want): $t" "exit status $rc: $cmd" "$(head -5 "$T/out")"
	fi
done <"$cmds"
stop_doc_gateway

# ---- the decision table's size, as the docs state it --------------------------
# Two tables whose indexes are the same size differ by one entry: its size.
for n in 1000000 1000001; do
	printf '[store]\npath = %s\nmax_clients = %s\n[policy default]\nlimit = 5\nwindow = 60\n' \
	    "$T/size$n.db" "$n" >"$T/size$n.conf"
	"$RLGATE_BIN" --config "$T/size$n.conf" --reset size.probe >"$T/out" 2>&1 ||
		bail_out "no table for max_clients = $n: $(head -3 "$T/out")"
done
million=$(stat -c %s "$T/size1000000.db-table")
entry=$(($(stat -c %s "$T/size1000001.db-table") - million))
# doc_figures PATTERN: the numbers PATTERN finds in the docs (lines joined,
# roff escapes and the commas of numbers dropped), one a line: FILE NUMBER.
doc_figures() {
	local f
	for f in "$S"/README.md "$S"/docs/*.md "$S"/docs/*.[0-9]; do
		tr '\n' ' ' <"$f" | sed -E 's/\\-/-/g; s/\\f[BIRP]//g; s/([0-9]),([0-9]{3})/\1\2/g; s/([0-9]),([0-9]{3})/\1\2/g; s/ +/ /g' |
		    grep -oE "$1" | grep -oE '[0-9]+' | head -1000 | sed "s|^|${f#"$S"/} |"
	done
}
per_entry='[0-9]+ bytes an entry|entry is [0-9]+ bytes|[0-9]+ bytes (per|a) client it can hold'
bad=$(doc_figures "$per_entry" |
    awk -v want="$entry" '$2 != want')
is "$bad" "" "the docs state the table's $entry bytes an entry (sizeof (struct tbl_entry))"
n=$(doc_figures "$per_entry" | wc -l)
between "$n" 3 1000 "the docs state the bytes an entry ($n times)"
bad=$(doc_figures '[0-9]{9} bytes' | awk -v want="$million" '$2 != want')
is "$bad" "" "the docs state the table of a million entries as its $million bytes (ls -l)"

# ---- the docs stand alone, and speak of the product ------------------------------
# (a clone holds nothing outside the repository; issues and how the work
# was organised are no part of the product)
out=$(grep -niE "\.\./shared|\bseed/|the seed's|as in the seed|origin article|\bissue [0-9]+|\bissues? #[0-9]+|(this|last|next|earlier) (round|session)|\bhelpers?\b|\bthe lead\b" \
    "$S"/README.md "$S"/docs/*.md "$S"/docs/rlgate.8 "$S"/docs/rlgate.conf.5 | sed "s|^$S/||")
is "$out" "" "the docs refer to nothing outside the repository, nor to issues or how the work was organised"
# the comments and messages of the sources likewise name no issue of the
# project (a standard's working group's, "WG issue #N", is a reference)
out=$(grep -rniE "\bissue [0-9]+|\bissues? #[0-9]+|\bissue's\b|(this|last|next|earlier) session" \
    "$S"/app "$S"/db "$S"/tests "$S"/scripts "$S"/www "$S"/debian "$S"/Makefile.am \
    "$S"/configure.ac 2>/dev/null | grep -v "^$S/tests/integration/doc_commands.sh:" |
    grep -v "WG issue #" | sed "s|^$S/||")
is "$out" "" "the sources' comments and messages name no issue nor how the work was organised"
glossary=$(awk '/^## / { on = ($0 == "## Glossary"); next } on' "$S/README.md")
missing=
for term in GCRA "no-op ceiling" "naive UPSERT" responder "group commit" write-behind "rejection cache"; do
	grep -qi -- "\*\*$term" <<<"$glossary" || missing="$missing, $term"
done
is "${missing#, }" "" "README.md's Glossary explains the terms the README uses"
grep -q 'RLGATE_DEMO_PORT' "$S/scripts/demo.sh" && grep -q 'RLGATE_DEMO_PORT' "$S/README.md"
ok $? "README.md says how to pick the demo's port (RLGATE_DEMO_PORT, which scripts/demo.sh reads)"
is "$(grep -m1 '^## ' "$S/docs/benchmarks.md")" "## Current figures" \
    "docs/benchmarks.md starts with the current figures"
grep -q '^## History' "$S/docs/benchmarks.md"
ok $? "docs/benchmarks.md keeps the earlier figures under History"

between "$ran" 1 100000 "the docs' commands ran: $ran, and $skipped are excused"
for ((i = 1; i < ${#SKIP[@]}; i += 2)); do
	[ -n "${used_skip[${SKIP[i]}]:-}" ] ||
	    diag "no command of the docs is excused by: ${SKIP[i - 1]}"
done

done_testing
