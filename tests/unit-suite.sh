#!/usr/bin/env bash
# tests/unit-suite.sh tests/unit/NAME.suite: one suite of the unit-test
# runner tests/check_rlgate (CK_RUN_SUITE=NAME), its TAP on stdout, for
# make check, which lists each suite as a test of its own (UNIT_TESTS in
# Makefile.am; the .suite files do not exist, only their names count) so
# that make -j runs them side by side. A suite of which no test ran (a
# name check_main.c does not know) fails. For the first suite of the list
# it also holds the list to check_main.c's: a suite missing from
# UNIT_TESTS would never run.
# Environment: RLGATE_BUILDDIR (the build tree), RLGATE_UNIT_TESTS
# (UNIT_TESTS), as make check sets them.
set -uo pipefail
name=$(basename "$1" .suite)
runner=$RLGATE_BUILDDIR/tests/check_rlgate
[ -x "$runner" ] || { echo "Bail out! no $runner"; exit 99; }

# the TAP of the suite passed through but for its plan (1..N, last), and
# the number of tests that ran; the plan, with what this script adds,
# comes at the end
exec 3>&1
n=$(CK_RUN_SUITE=$name "$runner" | awk '
	/^1\.\.[0-9]+$/ { next }
	{ print >"/dev/fd/3"; fflush("/dev/fd/3") }
	/^(not )?ok / { n++ }
	END { print n + 0 }')
rc=$?
if [ "$n" -eq 0 ]; then
	echo "not ok 1 - suite $name: no test ran (check_main.c has no suite of that name)"
	echo "1..1"
	exit 1
fi

read -r first _ <<<"${RLGATE_UNIT_TESTS:-}"
if [ "$name" = "$(basename "$first" .suite)" ]; then
	n=$((n + 1))
	# shellcheck disable=SC2086  # a list of words
	listed=$(printf '%s\n' $RLGATE_UNIT_TESTS | sed 's|.*/||; s|\.suite$||' | sort)
	known=$("$runner" --list | sort)
	if [ "$listed" = "$known" ]; then
		echo "ok $n - Makefile.am's UNIT_TESTS are check_main.c's suites"
	else
		echo "not ok $n - Makefile.am's UNIT_TESTS are check_main.c's suites"
		diff <(echo "$known") <(echo "$listed") | sed -n 's/^[<>]/# &/p'
		rc=1
	fi
fi
echo "1..$n"
exit "$rc"
