#!/bin/sh
# library.sh STEP_LUA SYNC_LUA: db/redis/step.lua and db/redis/sync.lua as
# one Redis Functions library (Redis >= 7: FUNCTION LOAD, FCALL), on
# stdout; make compiles it into rlgate (app/redis_function.c).
#
# Why: EVALSHA runs a script's whole text on every call, so each call
# first builds step.lua's helpers (its functions and tables: about 5 us
# of Redis CPU of a 21 us one-item step). A library builds them once: each
# function's text runs, on its first call, the script's helpers and
# returns its per-call part (the text from the line "-- ---- the step"
# of step.lua, "-- ---- the merge" of sync.lua) as a function, kept for
# the next calls. The helpers read KEYS and ARGV, which a function gets
# as arguments: they are the library's own locals, set by each call
# (Redis runs one call at a time).
#
# Its names end in the first 16 hex digits of the SHA1 of its text (with
# the names left out): library rlgate_H, functions rlg_step_H and
# rlg_sync_H. Gateways of different versions on one Redis each keep
# theirs; FUNCTION LOAD REPLACE of the same text changes nothing.
# Redis 7.0 gives a library's text at load time no standard library
# (math, string): nothing of the scripts runs before the first call.
set -eu
step=$1 sync=$2
body() {
	echo "local KEYS, ARGV"
	echo "local function build_step()"
	sed -n '1,/^-- ---- the step/{/^-- ---- the step/!p}' "$step"
	echo "return function()"
	sed -n '/^-- ---- the step/,$p' "$step"
	echo "end"
	echo "end"
	echo "local function build_sync()"
	sed -n '1,/^-- ---- the end of the helpers/p' "$step"
	sed -n '1,/^-- ---- the merge/{/^-- ---- the merge/!p}' "$sync"
	echo "return function()"
	sed -n '/^-- ---- the merge/,$p' "$sync"
	echo "end"
	echo "end"
	echo "local step, sync"
	echo "redis.register_function('rlg_step_@H@', function(keys, args)"
	echo "  KEYS, ARGV = keys, args"
	echo "  if step == nil then step = build_step() end"
	echo "  return step()"
	echo "end)"
	echo "redis.register_function('rlg_sync_@H@', function(keys, args)"
	echo "  KEYS, ARGV = keys, args"
	echo "  if sync == nil then sync = build_sync() end"
	echo "  return sync()"
	echo "end)"
}
grep -q '^-- ---- the step' "$step" && grep -q '^-- ---- the merge' "$sync" &&
    grep -q '^-- ---- the end of the helpers' "$step" || {
	echo "library.sh: a marker line is missing from $step or $sync" >&2
	exit 1
}
h=$(body | sha1sum | cut -c1-16)
echo "#!lua name=rlgate_$h"
body | sed "s/@H@/$h/g"
