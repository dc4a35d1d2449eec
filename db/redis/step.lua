-- step.lua: one rate-limit step of the Redis store, atomic as a script.
--
-- The algorithms of app/limiter.c and the step of app/store_sqlite_step.c
-- (sq_step), replicated: every item is decided in order on the state
-- stored before the step (a later item with the same keys sees the state
-- an earlier one left, so the same (policy, client) twice counts twice);
-- the request is admitted when every non-advisory item admits; then, and
-- only then, each admitted item writes its state. A rejected request
-- writes nothing; neither does an advisory item that rejects, unless its
-- policy has a ban (the penalty box, limiter.h "The ban"): a refusal it
-- counts, or the ban it starts, is written whether the request is
-- admitted or not.
--
-- KEYS[2i-1]: hash rlg:{C}:P of item i, fields window_start_ms count
--   prev_count tat_us expires_ms (the columns of rlg_state), and for a
--   policy with a ban refused refused_start_ms ban_until_ms;
-- KEYS[2i]: list rlg:{C}:P:log, the sliding log, ascending ms, for a
--   sliding_log item; for the others the state key again (never read:
--   Redis Cluster answers TRYAGAIN during a slot migration to a script
--   whose keys are partly missing, and a log key never exists for them).
-- ARGV[1]: now in ms (decimal), or "" for the server's TIME.
-- ARGV[2]: n; then per item algorithm (its number, enum rlg_algorithm:
--   the rows of ALGORITHMS below), limit, window_ms, burst, flags: 1 for
--   advisory, plus 2 for a charge for a new key (if_new: struct
--   rlg_store_item), which applies only when the item before it (no such
--   charge itself) has no live state, and is otherwise skipped: admitted,
--   remaining = limit, reset = retry = next = 0, nothing read or written;
--   cost: the request's units, 1..COST_MAX (limiter.h's request cost: all
--   or nothing; a sliding_log item appends cost entries); ban: the ban's
--   length in ms, 0 for none, else whole seconds up to BAN_MS_MAX;
--   ban_after: the refusal in a window that starts it, 0..LIMIT_MAX (0
--   counts as 1).
--   A batch (group commit, store_redis_batch.c) is several requests in
--   one call: n and its items again after the last item, once per
--   request, their KEYS in the same order. Each request is decided and
--   written on its own, in order, all or nothing, at one now_ms; a later
--   one sees what an earlier one wrote, as if each had come alone.
-- Reply: now_ms used, then per item (of every request, in order)
--   admitted (0/1), limit, remaining, reset_ms, retry_ms, next_ms: struct
--   rlg_decision (next_ms: until more quota is available, the ietf
--   style's t; retry_ms when rejected).
--
-- Numbers: Lua's are doubles, exact for integers up to 2^53. Times in ms,
-- counts and windows are far below that (the limiter clamps times to
-- year 9999, 2.5e14 ms). Two things are not: a count times a window (up
-- to 1e9 * 3.2e10) and GCRA microseconds (2^53 us is the year 2255). For
-- those the script checks the magnitude and, only when it could pass
-- 2^53, computes with small exact big integers (base 2^24 limbs), so every
-- decision and every stored value is the limiter's to the last unit. Only
-- a damaged tat_us near 2^63 could give a retry_ms beyond 2^53 ms, which
-- the reply then rounds. Integers are written with %d, never with Lua's
-- default "%.14g".

local TIME_MS_MAX = 253402300799999          -- RLG_TIME_MS_MAX
local LIMIT_MAX = 1000000000                 -- RLG_LIMIT_MAX, RLG_BURST_MAX
local WINDOW_MS_MAX = 366 * 24 * 3600 * 1000 -- RLG_WINDOW_S_MAX in ms
local LOG_LIMIT_MAX = 100000                 -- RLG_SLIDING_LOG_LIMIT_MAX
local COST_MAX = 1000000000                  -- RLG_COST_MAX
local BAN_MS_MAX = 366 * 24 * 3600 * 1000    -- RLG_BAN_S_MAX in ms
local GCRA_TAU_MAX_US = 1000000000000000000  -- 1e18, exact as a double
local EXPIRES_GRAIN_MS = 1000                -- SQ_EXPIRES_GRAIN_MS
local SAFE = 4503599627370496                -- 2^52: plain doubles below
local BASE = 16777216                        -- 2^24: a big integer's limb

local floor = math.floor

local function fmt(x)
  return string.format("%d", x)
end

-- A decimal integer ("-" allowed), or nil.
local function parse_int(s)
  if type(s) ~= "string" or not string.find(s, "^%-?%d+$") then
    return nil
  end
  return tonumber(s)
end

-- A stored field: missing or damaged counts as 0, as a fresh row does.
local function field(s)
  return parse_int(s) or 0
end

-- rlg_limiter_clamp_time
local function clamp_time(t)
  if t <= 0 then
    return 0
  end
  if t > TIME_MS_MAX then
    return TIME_MS_MAX
  end
  return t
end

-- align_start: the aligned window a stored start falls in. a % w is
-- exact for 0 <= a < 2^53: floor(a / w) cannot round up to the next
-- integer while a < 2^53.
local function align_start(start, w)
  start = clamp_time(start)
  return start - start % w
end

local function clamp_count(c, limit)
  if c < 0 then
    return 0
  end
  if c > limit then
    return limit
  end
  return c
end

-- Big integers: nonnegative, little-endian arrays of base 2^24 limbs, no
-- leading zero limb (zero is {}). A limb product is below 2^48, so every
-- partial sum below stays exact.
local function big_of(x)  -- x: a nonnegative integral double
  local r = {}
  while x > 0 do
    local q = floor(x / BASE)
    r[#r + 1] = x - q * BASE
    x = q
  end
  return r
end

local function big_trim(r)
  while #r > 0 and r[#r] == 0 do
    r[#r] = nil
  end
  return r
end

local function big_cmp(a, b)
  if #a ~= #b then
    return #a < #b and -1 or 1
  end
  for i = #a, 1, -1 do
    if a[i] ~= b[i] then
      return a[i] < b[i] and -1 or 1
    end
  end
  return 0
end

local function big_add(a, b)
  local r, carry = {}, 0
  for i = 1, math.max(#a, #b) do
    local t = (a[i] or 0) + (b[i] or 0) + carry
    carry = t >= BASE and 1 or 0
    r[i] = t - carry * BASE
  end
  if carry > 0 then
    r[#r + 1] = carry
  end
  return r
end

local function big_sub(a, b)  -- a >= b
  local r, borrow = {}, 0
  for i = 1, #a do
    local t = a[i] - (b[i] or 0) - borrow
    borrow = t < 0 and 1 or 0
    r[i] = t + borrow * BASE
  end
  return big_trim(r)
end

local function big_mul(a, b)
  local r = {}
  for i = 1, #a + #b do
    r[i] = 0
  end
  for i = 1, #a do
    local carry = 0
    for j = 1, #b do
      local t = r[i + j - 1] + a[i] * b[j] + carry
      carry = floor(t / BASE)
      r[i + j - 1] = t - carry * BASE
    end
    local k = i + #b
    while carry > 0 do
      local t = (r[k] or 0) + carry
      carry = floor(t / BASE)
      r[k] = t - carry * BASE
      k = k + 1
    end
  end
  return big_trim(r)
end

-- The nearest double (exact below 2^53).
local function big_num(a)
  local x = 0
  for i = #a, 1, -1 do
    x = x * BASE + a[i]
  end
  return x
end

-- floor(a / d) and a % d for 0 < d < 2^24: long division, exact.
local function big_divsmall(a, d)
  local q, r = {}, 0
  for i = #a, 1, -1 do
    local t = r * BASE + a[i]
    q[i] = floor(t / d)
    r = t - q[i] * d
  end
  return big_trim(q), r
end

-- floor(a / d) as a double for 0 < d < 2^53, or nil when it is 2^50 or
-- more. A double estimate, then corrected by exact products (it is off
-- by at most 2 below 2^50).
local function big_div(a, d)
  if d < BASE then
    local q = big_divsmall(a, d)
    return big_num(q)
  end
  local q = floor(big_num(a) / d)
  if q >= SAFE / 4 then
    return nil
  end
  local bd = big_of(d)
  for _ = 1, 8 do
    if q > 0 and big_cmp(big_mul(big_of(q), bd), a) > 0 then
      q = q - 1
    elseif big_cmp(big_mul(big_of(q + 1), bd), a) <= 0 then
      q = q + 1
    else
      return q
    end
  end
  error("rlgate: big_div did not converge")
end

-- A nonnegative decimal string, exactly; nil if negative or damaged.
local function big_parse(s)
  if type(s) ~= "string" or not string.find(s, "^%d+$") then
    return nil
  end
  local r = {}
  for i = 1, #s do
    local carry = string.byte(s, i) - 48
    for j = 1, #r do
      local t = r[j] * 10 + carry
      carry = floor(t / BASE)
      r[j] = t - carry * BASE
    end
    if carry > 0 then
      r[#r + 1] = carry
    end
  end
  return big_trim(r)
end

local function big_str(a)
  if #a == 0 then
    return "0"
  end
  local parts, r = {}, nil
  while #a > 0 do
    a, r = big_divsmall(a, 1000000)
    parts[#parts + 1] = r
  end
  local s = fmt(parts[#parts])
  for i = #parts - 1, 1, -1 do
    s = s .. string.format("%06d", parts[i])
  end
  return s
end

-- Two kits of the same operations: plain doubles when every value of the
-- computation is known to stay below 2^52, big integers otherwise.
-- mul takes two plain integers; add, sub (a >= b), lt take kit values;
-- div(a, d) is floor(a / d) as a plain number for a plain d (nil: huge);
-- num(a) is a as a plain number, for a value known to be below 2^53.
local NUM = {
  of = function(x) return x end,
  mul = function(a, b) return a * b end,
  add = function(a, b) return a + b end,
  sub = function(a, b) return a - b end,
  lt = function(a, b) return a < b end,
  div = function(a, d) return floor(a / d) end,
  num = function(a) return a end,
  str = fmt,
}
local BIG = {
  of = big_of,
  mul = function(a, b) return big_mul(big_of(a), big_of(b)) end,
  add = big_add,
  sub = big_sub,
  lt = function(a, b) return big_cmp(a, b) < 0 end,
  div = big_div,
  num = big_num,
  str = big_str,
}

-- sq_expires: stored expiries rounded up to a whole second.
local function round_expires(e)
  if e <= 0 then
    return e
  end
  local r = e % EXPIRES_GRAIN_MS
  return r == 0 and e or e + EXPIRES_GRAIN_MS - r
end

local function bad(msg)
  return redis.error_reply("rlgate: " .. msg)
end

-- ARGV[1], the time the call runs at in ms: Redis TIME when "" (so
-- gateways with skewed clocks agree), else the integer given; clamped
-- as the limiter clamps it. nil when it is no integer.
local function call_now()
  local now
  if ARGV[1] == "" then
    if redis.replicate_commands ~= nil then
      redis.replicate_commands()      -- TIME before writes (Redis < 5)
    end
    local t = redis.call("TIME")
    now = tonumber(t[1]) * 1000 + floor(tonumber(t[2]) / 1000)
  else
    now = parse_int(ARGV[1])
    if now == nil then
      return nil
    end
  end
  return clamp_time(now)
end

-- policy_ok: an item's policy within what the config builds (limit up to
-- limit_max, the window, a burst where the algorithm takes one).
local function policy_ok(it, limit_max)
  return it.limit >= 1 and it.limit <= limit_max and it.w >= 1 and
      it.w <= WINDOW_MS_MAX and
      (not it.desc.burst or (it.burst >= 1 and it.burst <= LIMIT_MAX))
end

-- ---- the end of the helpers db/redis/sync.lua shares (Makefile.am) ----

-- rlg_limiter_fixed_window. in: stored fields; returns decision, state.
-- A request of cost c: count + c <= limit, then count += c.
local function fixed_window(limit, w, st, now_ms, c)
  now_ms = clamp_time(now_ms)
  local start = now_ms - now_ms % w
  local ws = align_start(st.ws, w)
  local count = clamp_count(st.count, limit)
  if start > ws or count == 0 then
    -- A new window, or a fresh client.
    ws = start
    count = 0
  elseif start < ws then
    -- The clock went back: count in the stored (later) window, delays
    -- measured from its start.
    start = ws
    if now_ms < start then
      now_ms = start
    end
  end
  local wend = ws + w
  if c <= limit - count then
    count = count + c
    -- Nothing comes back before the window's end: next = reset.
    return { admitted = true, remaining = limit - count,
      reset = wend - now_ms, retry = 0, next = wend - now_ms },
      { ws = ws, count = count, prev = 0, tat = "0", expires = wend }
  end
  -- Refused: what is left stays; the next window (1 ms when the count
  -- is 0 already: c > limit, which never fits).
  local retry = count == 0 and 1 or wend - now_ms
  return { admitted = false, remaining = limit - count, reset = retry,
    retry = retry, next = retry }, nil
end

-- rlg_limiter_sliding_window: prev * (W - e) + count * W < limit * W,
-- compared exactly (in the big kit when limit * W could pass 2^52). A
-- request of cost c: prev * (W - e) + (count + c - 1) * W < limit * W
-- (at most 3 * limit * W: still exact in the plain kit), count += c; c
-- above limit is decided as limit and never admitted.
local function sliding_window(limit, w, st, now_ms, cost)
  local over = cost > limit
  local c = over and limit or cost
  local K = (2 * limit * w < SAFE) and NUM or BIG
  now_ms = clamp_time(now_ms)
  local now = now_ms
  local start = now - now % w
  local ws = align_start(st.ws, w)
  local count = clamp_count(st.count, limit)
  local prev = clamp_count(st.prev, limit)
  if ws > start then
    -- The clock went back: decide as at the stored window's start.
    start = ws
    now = start
  elseif ws == start - w then
    prev = count
    count = 0
  elseif ws < start then
    prev = 0
    count = 0
  end
  ws = start
  local e = now - start
  local lw = K.mul(limit, w)
  local used = K.add(K.mul(prev, w - e), K.mul(count, w))
  local need = K.add(used, K.mul(c - 1, w))
  if K.lt(need, lw) and not over then
    count = count + c
    local expires = start + 2 * w
    -- ceil(room / W) more at this instant, room = lw - used after it.
    local after = K.add(K.mul(prev, w - e), K.mul(count, w))
    local remaining = 0
    if K.lt(after, lw) then
      remaining = K.div(K.add(K.sub(lw, after), K.of(w - 1)), w)
    end
    -- sw_next_ms: more quota when room + prev * x > remaining * W, the
    -- first x being gap / prev + 1 with gap = remaining * W - room =
    -- remaining * W + after - lw (>= 0), if within this window (its end
    -- included); else one ms into the next window.
    local next = (w - e) + 1
    if prev > 0 then
      local gap = K.sub(K.add(K.mul(remaining, w), after), lw)
      local x = K.div(gap, prev)
      -- nil: x is past 2^50, so past w - e too.
      if x ~= nil and x + 1 <= w - e then
        next = x + 1
      end
    end
    return { admitted = true, remaining = remaining,
      reset = expires - now_ms, retry = 0, next = next + (now - now_ms) },
      { ws = ws, count = count, prev = prev, tat = "0", expires = expires }
  end
  -- Refused: what is left to requests of cost 1 stays.
  local remaining = 0
  if K.lt(used, lw) then
    remaining = K.div(K.add(K.sub(lw, used), K.of(w - 1)), w)
  end
  if K.lt(need, lw) then
    -- c > limit with the quota there: never, 1 ms.
    return { admitted = false, remaining = remaining, reset = 1,
      retry = 1, next = 1 }, nil
  end
  -- In the next window (prev' = count, count' = 0) at its e'-th ms, the
  -- first with count * (W - e') < R = (limit - c + 1) * W: 0 when
  -- count * W < R, else W - (R - 1) / count; unless the decay of prev
  -- admits earlier: at x ms before this window's end iff prev * x <
  -- room = (limit - count - c + 1) * W.
  local retry = w - e
  local r = K.mul(limit - c + 1, w)
  if count > 0 and not K.lt(K.mul(count, w), r) then
    retry = retry + w - K.div(K.sub(r, K.of(1)), count)
  end
  if prev > 0 and limit - count - c + 1 >= 1 then
    local room = K.mul(limit - count - c + 1, w)
    local x = K.div(K.sub(room, K.of(1)), prev)
    -- nil: x is past 2^50, so past w - e too.
    if x ~= nil and x >= 1 and x < w - e and (w - e) - x < retry then
      retry = (w - e) - x
    end
  end
  retry = retry + (now - now_ms)
  return { admitted = false, remaining = remaining, reset = retry,
    retry = retry, next = retry }, nil
end

-- rlg_limiter_token_bucket: GCRA in microseconds, the emission interval
-- T rounded up, the tolerance (burst - 1) * T capped at 1e18 us. A
-- request of cost c: now >= tat + (c - 1) * T - tau, tat += c * T; the
-- capacity is tau / T + 1 (burst unless tau is capped), a cost above it
-- decided as the capacity and never admitted.
local function token_bucket(limit, w, burst, st, now_ms, cost)
  now_ms = clamp_time(now_ms)
  local t_us = floor((w * 1000 + limit - 1) / limit)  -- exact: < 2^45
  local p = (burst - 1) * t_us
  local tat_n = field(st.tat)
  local K, now_us, tau, tat
  local cap = burst
  if now_ms * 1000 + p + t_us < SAFE and tat_n < SAFE then
    -- Every value below stays under 2^53 (p < 2^52 < 1e18: no cap).
    K, now_us, tau, tat = NUM, now_ms * 1000, p, tat_n
  else
    K = BIG
    now_us = big_mul(big_of(now_ms), big_of(1000))
    tau = big_mul(big_of(burst - 1), big_of(t_us))
    if big_cmp(tau, big_of(GCRA_TAU_MAX_US)) > 0 then
      tau = big_of(GCRA_TAU_MAX_US)
      -- Capped: T > 1e9 us, so the quotient is below 1e9.
      cap = big_div(tau, t_us) + 1
    end
    tat = big_parse(st.tat) or {}    -- negative or damaged: before now
  end
  local over = cost > cap
  local c = over and cap or cost
  if K.lt(tat, now_us) then
    tat = now_us
  end
  local lhs = K.add(now_us, tau)
  -- lhs - (c - 1) * T >= now: (c - 1) * T <= tau.
  local lhs_c = K.sub(lhs, K.mul(c - 1, t_us))
  if K.lt(lhs_c, tat) or over then
    -- Refused: what is left to requests of cost 1 stays (lhs - tat <=
    -- tau: the quotient is below burst).
    local remaining = 0
    if not K.lt(lhs, tat) then
      remaining = K.div(K.sub(lhs, tat), t_us) + 1
    end
    if not K.lt(lhs_c, tat) then
      -- Above the capacity, the bucket full: never, 1 ms.
      return { admitted = false, remaining = remaining, reset = 1,
        retry = 1, next = 1 }, nil
    end
    -- now < tat + (c - 1) * T - tau: until then, whole ms rounded up.
    local retry = K.div(K.add(K.sub(tat, lhs_c), K.of(999)), 1000)
    return { admitted = false, remaining = remaining, reset = retry,
      retry = retry, next = retry }, nil
  end
  local tat_new = K.add(tat, K.mul(c, t_us))
  local expires = K.div(K.add(tat_new, K.of(999)), 1000)
  local remaining = 0
  if not K.lt(lhs, tat_new) then
    remaining = K.div(K.sub(lhs, tat_new), t_us) + 1
  end
  -- The next token: remaining * T - room us, room = lhs - tat_new (T -
  -- room mod T when room >= 0, -room when it is negative), 1 to T us, so
  -- plain once computed; whole ms rounded up.
  local next_us = K.num(K.sub(K.add(K.mul(remaining, t_us), tat_new), lhs))
  return { admitted = true, remaining = remaining,
    reset = expires - now_ms, retry = 0,
    next = floor((next_us + 999) / 1000) },
    { ws = 0, count = 0, prev = 0, tat = K.str(tat_new), expires = expires }
end

-- rlg_limiter_sliding_log on log[1..n], ascending. A request of cost c:
-- m + c <= limit, c entries appended; c above limit decided as limit and
-- never admitted.
local function sliding_log(limit, w, log, now_ms, cost)
  local over = cost > limit
  local c = over and limit or cost
  now_ms = clamp_time(now_ms)
  local n = #log
  -- The first entry inside the window: log[lo] > now - window.
  local lo, hi = 1, n + 1
  while lo < hi do
    local mid = floor((lo + hi) / 2)
    if log[mid] > now_ms - w then
      hi = mid
    else
      lo = mid + 1
    end
  end
  local m = n - lo + 1
  if m + c <= limit and not over then
    local oldest, newest = now_ms, now_ms
    if m > 0 then
      oldest = math.min(oldest, clamp_time(log[lo]))
      newest = math.max(newest, clamp_time(log[n]))
    end
    -- More quota when the oldest entry (now, for a fresh log) slides out.
    return { admitted = true, remaining = limit - m - c,
      reset = newest + w - now_ms, retry = 0,
      next = math.max(1, oldest + w - now_ms) },
      { ws = oldest, count = m + c, prev = 0, tat = "0",
        expires = newest + w }
  end
  local remaining = m < limit and limit - m or 0
  if m == 0 then
    -- c > limit, the log empty: never, 1 ms.
    return { admitted = false, remaining = remaining, reset = 1,
      retry = 1, next = 1 }, nil,
      { ws = 0, count = 0, prev = 0, tat = "0", expires = 0 }
  end
  -- Full for c: admitted again once log[n + c - limit] has slid out.
  local retry = clamp_time(log[n + c - limit]) + w - now_ms
  if retry < 1 then
    retry = 1                                -- an unsorted log
  end
  -- The row the operator views see (a ban writes it with its refusal).
  local row = { ws = clamp_time(log[lo]), count = m, prev = 0, tat = "0",
    expires = math.max(clamp_time(log[n]) + w, now_ms + 1) }
  return { admitted = false, remaining = remaining, reset = retry,
    retry = retry, next = retry }, nil, row
end

-- The penalty box (rlg_limiter_step's ban_holds): a ban that holds at
-- now refuses until its end (an end beyond now + ban counts as that),
-- nothing written. nil when none holds.
local function ban_holds(it, st, now)
  if it.ban == 0 then
    return nil
  end
  now = clamp_time(now)
  if st.ban <= now then
    return nil
  end
  local r = math.min(st.ban, now + it.ban) - now
  return { admitted = false, remaining = 0, reset = r, retry = r, next = r }
end

-- ban_count: the ban's fields of out after the algorithm decided d (no
-- ban held). Admitted: the count of this window kept. Refused: counted;
-- the ban_after-th starts the ban (d then waits its whole length), and
-- out's expiry covers the ban and the window. A policy with no ban: out
-- unchanged (its ban fields are never written).
local function ban_count(it, st, now, d, out)
  if it.ban == 0 then
    return
  end
  now = clamp_time(now)
  local start = now - now % it.w
  local after = math.max(it.ban_after, 1)
  local n = 0
  if st.rstart == start then
    n = clamp_count(st.refused, after - 1)
  end
  out.refused = n
  out.rstart = n > 0 and start or 0
  out.ban = 0
  if d.admitted then
    return
  end
  n = n + 1
  out.rstart = start
  if n < after then
    out.refused = n
  else
    out.refused = 0
    out.ban = now + it.ban
    d.remaining = 0
    d.retry = it.ban
    d.reset = it.ban
    d.next = it.ban
  end
  out.expires = math.max(out.expires, out.ban, start + it.w)
end

-- The descriptor table of app/limiter.c (struct rlg_algorithm_desc), by
-- the algorithm's number: step(it, st, now_ms) decides an item on its
-- stored fields; log: it keeps a log (the item's log key, appended to,
-- decided by sliding_log); burst: it takes one; limit_max: its cap.
local ALGORITHMS = {
  [0] = { name = "fixed_window", limit_max = LIMIT_MAX,
    step = function(it, st, now)
      return fixed_window(it.limit, it.w, st, now, it.cost)
    end },
  [1] = { name = "sliding_window", limit_max = LIMIT_MAX,
    step = function(it, st, now)
      return sliding_window(it.limit, it.w, st, now, it.cost)
    end },
  [2] = { name = "token_bucket", limit_max = LIMIT_MAX, burst = true,
    step = function(it, st, now)
      return token_bucket(it.limit, it.w, it.burst, st, now, it.cost)
    end },
  [3] = { name = "sliding_log", limit_max = LOG_LIMIT_MAX, log = true },
}

-- The whole list of a sliding log, read once per step: strings (LINSERT
-- needs the stored text as its pivot) and numbers.
local logs = {}
local function log_of(key)
  local l = logs[key]
  if l == nil then
    local raw = redis.call("LRANGE", key, 0, -1)
    l = { raw = raw, ms = {} }
    for i = 1, #raw do
      l.ms[i] = field(raw[i])
    end
    logs[key] = l
  end
  return l
end

-- sq_decide_log: the newest limit entries inside the window, plus k at
-- now for the earlier items of this step with the same keys that append
-- (their costs summed: their writes come after every decision), the
-- newest limit kept.
local function log_entries(key, limit, w, now, k)
  local ms = log_of(key).ms
  local sel = {}
  local i = #ms
  while i >= 1 and ms[i] > now - w and #sel < limit do
    sel[#sel + 1] = ms[i]
    i = i - 1
  end
  local log = {}
  for j = #sel, 1, -1 do
    log[#log + 1] = sel[j]
  end
  if k > 0 then
    local at = #log
    while at > 0 and log[at] > now do
      at = at - 1
    end
    for _ = 1, k do
      table.insert(log, at + 1, now)
    end
    while #log > limit do
      table.remove(log, 1)
    end
  end
  return log
end

-- sq_save_log: c entries at now join the log after the entries <= now
-- (so it stays ascending when the clock went back), and entries <= now -
-- window go.
local function log_append(key, now, w, cost)
  local l = log_of(key)
  local c = 0
  while c < #l.ms and l.ms[c + 1] <= now - w do
    c = c + 1
  end
  if c > 0 then
    redis.call("LTRIM", key, c, -1)
    local ms, raw = {}, {}
    for i = c + 1, #l.ms do
      ms[#ms + 1] = l.ms[i]
      raw[#raw + 1] = l.raw[i]
    end
    l.ms, l.raw = ms, raw
  end
  local at = #l.ms
  while at > 0 and l.ms[at] > now do
    at = at - 1
  end
  for _ = 1, cost do
    if at == #l.ms then
      redis.call("RPUSH", key, fmt(now))
    else
      -- The first entry > now is the first with its text: all before
      -- are <= now.
      redis.call("LINSERT", key, "BEFORE", l.raw[at + 1], fmt(now))
    end
    table.insert(l.ms, at + 1, now)
    table.insert(l.raw, at + 1, fmt(now))
    at = at + 1
  end
end

-- ---- the step ------------------------------------------------------------

-- Each call reads its logs afresh: as a library (db/redis/library.sh)
-- the helpers above stay from one call to the next.
logs = {}

-- The requests of the call: ARGV from 2 on is n, then 8 per item, once
-- per request (a batch: store_redis_batch.c), and KEYS 2 per item in the
-- same order. Every request is checked before any runs, so a malformed
-- call writes nothing.
local function parse_request(a, kbase)
  local n = parse_int(ARGV[a])
  if n == nil or n < 1 or a + 8 * n > #ARGV or kbase + 2 * n > #KEYS then
    return nil
  end
  local items = {}
  for i = 1, n do
    local b = a + 1 + 8 * (i - 1)
    local it = {
      alg = parse_int(ARGV[b]), limit = parse_int(ARGV[b + 1]),
      w = parse_int(ARGV[b + 2]), burst = parse_int(ARGV[b + 3]),
      flags = ARGV[b + 4], cost = parse_int(ARGV[b + 5]),
      ban = parse_int(ARGV[b + 6]), ban_after = parse_int(ARGV[b + 7]),
      key = KEYS[kbase + 2 * i - 1], logkey = KEYS[kbase + 2 * i],
    }
    it.desc = it.alg ~= nil and ALGORITHMS[it.alg] or nil
    if it.desc == nil or it.limit == nil or
        it.w == nil or it.burst == nil or
        not string.find(it.flags, "^[0-3]$") then
      return nil, "item " .. i .. ": malformed policy arguments"
    end
    if it.cost == nil or it.cost < 1 or it.cost > COST_MAX then
      return nil, "item " .. i .. ": cost out of range"
    end
    if it.ban == nil or it.ban_after == nil or it.ban < 0 or
        it.ban > BAN_MS_MAX or it.ban % 1000 ~= 0 or
        (it.ban > 0 and it.ban < 1000) or it.ban_after < 0 or
        it.ban_after > LIMIT_MAX then
      return nil, "item " .. i .. ": ban out of range"
    end
    it.flags = tonumber(it.flags)
    it.advisory = it.flags % 2 == 1
    it.if_new = it.flags >= 2
    if it.if_new and (i == 1 or items[i - 1].if_new) then
      return nil, "item " .. i .. ": a charge for a new key with no key before it"
    end
    -- The limiter refuses what the config never builds.
    if not policy_ok(it, it.desc.limit_max) then
      return nil, "item " .. i .. ": policy out of range"
    end
    items[i] = it
  end
  return items
end

local requests = {}
do
  local a, kbase = 2, 0
  repeat
    local items, why = parse_request(a, kbase)
    if items == nil then
      if why ~= nil and #requests > 0 then
        why = "request " .. (#requests + 1) .. ", " .. why
      end
      return bad(why or "expected ARGV now, n, then 8 per item, and 2 keys per item")
    end
    requests[#requests + 1] = items
    a = a + 1 + 8 * #items
    kbase = kbase + 2 * #items
  until a > #ARGV
  if kbase ~= #KEYS then
    return bad("expected ARGV now, n, then 8 per item, and 2 keys per item")
  end
end

local now_ms = call_now()
if now_ms == nil then
  return bad("now_ms is not an integer")
end

-- The state item i reads: what an earlier item with the same keys
-- leaves, else the stored one (a missing hash is the all-zero state),
-- with its ban's fields.
local function ban_state(items, i)
  local it = items[i]
  for j = i - 1, 1, -1 do
    if items[j].key == it.key then
      if items[j].out or items[j].st then
        return items[j].out or items[j].st
      end
      break
    end
  end
  local f = redis.call("HMGET", it.key, "window_start_ms", "count",
    "prev_count", "tat_us", "expires_ms", "refused", "refused_start_ms",
    "ban_until_ms")
  return { ws = field(f[1]), count = field(f[2]), prev = field(f[3]),
    tat = f[4] or "0", expires = field(f[5]), refused = field(f[6]),
    rstart = field(f[7]), ban = field(f[8]) }
end

-- An item's decision with its ban (rlg_limiter_step's wrapper): a ban
-- that holds refuses first, nothing to write; else step() decides (d,
-- out, and the row a refusal leaves), and under a ban a refusal is
-- counted and written (it.wref).
local function step_banned(it, st, step)
  it.d = ban_holds(it, st, now_ms)
  if it.d ~= nil then
    return
  end
  local row
  it.d, it.out, row = step()
  if not it.d.admitted and it.ban > 0 then
    it.out = row
    it.wref = true
  end
  if it.out ~= nil then
    ban_count(it, st, now_ms, it.d, it.out)
  end
end

-- Decides every item of one request; nothing is written yet. Whether
-- the request is admitted.
local function decide(items)
  local admitted = true
  for i = 1, #items do
    local it = items[i]
    if it.if_new and items[i - 1].live then
      -- The key before it is not new: nothing to charge.
      it.skip = true
      it.d = { admitted = true, remaining = it.limit, reset = 0, retry = 0,
        next = 0 }
    elseif it.desc.log then
      local k = 0
      for j = 1, i - 1 do
        if items[j].key == it.key and items[j].append then
          k = k + items[j].cost
        end
      end
      local log = log_entries(it.logkey, it.limit, it.w, now_ms, k)
      it.live = #log > 0
      -- Its ban lives in the state hash: read only for a ban.
      local st = { ban = 0, refused = 0, rstart = 0 }
      if it.ban > 0 then
        st = ban_state(items, i)
      end
      it.st = st
      step_banned(it, st, function()
        return sliding_log(it.limit, it.w, log, now_ms, it.cost)
      end)
      it.append = it.d.admitted
    else
      -- The state an earlier item with the same keys leaves, else the
      -- stored one (a missing hash is the all-zero state).
      local st = ban_state(items, i)
      it.st = st
      it.live = st.expires ~= nil and st.expires > now_ms
      step_banned(it, st, function()
        -- Refused, the state left is the stored one.
        local d, out = it.desc.step(it, st, now_ms)
        return d, out, { ws = st.ws, count = st.count, prev = st.prev,
          tat = st.tat, expires = st.expires }
      end)
    end
    -- An advisory item (dry run) never rejects the request.
    if not it.d.admitted and not it.advisory then
      admitted = false
    end
  end
  return admitted
end

-- Admitted (admitted true): every admitted item writes its state, in
-- order (the last of the same keys wins); each key written expires with
-- its state. Admitted or not, a refusal that a ban counts writes its
-- state (never a log entry).
local function commit(items, admitted)
  for i = 1, #items do
    local it = items[i]
    local adm = admitted and it.d.admitted and not it.skip
    if adm or it.wref then
      local o = it.out
      local expires = round_expires(o.expires)
      local ttl = fmt(math.max(1, expires - now_ms))
      if it.desc.log and adm then
        log_append(it.logkey, now_ms, it.w, it.cost)
        redis.call("PEXPIRE", it.logkey, ttl)
      end
      redis.call("HSET", it.key, "window_start_ms", fmt(o.ws),
        "count", fmt(o.count), "prev_count", fmt(o.prev),
        "tat_us", o.tat, "expires_ms", fmt(expires))
      if it.ban > 0 then
        redis.call("HSET", it.key, "refused", fmt(o.refused),
          "refused_start_ms", fmt(o.rstart), "ban_until_ms", fmt(o.ban))
      end
      redis.call("PEXPIRE", it.key, ttl)
    end
  end
end

-- Each request in order, all or nothing on its own: a later one sees
-- what an earlier one wrote, as if each had come alone.
local reply = { now_ms }
for r = 1, #requests do
  local items = requests[r]
  commit(items, decide(items))
  for i = 1, #items do
    local d = items[i].d
    reply[#reply + 1] = d.admitted and 1 or 0
    reply[#reply + 1] = items[i].limit
    reply[#reply + 1] = d.remaining
    reply[#reply + 1] = d.reset
    reply[#reply + 1] = d.retry
    reply[#reply + 1] = d.next
  end
end
return reply
