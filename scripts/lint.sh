#!/usr/bin/env bash
# Static analysis of the production code, app/*.c, with cppcheck
# (suppressions in .cppcheck-suppressions) and clang-tidy (checks in
# .clang-tidy), both at the top of the tree. Runs from any directory and
# needs no configure run: only what scripts/deps.sh installs. app/schema.c
# is generated (one string from db/schema.sql) and is skipped.
# Prints each tool's findings, then one TAP line per tool, e.g.
#   ok 1 - cppcheck: no findings
#   not ok 2 - clang-tidy: 3 findings
# and exits non-zero if either tool found anything or could not run.
# LINT_JOBS sets how many clang-tidy processes run at once (default: the
# number of CPUs).
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1

tmp=$(mktemp -d "${TMPDIR:-/tmp}/rlgate-lint.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

srcs=()
for f in app/*.c; do
	[ "$f" = app/schema.c ] || srcs+=("$f")
done

# What the build defines (Makefile.am AM_CPPFLAGS; PACKAGE_VERSION comes
# from AC_INIT in configure.ac); the directories are the default prefix's.
version=$(sed -n 's/^AC_INIT(\[[^]]*\], *\[\([^]]*\)\].*/\1/p' configure.ac)
defs=(-D_GNU_SOURCE -DSYSCONFDIR='"/usr/local/etc"'
    -DLOCALSTATEDIR='"/usr/local/var"' -DPACKAGE_VERSION="\"${version:-0}\"")

plural() {   # plural N: "no findings", "1 finding", "N findings"
	case $1 in
	0) echo "no findings" ;;
	1) echo "1 finding" ;;
	*) echo "$1 findings" ;;
	esac
}

# ---- cppcheck ---------------------------------------------------------
# Quiet and one line per finding: whatever it prints counts as a finding
# (an internal error or a bail-out included).
echo "=== cppcheck ==="
if ! command -v cppcheck >/dev/null 2>&1; then
	cpp_status="not installed (run scripts/deps.sh)"
else
	cppcheck --enable=warning,style,performance,portability \
	    --error-exitcode=1 --inline-suppr --std=c11 --quiet \
	    --library=posix --library=gnu --library=sqlite3 \
	    --suppressions-list=.cppcheck-suppressions \
	    -I app "${defs[@]}" -j "${LINT_JOBS:-$(nproc)}" \
	    --template='{file}:{line}:{column}: {severity}: {message} [{id}]' \
	    "${srcs[@]}" >"$tmp/cppcheck.out" 2>&1
	rc=$?
	cat "$tmp/cppcheck.out"
	n=$(grep -c . "$tmp/cppcheck.out")
	[ "$rc" -ne 0 ] && [ "$n" -eq 0 ] && n=1 &&
		echo "lint.sh: cppcheck exited with status $rc"
	cpp_status=$(plural "$n")
fi

# ---- clang-tidy -------------------------------------------------------
# One process per file, LINT_JOBS at a time, each into its own files so
# the output stays in order. A finding in an app/ header is counted once.
echo "=== clang-tidy ==="
tidy=
for t in clang-tidy clang-tidy-14; do
	command -v "$t" >/dev/null 2>&1 && { tidy=$t; break; }
done
if [ -z "$tidy" ]; then
	tidy_status="not installed (run scripts/deps.sh)"
else
	cflags=(-std=c11 -I app "${defs[@]}")
	for pc in fcgi sqlite3 libsodium; do
		# No .pc (libfcgi on some systems): the headers are in /usr/include.
		read -ra pcf <<<"$(pkg-config --cflags "$pc" 2>/dev/null)"
		cflags+=("${pcf[@]}")
	done
	jobs_max=${LINT_JOBS:-$(nproc)}
	i=0
	for f in "${srcs[@]}"; do
		i=$((i + 1))
		{
			"$tidy" --quiet --config-file=.clang-tidy "$f" -- \
			    "${cflags[@]}" >"$tmp/tidy.$i.out" 2>"$tmp/tidy.$i.err"
			echo $? >"$tmp/tidy.$i.rc"
		} &
		while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do
			wait -n
		done
	done
	wait
	# clang's count of the warnings it hid (system headers) is noise.
	noise='^[0-9]+ (warning|error)s?( and [0-9]+ errors?)? generated\.$'
	finding='^[^ ].*:[0-9]+:[0-9]+: (warning|error): '
	i=0 n=0
	: >"$tmp/tidy.findings"
	for f in "${srcs[@]}"; do
		i=$((i + 1))
		cat "$tmp/tidy.$i.out"
		grep -v -E "$noise" "$tmp/tidy.$i.err"
		rc=$(cat "$tmp/tidy.$i.rc" 2>/dev/null || echo 127)
		# A failure that printed no finding (a crash) counts as one.
		if ! grep -E "$finding" "$tmp/tidy.$i.out" \
		    >>"$tmp/tidy.findings" && [ "$rc" -ne 0 ]; then
			echo "lint.sh: $tidy exited with status $rc on $f"
			n=$((n + 1))
		fi
	done
	n=$((n + $(sort -u "$tmp/tidy.findings" | grep -c .)))
	tidy_status=$(plural "$n")
fi

# ---- summary ----------------------------------------------------------
failed=0
summary() {   # summary NUMBER TOOL STATUS: one TAP line
	if [ "$3" = "no findings" ]; then
		echo "ok $1 - $2: $3"
	else
		echo "not ok $1 - $2: $3"
		failed=1
	fi
}
summary 1 cppcheck "$cpp_status"
summary 2 clang-tidy "$tidy_status"
exit "$failed"
