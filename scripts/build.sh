#!/usr/bin/env bash
# Builds rlgate out of tree: scripts/build.sh NAME [configure options...]
# builds into _build/NAME (autoreconf first if configure is missing or
# older than configure.ac/Makefile.am). Prints the build directory.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
name=${1:?usage: build.sh NAME [configure options]}
shift
cd "$top"
if [ -f config.status ]; then
	echo "build.sh: the source tree is configured in place; running make distclean first" >&2
	make distclean >/dev/null 2>&1 || true
fi
if [ ! -x configure ] || [ configure.ac -nt configure ] || [ Makefile.am -nt Makefile.in ]; then
	autoreconf -fi >&2
fi
mkdir -p "_build/$name"
cd "_build/$name"
if [ ! -f Makefile ] || [ "$top/configure" -nt config.status ]; then
	"$top/configure" --enable-werror "$@" >&2
fi
make -j"$(nproc)" >&2
pwd
