#!/usr/bin/env bash
# The boundary-burst experiment as tests: runs tests/boundary --tap (the
# assertions docs/design.md states for each algorithm), then draws its data
# with gnuplot and checks that a picture came out. TAP output.
set -u
bin="$RLGATE_BUILDDIR/tests/boundary"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
out=$("$bin" --tap --data "$dir")
rc=$?
printf '%s\n' "$out" | grep -v '^1\.\.'
n=$(printf '%s\n' "$out" | grep -cE '^(not )?ok ')
if [ "$rc" -ne 0 ] && [ "$n" -eq 0 ]; then
	echo "Bail out! boundary exited $rc without results"
	exit 1
fi
n=$((n + 1))
if ! command -v gnuplot >/dev/null; then
	echo "ok $n # SKIP gnuplot is not installed"
elif gnuplot -e "dir='$dir'; out='$dir/boundary.svg'" \
    "$RLGATE_SRCDIR/tests/boundary.gp" 2>"$dir/gnuplot.err" &&
    grep -q '</svg>' "$dir/boundary.svg"; then
	echo "ok $n - gnuplot draws the experiment's data as an SVG"
else
	echo "not ok $n - gnuplot draws the experiment's data as an SVG"
	sed 's/^/# /' "$dir/gnuplot.err"
fi
echo "1..$n"
