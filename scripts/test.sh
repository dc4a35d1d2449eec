#!/usr/bin/env bash
# Installs what is missing, builds rlgate and runs every test:
#   1. make check: the Check unit tests and the integration tests with real
#      lighttpd, Apache, spawn-fcgi and SQLite;
#   2. the same again in a build with -fsanitize=address,undefined;
#   3. the fuzzers (request parsing, config, responses, FastCGI records;
#      libFuzzer, clang)
#      for a bounded time (FUZZ_SECONDS, default 60);
#   4. make distcheck-ci: the tarball holds every tracked file, builds,
#      installs, uninstalls and passes its unit tests and the integration
#      tests of what it ships (the whole suite ran in 1 on the same files);
#   5. lint: cppcheck and clang-tidy over app/*.c (scripts/lint.sh), one
#      result per tool;
#   6. the Debian package (tests/package.sh, root only): built, lintian,
#      installed with dpkg -i, serving through lighttpd, purged.
# The builds of 1 and 2 come first, one after the other; then three
# streams at once, each into its own log (_build/stream-*.log) shown in
# order once all have ended: 1; 2; 3, 4, 5 and 6. Each make check runs
# TEST_JOBS tests at once (default 2; make -j: the tests mostly wait,
# servers starting, windows passing, soaks pacing their load), the unit
# suites among them, each a test of its own; so the run takes the time of
# the longest stream, not the sum; each stream prints how long it took.
# Ends with one line "N passed, N failed" counting every test that ran, and
# exits non-zero if any failed.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1

bash scripts/deps.sh || { echo "test.sh: installing dependencies failed"; echo "0 passed, 1 failed"; exit 1; }

passed=0 failed=0 skipped=0
tally() {   # tally BUILDDIR: add up the automake .trs results
	local p f s
	p=$(cat "$1"/tests/*.trs "$1"/tests/*/*.trs 2>/dev/null | grep -cE '^:test-result: (PASS|XFAIL)')
	f=$(cat "$1"/tests/*.trs "$1"/tests/*/*.trs 2>/dev/null | grep -cE '^:test-result: (FAIL|XPASS|ERROR)')
	s=$(cat "$1"/tests/*.trs "$1"/tests/*/*.trs 2>/dev/null | grep -cE '^:test-result: SKIP')
	echo "test.sh: $1: $p passed, $f failed, $s skipped"
	passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
}
jobs=${TEST_JOBS:-2}

# check_suite DIR: make -j$jobs check in DIR, its summary in
# DIR/test-suite.log; a failing test's log is shown. The results are in
# DIR's .trs files. Fails only when no summary came out (make stopped
# before the tests: counted as one failure).
check_suite() {
	local dir=$1 log
	rm -f "$dir/test-suite.log"
	make -C "$dir" -j"$jobs" check && return 0
	for log in "$dir"/tests/*.log "$dir"/tests/*/*.log; do
		[ -f "$log" ] && grep -qE '^(not ok|Bail out)|^# (FAIL|ERROR)' "$log" && { echo "--- $log"; tail -n 40 "$log"; }
	done
	[ -f "$dir/test-suite.log" ]
}

# step NAME LOG CMD...: one counted step of stream 3: CMD's output into
# LOG; "step NAME: ok" or "step NAME: failed" (with LOG's tail) for the
# tally.
step() {
	local name=$1 log=$2
	shift 2
	if "$@" >"$log" 2>&1; then
		echo "step $name: ok"
	else
		tail -n 60 "$log"
		failing "$log"
		echo "test.sh: $name failed (full log: $log)"
		echo "step $name: failed"
	fi
}

# failing LOG: the tests an automake log names as failed, each with the
# lines of its own log that say why (its log is gone once the run ends).
failing() {
	local t f
	grep -E '^(FAIL|ERROR|XPASS): ' "$1" | awk '!seen[$2]++' | head -n 20 |
	    while read -r _ t _; do
		echo "--- failed: $t"
		# automake's log of tests/unit/x.suite is tests/unit/x.log, of
		# tests/integration/x.sh tests/integration/x.sh.log
		f=$(find _build/dist \( -path "*/${t}.log" -o \
		    -path "*/${t%.suite}.log" \) 2>/dev/null | head -n 1)
		[ -n "$f" ] && grep -E '^(not ok|# )|:[EF]:|[Ff]ail|[Ee]rror' "$f" | head -n 30
	done
}

# counted LOG: the ok / not ok lines of a TAP log that is not automake's
# (lint, package), as "PASSED FAILED SKIPPED".
counted() {
	local ok bad skip=0
	ok=$(grep -c '^ok ' "$1")
	bad=$(grep -c '^not ok ' "$1")
	grep -q '^1\.\.0 # SKIP' "$1" && skip=1
	echo "$ok $bad $skip"
}

# distcheck_ci: the tarball's build directory, then make distcheck-ci in it.
# RLGATE_DISTCHECK: install.sh leaves the install to distcheck's own.
# One test at a time: at nice 10 beside the two other streams, two at once
# starved the Redis Cluster unit suites past their 100 ms deadlines.
distcheck_ci() {
	local dir
	dir=$(bash scripts/build.sh dist) && RLGATE_DISTCHECK=1 make -C "$dir" distcheck-ci
}

