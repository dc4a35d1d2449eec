#!/usr/bin/env bash
# Static analysis of the production code, app/*.c, with cppcheck
# (suppressions in .cppcheck-suppressions) and clang-tidy (checks in
# .clang-tidy), both at the top of the tree; then the modules of app/
# held to having no circle between them, in what they include and in
# what they call (see "modules" below). Runs from any directory and
# needs no configure run: only what scripts/deps.sh installs.
# app/schema.c is generated (one string from db/schema.sql) and is
# skipped.
# Prints each check's findings, then one TAP line per check, e.g.
#   ok 1 - cppcheck: no findings
#   not ok 2 - clang-tidy: 3 findings
#   ok 3 - include cycles: no findings
#   not ok 4 - call cycles: 1 finding
# and exits non-zero if any check found anything or could not run.
# LINT_JOBS sets how many clang-tidy (and compiler) processes run at
# once (default: the number of CPUs).
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

# How the build compiles app/ (clang-tidy and the call graph below).
cflags=(-std=c11 -I app "${defs[@]}")
for pc in fcgi sqlite3 libsodium; do
	# No .pc (libfcgi on some systems): the headers are in /usr/include.
	read -ra pcf <<<"$(pkg-config --cflags "$pc" 2>/dev/null)"
	cflags+=("${pcf[@]}")
done
jobs_max=${LINT_JOBS:-$(nproc)}

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

# ---- modules ----------------------------------------------------------
# No circle between the modules of app/ (DESIGN.md: main -> server ->
# gate -> request / store / response -> config -> limiter / net / util,
# the limiter a leaf), checked twice: in what their files include, and
# in what their compiled objects call or read of each other.
#
# A module is x.c with x.h. The files of a module with a private header
# x_priv.h (x_*.c, x_*.h: store_sqlite_db.c, config_options.c) are that
# module too; store_stats.h declares store.c's rlg_store_stats: store.
# The backends and the rejection cache (store_sqlite, store_redis,
# store_cache) are modules of their own that include store.h, the
# interface they implement. store.c's references to their operations
# tables (rlg_store_*_ops), the wiring of rlg_store_open, are dispatch
# through that interface, not calls of store into them, and are left
# out; a function call either way counts (store.c calls
# rlg_store_cache_wrap: store_cache calling rlg_store_step would be a
# circle).
#
# Each circle found is a finding, printed with the edges that make it:
# for includes the file and the header, for calls the object and one
# symbol it uses (and how many more). The call graph comes from the
# objects of app/*.c compiled here (cc -O0, no warnings), read with
# nm -P: symbols a module leaves undefined that another defines.
echo "=== modules ==="
priv=()
for h in app/*_priv.h; do
	[ -e "$h" ] && priv+=("$(basename "$h" _priv.h)")
done
# Longest first, so that x_y_priv.h would win over x_priv.h.
mapfile -t priv < <(for m in "${priv[@]}"; do echo "${#m} $m"; done |
    sort -rn | cut -d' ' -f2)

module_of() {   # module_of FILE: the module app/FILE (.c, .h, .o) is in
	local b=${1##*/} m
	b=${b%.[cho]}
	[ "$b" = store_stats ] && { echo store; return; }
	for m in "${priv[@]}"; do
		case $b in "$m" | "$m"_*) echo "$m"; return ;; esac
	done
	echo "$b"
}

