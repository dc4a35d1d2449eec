#!/usr/bin/env bash
# Fuzzes every libFuzzer target: scripts/fuzz.sh [SECONDS] (default 60).
# Builds tests/fuzz/fuzz_{request,config,response,wire} with clang and libFuzzer
# (ASan + UBSan) in _build/fuzz, then runs each from its seed corpus
# tests/fuzz/corpus_NAME for SECONDS / 3 (the total split evenly, at least
# 1 s each). New inputs go to _build/fuzz/corpus_NAME, crashes to
# _build/fuzz/artifacts/NAME-*; every target runs, and the exit status is
# non-zero if any of them crashed.
# Installs clang through apt-get when it is missing (as root).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-${FUZZ_SECONDS:-60}}
cd "$top"

if ! command -v clang >/dev/null 2>&1; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "fuzz.sh: clang is missing; run as root or apt-get install clang" >&2
		exit 1
	fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends clang >&2
fi

if [ ! -x configure ] || [ configure.ac -nt configure ] || [ Makefile.am -nt Makefile.in ]; then
	autoreconf -fi >&2
fi
dir=_build/fuzz
mkdir -p "$dir"
cd "$dir"
if [ ! -f Makefile ] || [ "$top/configure" -nt config.status ]; then
	"$top/configure" CC=clang --enable-fuzzing >&2
fi
targets="request config response wire"
ntargets=4
each=$((seconds / ntargets))
if [ "$each" -lt 1 ]; then
	each=1
fi
make -j"$(nproc)" $(for t in $targets; do echo tests/fuzz/fuzz_$t; done) >&2

mkdir -p artifacts
failed=""
status=0
for t in $targets; do
	mkdir -p "corpus_$t"
	# Work corpus first: libFuzzer writes new inputs to the first
	# directory only, so the seeds in the source tree stay as they are.
	rc=0
	"./tests/fuzz/fuzz_$t" -max_total_time="$each" -print_final_stats=1 \
		-artifact_prefix="artifacts/$t-" -max_len=16384 \
		"corpus_$t" "$top/tests/fuzz/corpus_$t" || rc=$?
	if [ "$rc" -ne 0 ]; then
		echo "fuzz.sh: fuzz_$t failed (exit $rc); inputs in $dir/artifacts/$t-*" >&2
		failed="$failed fuzz_$t"
		status=$rc
	fi
done
if [ "$status" -ne 0 ]; then
	echo "fuzz.sh: crashed:$failed" >&2
	exit "$status"
fi
echo "fuzz.sh: $ntargets targets ran ${each} s each without a crash"