mkdir -p _build
declare -A dirs
for name in normal asan; do
	opts=()
	[ "$name" = asan ] && opts=(--enable-sanitizers)
	echo "=== $name build ==="
	if ! dirs[$name]=$(bash scripts/build.sh "$name" "${opts[@]}"); then
		echo "test.sh: $name build failed"
		echo "$passed passed, $((failed + 1)) failed"
		exit 1
	fi
done

rm -f _build/stream-*.log _build/lint.log _build/package.log
for name in normal asan; do
	rm -f "${dirs[$name]}"/tests/*.trs "${dirs[$name]}"/tests/*/*.trs
done
t_start=$(date +%s)
declare -A pids
# Stream 1. The two soaks (sustained.sh, sustained_each.sh) hold their load
# for 90 s here, not their own 150 (make soak runs them for 30 minutes).
(
	SUSTAINED_SECONDS=90 check_suite "${dirs[normal]}" ||
		echo "step normal: failed (no test ran)"
	echo "stream normal: $(($(date +%s) - t_start)) s"
) >_build/stream-normal.log 2>&1 &
pids[normal]=$!
# Stream 2: the sanitizer build's make check. It floods the store with
# 200,000 keys, not 1,000,000: the same code paths, a fifth of the time.
(
	FLOOD_KEYS=200000 check_suite "${dirs[asan]}" ||
		echo "step asan: failed (no test ran)"
	echo "stream asan: $(($(date +%s) - t_start)) s"
) >_build/stream-asan.log 2>&1 &
pids[asan]=$!
# Stream 3: the fuzzers, the tarball (in a build directory of its own:
# distcheck writes in its tree while the others test), lint and the
# package at nice 10 (they are bound by the CPU, the other streams by
# time).
(
	renice -n 10 -p "$BASHPID" >/dev/null 2>&1
	echo "=== fuzz: request, config, response, wire, ${FUZZ_SECONDS:-60} s in all ==="
	step fuzz _build/fuzz.log bash scripts/fuzz.sh "${FUZZ_SECONDS:-60}"
	tail -n 1 _build/fuzz.log
	echo "=== make distcheck-ci ==="
	step distcheck _build/distcheck.log distcheck_ci
	echo "=== lint: cppcheck, clang-tidy ==="
	bash scripts/lint.sh >_build/lint.log 2>&1
	lint_rc=$?
	grep -E '^(not )?ok ' _build/lint.log
	if [ "$lint_rc" -ne 0 ] || [ "$(grep -c '^ok ' _build/lint.log)" -eq 0 ]; then
		tail -n 60 _build/lint.log
		echo "test.sh: lint failed (full log: _build/lint.log)"
		# It failed without saying which tool: count the step once.
		grep -q '^not ok ' _build/lint.log || echo "step lint: failed"
	fi
	echo "=== Debian package: build, lintian, install, serve, purge ==="
	RLGATE_SRCDIR="$top" timeout 1800 bash tests/package.sh >_build/package.log 2>&1
	read -r ok bad skip <<<"$(counted _build/package.log)"
	if [ "$skip" -eq 1 ]; then
		grep '^1\.\.0 # SKIP' _build/package.log
	elif [ "$bad" -gt 0 ] || grep -q '^Bail out!' _build/package.log ||
	    ! grep -q '^1\.\.[0-9]' _build/package.log; then
		tail -n 40 _build/package.log
		echo "test.sh: the package test failed (full log: _build/package.log)"
		[ "$bad" -eq 0 ] && echo "step package: failed"
	fi
	echo "test.sh: package: $ok passed, $bad failed"
	echo "stream rest: $(($(date +%s) - t_start)) s"
) >_build/stream-rest.log 2>&1 &
pid_rest=$!

for name in normal asan; do
	wait "${pids[$name]}"
	echo "=== $name build: make check ==="
	cat "_build/stream-$name.log"
	failed=$((failed + $(grep -c '^step .*: failed' "_build/stream-$name.log")))
done
wait "$pid_rest"
cat _build/stream-rest.log
# the .trs files of both builds: every make check result
for name in normal asan; do
	tally "${dirs[$name]}"
done
passed=$((passed + $(grep -c '^step .*: ok$' _build/stream-rest.log)))
failed=$((failed + $(grep -c '^step .*: failed' _build/stream-rest.log)))
for log in _build/lint.log _build/package.log; do
	read -r ok bad skip <<<"$(counted "$log")"
	passed=$((passed + ok)) failed=$((failed + bad)) skipped=$((skipped + skip))
done

# The failures once more, last, where a reader of only the tail sees them.
for name in normal asan; do
	for trs in "${dirs[$name]}"/tests/*.trs "${dirs[$name]}"/tests/*/*.trs; do
		[ -f "$trs" ] && grep -qE '^:test-result: (FAIL|XPASS|ERROR)' "$trs" || continue
		echo "test.sh: $name: failed in ${trs%.trs}.log:"
		grep -E '^(not ok|Bail out)|:[EF]:' "${trs%.trs}.log" | head -n 10
	done
done
grep -h '^step .*: failed' _build/stream-*.log
if [ "$skipped" -gt 0 ]; then
	echo "$passed passed, $failed failed, $skipped skipped"
else
	echo "$passed passed, $failed failed"
fi
[ "$failed" -eq 0 ]