# cycles EDGES WHAT: EDGES holds lines "FROM TO WHY..." (FROM != TO).
# Prints each circle a depth-first walk meets ("WHAT circle: ..."), with
# its edges, and as its last line the number of circles.
cycles() {
	sort -u "$1" | awk -v what="$2" '
	{
		why = $0
		sub(/^[^ ]+ [^ ]+ /, "", why)
		if (!(($1, $2) in seen)) {
			seen[$1, $2] = why
			adj[$1, ++nadj[$1]] = $2
		}
		more[$1, $2]++
		if (!($1 in known)) { known[$1] = 1; nodes[++nn] = $1 }
		if (!($2 in known)) { known[$2] = 1; nodes[++nn] = $2 }
	}
	function visit(u,    i, j, k, v, w, path) {
		color[u] = 1
		stack[++sp] = u
		for (i = 1; i <= nadj[u]; i++) {
			v = adj[u, i]
			if (color[v] == 0) {
				visit(v)
				continue
			}
			if (color[v] != 1)
				continue
			found++
			for (j = sp; stack[j] != v; j--)
				;
			path = ""
			for (k = j; k <= sp; k++)
				path = path stack[k] " -> "
			print what " circle: " path v
			for (k = j; k <= sp; k++) {
				w = k < sp ? stack[k + 1] : v
				printf "  %s -> %s: %s", stack[k], w,
				    seen[stack[k], w]
				if (more[stack[k], w] > 1)
					printf " (and %d more)",
					    more[stack[k], w] - 1
				printf "\n"
			}
		}
		color[u] = 2
		sp--
	}
	END {
		for (i = 1; i <= nn; i++)
			if (color[nodes[i]] == 0)
				visit(nodes[i])
		print found + 0
	}'
}

# (a) Quoted includes between the files of app/.
for f in app/*.c app/*.h; do
	case $f in app/schema.c | app/redis_script.c) continue ;; esac
	from=$(module_of "$f")
	sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' \
	    "$f" | while read -r h; do
		[ -f "app/$h" ] || continue
		to=$(module_of "$h")
		[ "$from" = "$to" ] || echo "$from $to $f includes $h"
	done
done >"$tmp/includes"
cycles "$tmp/includes" include >"$tmp/includes.out"
sed '$d' "$tmp/includes.out"
inc_status=$(plural "$(tail -n 1 "$tmp/includes.out")")

# (b) Symbols one module's object uses and another's defines.
mkdir "$tmp/obj"
cc=${CC:-cc}
if ! command -v "$cc" >/dev/null 2>&1 || ! command -v nm >/dev/null 2>&1; then
	call_status="no compiler or no nm (run scripts/deps.sh)"
else
	for f in app/*.c; do
		case $f in app/schema.c | app/redis_script.c) continue ;; esac
		o=$tmp/obj/$(basename "$f" .c).o
		"$cc" -c -O0 -w "${cflags[@]}" -o "$o" "$f" 2>"$o.err" &
		while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do
			wait -n
		done
	done
	wait
	n=0
	for f in app/*.c; do
		case $f in app/schema.c | app/redis_script.c) continue ;; esac
		o=$tmp/obj/$(basename "$f" .c).o
		[ -s "$o" ] && continue
		cat "$o.err"
		echo "lint.sh: $cc could not compile $f"
		n=$((n + 1))
	done
	# "D MODULE FILE SYMBOL" for a definition, "U ..." for a use.
	for o in "$tmp"/obj/*.o; do
		nm -P -g "$o" | awk -v m="$(module_of "$o")" \
		    -v f="app/$(basename "$o" .o).c" \
		    '{ print ($2 == "U" ? "U" : "D"), m, f, $1 }'
	done >"$tmp/symbols"
	awk 'NR == FNR { if ($1 == "D") def[$4] = $2; next }
	    $1 == "U" && ($4 in def) && def[$4] != $2 &&
	    !($2 == "store" && $4 ~ /^rlg_store_.*_ops$/) {
		print $2, def[$4], $3, "uses", $4
	    }' "$tmp/symbols" "$tmp/symbols" >"$tmp/calls"
	cycles "$tmp/calls" call >"$tmp/calls.out"
	sed '$d' "$tmp/calls.out"
	call_status=$(plural $((n + $(tail -n 1 "$tmp/calls.out"))))
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
summary 3 "include cycles" "$inc_status"
summary 4 "call cycles" "$call_status"
exit "$failed"
