#!/usr/bin/env bash
# Fuzzes the request parser: scripts/fuzz.sh [SECONDS] (default 60).
# Builds tests/fuzz/fuzz_request with clang and libFuzzer (ASan + UBSan) in
# _build/fuzz, then runs it from the seed corpus tests/fuzz/corpus_request
# for a bounded time. New inputs go to _build/fuzz/corpus_request, crashes
# to _build/fuzz/artifacts/; the exit status is non-zero on a crash.
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
make -j"$(nproc)" tests/fuzz/fuzz_request >&2

mkdir -p corpus_request artifacts
# Work corpus first: libFuzzer writes new inputs to the first directory
# only, so the seeds in the source tree stay as they are.
status=0
./tests/fuzz/fuzz_request -max_total_time="$seconds" -print_final_stats=1 \
	-artifact_prefix=artifacts/ -max_len=16384 \
	corpus_request "$top/tests/fuzz/corpus_request" || status=$?
if [ "$status" -ne 0 ]; then
	echo "fuzz.sh: fuzz_request failed (exit $status); inputs in $dir/artifacts/" >&2
	exit "$status"
fi
echo "fuzz.sh: fuzz_request ran ${seconds}s without a crash"
