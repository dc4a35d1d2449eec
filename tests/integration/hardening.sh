#!/usr/bin/env bash
# hardening.sh: the binary make built carries the hardening configure turns
# on by default: PIE, full RELRO (BIND_NOW), the stack protector and
# FORTIFY_SOURCE's checked functions. Read with readelf and nm, no run.
: "${RLGATE_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/integration/lib.sh
. "$RLGATE_SRCDIR/tests/integration/lib.sh" || { echo "Bail out! cannot read lib.sh"; exit 99; }

setup_test readelf nm

readelf -h "$RLGATE_BIN" >"$T/h" 2>&1
readelf -lW "$RLGATE_BIN" >"$T/l" 2>&1
readelf -dW "$RLGATE_BIN" >"$T/d" 2>&1
nm -D "$RLGATE_BIN" >"$T/syms" 2>&1

grep -Eq 'Type:[[:space:]]+DYN' "$T/h"
ok $? "PIE: the ELF type is DYN (position-independent executable)"
grep -q 'GNU_RELRO' "$T/l"
ok $? "RELRO: a GNU_RELRO segment"
grep -Eq '\(FLAGS\).*BIND_NOW|\(FLAGS_1\).*NOW|\(BIND_NOW\)' "$T/d"
ok $? "full RELRO: symbols bound at start (BIND_NOW)"
grep -q '__stack_chk_fail' "$T/syms"
ok $? "stack protector: __stack_chk_fail is used"
if grep -q '__asan_init' "$T/syms"; then
	_tap_n=$((_tap_n + 1))
	echo "ok $_tap_n # SKIP FORTIFY_SOURCE: ASan replaces the checked functions"
else
	grep -Eq '__[a-z]+_chk' "$T/syms"
	ok $? "FORTIFY_SOURCE: checked libc functions (__*_chk) are used"
fi
done_testing
