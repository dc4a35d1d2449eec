#!/bin/bash
# tests/bench/group.sh: group commit against one commit per request, in
# process, for docs/benchmarks.md's table (make bench-group).
#
#     bash tests/bench/group.sh [OUTFILE]          (default ./bench-group.md)
#
# For synchronous = full and normal, and 1, 1,000 and 1,000,000 keys, it
# runs tests/bench/bench_decide three times in a row: the naive autocommit
# UPSERT (same synchronous), rlgate's fixed window with group commit off,
# then on; 8 threads on one file, BENCH_SECONDS each. Prints the markdown
# table on stdout and writes it to OUTFILE. Exit 0, or 1 on any error.
#
# Environment:
#   RLGATE_BUILDDIR   build tree (default: two levels above this script)
#   BENCH_DECIDE      bench_decide (default RLGATE_BUILDDIR/tests/bench/bench_decide)
#   BENCH_SECONDS     timed seconds per cell (default 3)
#   BENCH_GROUP_KEYS  key counts (default "1 1000 1000000")
#   BENCH_DIR         where the files go (default /var/tmp)

set -u
export LC_ALL=C
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${RLGATE_BUILDDIR:=$(cd "$here/../.." && pwd)}"
: "${BENCH_DECIDE:=$RLGATE_BUILDDIR/tests/bench/bench_decide}"
: "${BENCH_SECONDS:=3}"
: "${BENCH_GROUP_KEYS:=1 1000 1000000}"
: "${BENCH_DIR:=/var/tmp}"
OUT=${1:-./bench-group.md}

die() {
	echo "group.sh: error: $*" >&2
	exit 1
}

[ -x "$BENCH_DECIDE" ] ||
	die "bench_decide not found or not executable: $BENCH_DECIDE (make tests/bench/bench_decide, or set BENCH_DECIDE)"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rlg-bench-group-XXXXXX") || die "mktemp failed"
trap 'rm -rf "$tmp"' EXIT

# cell ALG KEYS SYNC GROUP: decisions/s of one bench_decide cell.
cell() {
	local rate
	"$BENCH_DECIDE" --seconds "$BENCH_SECONDS" --dir "$BENCH_DIR" \
	    --sync "$3" --group "$4" --only "$1,8,$2,disk" \
	    --out "$tmp/cell.md" --tsv "$tmp/cell.tsv" >"$tmp/cell.log" 2>&1 ||
		die "bench_decide --sync $3 --group $4 --only $1,8,$2,disk failed: $(tail -3 "$tmp/cell.log")"
	rate=$(awk -F '\t' '!/^#/ && NF >= 5 { r = $5 } END { print r }' "$tmp/cell.tsv")
	[[ $rate =~ ^[0-9]+$ ]] || die "no rate in $tmp/cell.tsv"
	echo "$rate"
}

group() {   # thousands separators, as docs/benchmarks.md writes them
	printf '%s' "$1" | sed ':a;s/\B[0-9]\{3\}\>/,&/;ta'
}

{
	echo "# Group commit, in process"
	echo
	echo "bench_decide, fixed window, 8 threads on one file in $BENCH_DIR,"
	echo "${BENCH_SECONDS} s per cell; the naive UPSERT with the same synchronous."
	echo "Load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)."
	echo
	echo "| synchronous, keys | group commit off | on | naive UPSERT | on / UPSERT |"
	echo "|---|---|---|---|---|"
} >"$tmp/out.md"
for sync in full normal; do
	for keys in $BENCH_GROUP_KEYS; do
		echo "group.sh: synchronous = $sync, $keys keys" >&2
		naive=$(cell baseline "$keys" "$sync" off) || exit 1
		off=$(cell fixed_window "$keys" "$sync" off) || exit 1
		on=$(cell fixed_window "$keys" "$sync" on) || exit 1
		printf '| %s, %s key%s | %s | %s | %s | %s |\n' "$sync" \
		    "$(group "$keys")" "$([ "$keys" = 1 ] || echo s)" \
		    "$(group "$off")" "$(group "$on")" "$(group "$naive")" \
		    "$(awk -v a="$on" -v b="$naive" 'BEGIN { printf "%.2f", a / b }')" \
		    >>"$tmp/out.md"
	done
done
cp "$tmp/out.md" "$OUT" || die "cannot write $OUT"
cat "$OUT"
echo "group.sh: wrote $OUT" >&2
