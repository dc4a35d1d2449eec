-- sync.lua: the local+global mode's merge, atomic as a script.
--
-- A host that decides from its own table pushes, every sync interval, the
-- units it admitted since its last sync, and takes back the global state.
-- This script adds them: for each item it merges the units into the
-- state stored under the item's key exactly as rlg_limiter_merge
-- (app/limiter_merge.c) does, and answers the state after the merge. The build
-- runs it after the helpers of db/redis/step.lua (up to the line that
-- ends them: numbers, big integers), so those exist once.
--
-- KEYS[i]: hash rlg:{C}:P of item i, the key and fields that step.lua
--   reads and writes (window_start_ms count prev_count tat_us
--   expires_ms), so a host in exact mode and a syncing one agree on one
--   state.
-- ARGV[1]: now in ms (decimal), or "" for the server's TIME.
-- ARGV[2]: n (= #KEYS, >= 1); then per item algorithm (its number: not
--   sliding_log, which is exact-only), limit, window_ms, burst (as
--   step.lua takes them), units (0..MERGE_MAX: the units admitted
--   elsewhere; 0 reads the state and writes nothing) and window_start_ms
--   (the start of the window the units were admitted in).
-- Every argument is checked before anything is read or written: a
--   malformed one is an error reply, and nothing is written.
-- Per item, in order (the same key twice merges twice):
--   fixed_window, sliding_window: the units' window against the stored
--     one (rlg_limiter_merge: the same window adds, an older or empty
--     stored one starts the units' window, the sliding window's stored
--     window one older becomes prev_count, one newer takes the units as
--     prev_count, a newer one is left as it is);
--   token_bucket: tat = max(tat, now) + units * T, at most now + 1e18 us
--     + T, never below max(tat, now) (a stored tat past TAT_MAX counts
--     as TAT_MAX).
--   A state that changed is written as step.lua writes one: every field,
--   expires_ms rounded up to the second, PEXPIRE until then (at least 1
--   ms). A state that did not (units 0, the units' window over) is not
--   written.
-- Reply: now_ms used, then per item the five fields of its state after
--   the merge: window_start_ms, count, prev_count (integers), tat_us (a
--   decimal string: exact past 2^53) and expires_ms (an integer, as
--   stored: rounded up to the second when written, else as read). A
--   state read and not written is answered within what rlgate stores
--   (times within 0..RLG_TIME_MS_MAX, counts 0..MERGE_MAX, tat_us
--   0..TAT_MAX, expires_ms 0..EXPIRES_MAX), as a damaged field reads.

local MERGE_MAX = 1000000000000000           -- RLG_MERGE_COUNT_MAX
-- The largest tat_us rlgate stores: RLG_TIME_MS_MAX * 1000 + the
-- tolerance's cap + the longest emission interval (limiter.c's
-- RLG_TAT_US_MAX), as a big integer.
local TAT_MAX = big_add(big_add(big_mul(big_of(TIME_MS_MAX), big_of(1000)),
  big_of(GCRA_TAU_MAX_US)), big_mul(big_of(WINDOW_MS_MAX), big_of(1000)))
-- The largest expires_ms stored for it, rounded up to the second.
local EXPIRES_MAX = big_num(big_divsmall(TAT_MAX, 1000)) + EXPIRES_GRAIN_MS

