#!/usr/bin/env bash
# sustained_each.sh: sustained.sh with [store] commit = each (one SQLite
# transaction per decision): the WAL, the database and the workers' RSS
# bounded under continuous load, counting exact. sustained.sh itself runs
# the default, the decision table written behind.
: "${RLGATE_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
SUSTAINED_COMMIT=each exec bash "$RLGATE_SRCDIR/tests/integration/sustained.sh"