-- The algorithms that merge, by their number (limiter.h's order):
-- sliding_log (3) is not among them.
local ALGORITHMS_MERGE = {
  [0] = { name = "fixed_window" },
  [1] = { name = "sliding_window", sliding = true },
  [2] = { name = "token_bucket", burst = true, bucket = true },
}

local function clamp_merge(c)
  if c < 0 then
    return 0
  end
  return math.min(c, MERGE_MAX)
end

-- merge_windows of app/limiter_merge.c: st the stored fields (numbers), the
-- units admitted in the window starting at uws (aligned). Returns the
-- new state, or nil when nothing changes.
local function merge_windows(sliding, w, st, units, uws)
  local ws = align_start(st.ws, w)
  local count = clamp_merge(st.count)
  local prev = sliding and clamp_merge(st.prev) or 0
  if count == 0 and prev == 0 then
    ws = uws - 2 * w           -- empty: as old as can be
  end
  if ws == uws then
    count = count + units
  elseif sliding and ws == uws - w then
    prev, count, ws = count, units, uws
  elseif ws < uws then
    prev, count, ws = 0, units, uws
  elseif sliding and ws == uws + w then
    prev = prev + units
  else
    return nil                 -- the units' window is over
  end
  return { ws = ws, count = clamp_merge(count), prev = clamp_merge(prev),
    tat = "0", expires = ws + (sliding and 2 or 1) * w }
end

-- The token bucket's merge: in plain numbers when every value stays
-- below 2^52 (then tat is far below the cap, now + 1e18 us), else in
-- big integers (the stored tat may be anything up to 2^63).
local function merge_bucket(limit, w, st, units, now_ms)
  local t_us = floor((w * 1000 + limit - 1) / limit)  -- exact: < 2^45
  local tat_n = parse_int(st.tat) or 0
  if tat_n < SAFE and now_ms * 1000 < SAFE and units * t_us < SAFE then
    local tat = math.max(math.max(tat_n, 0), now_ms * 1000) + units * t_us
    if tat < SAFE then
      return { ws = 0, count = 0, prev = 0, tat = fmt(tat),
        expires = floor((tat + 999) / 1000) }
    end
  end
  local now_us = big_mul(big_of(now_ms), big_of(1000))
  local base = big_parse(st.tat) or {}  -- negative or damaged: 0
  if big_cmp(base, TAT_MAX) > 0 then
    base = TAT_MAX
  end
  if big_cmp(base, now_us) < 0 then
    base = now_us
  end
  local tat = big_add(base, big_mul(big_of(units), big_of(t_us)))
  local cap = big_add(big_add(now_us, big_of(GCRA_TAU_MAX_US)),
    big_of(t_us))
  if big_cmp(tat, cap) > 0 then
    tat = cap
  end
  if big_cmp(tat, base) < 0 then
    tat = base
  end
  local expires = big_num(big_divsmall(big_add(tat, big_of(999)), 1000))
  return { ws = 0, count = 0, prev = 0, tat = big_str(tat),
    expires = expires }
end

-- The items of the call, every argument checked: a list, or nil and why.
local function parse_items()
  local n = parse_int(ARGV[2])
  if n == nil or n < 1 or n ~= #KEYS or #ARGV ~= 2 + 6 * n then
    return nil, "expected ARGV now, n, then 6 per item, and n keys"
  end
  local items = {}
  for i = 1, n do
    local b = 3 + 6 * (i - 1)
    local it = {
      alg = parse_int(ARGV[b]), limit = parse_int(ARGV[b + 1]),
      w = parse_int(ARGV[b + 2]), burst = parse_int(ARGV[b + 3]),
      units = parse_int(ARGV[b + 4]), uws = parse_int(ARGV[b + 5]),
      key = KEYS[i],
    }
    it.desc = it.alg ~= nil and ALGORITHMS_MERGE[it.alg] or nil
    if it.alg == 3 then
      return nil, "item " .. i .. ": sliding_log cannot be merged"
    end
    if it.desc == nil or it.limit == nil or it.w == nil or
        it.burst == nil or it.uws == nil then
      return nil, "item " .. i .. ": malformed arguments"
    end
    if it.units == nil or it.units < 0 or it.units > MERGE_MAX then
      return nil, "item " .. i .. ": units out of range"
    end
    if not policy_ok(it, LIMIT_MAX) then
      return nil, "item " .. i .. ": policy out of range"
    end
    items[i] = it
  end
  return items
end

-- ---- the merge ------------------------------------------------------------

local items, why = parse_items()
if items == nil then
  return bad(why)
end

local now_ms = call_now()
if now_ms == nil then
  return bad("now_ms is not an integer")
end

local reply = { now_ms }
for i = 1, #items do
  local it = items[i]
  local f = redis.call("HMGET", it.key, "window_start_ms", "count",
    "prev_count", "tat_us", "expires_ms")
  local st = { ws = field(f[1]), count = field(f[2]), prev = field(f[3]),
    tat = f[4] or "0", expires = field(f[5]) }
  local out
  if it.units > 0 then
    if it.desc.bucket then
      out = merge_bucket(it.limit, it.w, st, it.units, now_ms)
    else
      out = merge_windows(it.desc.sliding, it.w, st, it.units,
        align_start(it.uws, it.w))
    end
  end
  if out ~= nil then
    local expires = round_expires(out.expires)
    redis.call("HSET", it.key, "window_start_ms", fmt(out.ws),
      "count", fmt(out.count), "prev_count", fmt(out.prev),
      "tat_us", out.tat, "expires_ms", fmt(expires))
    redis.call("PEXPIRE", it.key, fmt(math.max(1, expires - now_ms)))
    out.expires = expires
  else
    -- As read, within what rlgate stores (a damaged field as a step
    -- reads it: 0, or the bound).
    local tat = big_parse(st.tat) or {}
    if big_cmp(tat, TAT_MAX) > 0 then
      tat = TAT_MAX
    end
    out = { ws = clamp_time(st.ws), count = clamp_merge(st.count),
      prev = clamp_merge(st.prev), tat = big_str(tat),
      expires = math.max(0, math.min(st.expires, EXPIRES_MAX)) }
  end
  reply[#reply + 1] = out.ws
  reply[#reply + 1] = out.count
  reply[#reply + 1] = out.prev
  reply[#reply + 1] = out.tat
  reply[#reply + 1] = out.expires
end
return reply
