-- token_bucket: up to B tokens, refilled at L per window in whole slices of
-- W/S, kept in millionths of a token, and down to −D tokens after charges;
-- the tokens of leases held in groups, each until its end, exactly as
-- internal/algorithms/doc.go states it.
--
-- KEYS[1]  hash {l = level in millionths of a token, below 0 while in debt,
--          t = slice of the last refill, x = when the bucket is full again
--          in µs, and for each group of leases' tokens that is held, in
--          order of their ends, hi = the tokens it holds in millionths and
--          ui = when it ends in µs, i from 1 to G}
-- ARGV     mode, now, L, W, n, receipt time, receipt seq, B, D, and a
--          lease's hold or nothing (see lua.go)
-- reply    {allowed, remaining, reset, now, 0}
--
-- Every number stays an integer below 2^53 (the level lies in [−D·S, B·S],
-- what the groups hold in [0, B·S], and n ≤ B + D + 1, so C − level and n·S
-- are below 2^33·10^6; a group's end is below now + 2·hold, below 2^53 as
-- now + MaxHold + W is), so Lua's doubles hold it exactly.

-- fdiv, cdiv, int, clock and expire come from prelude.lua.
local S = 1000000
-- MAXWAIT caps a reported wait at 2^53−1 µs (about 285 years): only a burst
-- that takes longer than that to refill from empty reaches it.
local MAXWAIT = 9007199254740991
-- G is the most groups of leases' tokens a bucket keeps (holdGroups).
local G = 9

local key = KEYS[1]
local mode = ARGV[1]
local now = clock(ARGV[2])
local L = tonumber(ARGV[3])
local W = tonumber(ARGV[4])
local n = tonumber(ARGV[5])
local B = tonumber(ARGV[8])
local D = tonumber(ARGV[10])
local leased = tonumber(ARGV[11]) or 0
local q = W / S
local C = B * S

-- filled returns min(most, level + k·L) for level ≤ most and k ≥ 0: the
-- level after k slices of refill up to most, without forming a product
-- above most − level.
local function filled(level, k, most)
  if L > 0 and k > 0 then
    if k >= cdiv(most - level, L) then
      return most
    end
    return level + k * L
  end
  return level
end

-- slices returns (t + ⌈(want − level)/L⌉)·q − from for want > level, capped
-- at MAXWAIT. It is formed as k·q + r with r = (t·q − from) mod q, so every
-- term stays exact.
local function slices(level, t, want, from)
  local base = t * q - from
  local j = -fdiv(base, q)
  local r = base + j * q
  local k = cdiv(want - level, L) - j
  if k > fdiv(MAXWAIT - r, q) then
    return MAXWAIT
  end
  return k * q + r
end

-- groups are the groups of leases' tokens held, {h, u} in order of u.
local groups = {}

-- heldFrom returns what the groups from the i-th on hold.
local function heldFrom(i)
  local h = 0
  for j = i, #groups do
    h = h + groups[j][1]
  end
  return h
end

-- keep keeps the groups that hold tokens and end after now (all that hold
-- tokens when now is nil).
local function keep(now)
  local kept = {}
  for _, g in ipairs(groups) do
    if g[1] > 0 and (now == nil or g[2] > now) then
      kept[#kept + 1] = g
    end
  end
  groups = kept
end

-- A state that has reached its expiry x is a new, full bucket.
local tau = fdiv(now, q)
local fields = {'l', 't', 'x'}
for i = 1, G do
  fields[#fields + 1] = 'h' .. i
  fields[#fields + 1] = 'u' .. i
end
local state = redis.call('HMGET', key, unpack(fields))
local level, t, x = tonumber(state[1]), tonumber(state[2]), tonumber(state[3])
local had = 0
for i = 1, G do
  local h, u = tonumber(state[2 + 2 * i]), tonumber(state[3 + 2 * i])
  if h ~= nil and u ~= nil then
    groups[#groups + 1] = {h, u}
    had = i
  end
end
local stale = x ~= nil and x <= now
if level == nil or t == nil or x == nil or x <= now then
  level, t, groups = C, tau, {}
else
  -- What the groups hold beyond C (a burst lowered under them), the
  -- earliest hold no longer.
  local over = heldFrom(1) - C
  for _, g in ipairs(groups) do
    local d = math.min(math.max(over, 0), g[1])
    g[1] = g[1] - d
    over = over - d
  end
  keep(nil)
  -- Refill to slice tau: min(C, level + (tau − t)·L), without forming a
  -- product above C − level; a slice that starts before a group's end only
  -- up to C less what it and the later groups hold. A level above the cap,
  -- left by a larger burst, is cut, a debt beyond D forgiven; a clock that
  -- went back refills nothing.
  level = math.max(math.min(level, C - heldFrom(1)), -D * S)
  if tau > t then
    local from = t
    for i, g in ipairs(groups) do
      local m = math.min(tau, math.max(from, cdiv(g[2], q) - 1))
      level = filled(level, m - from, C - heldFrom(i))
      from = m
    end
    level = filled(level, tau - from, C)
    t = tau
  end
  -- The leases of the groups that end by now have ended.
  keep(now)
end

-- wait returns the wait from from until the bucket, left alone, holds
-- want > level: while want is above C less what the groups from the i-th
-- on hold, the refill reaches that cap at the last slice before the i-th
-- group ends, and goes on from there.
local function wait(want, from)
  local base, lv = t, level
  for i, g in ipairs(groups) do
    local most = C - heldFrom(i)
    if want <= most then
      break
    end
    local m = math.max(base, cdiv(g[2], q) - 1)
    lv = filled(lv, m - base, most)
    base = m
  end
  return slices(lv, base, want, from)
end

-- hold holds x tokens of a lease taken at now with hold h, until its end
-- rounded up to a slot of ⌈h/(G − 1)⌉: in the group that ends then, or a
-- new one, or, with G groups already, the first that ends later, or else
-- the last, which then ends then.
local function hold(x, h)
  local slot = cdiv(h, G - 1)
  local u = cdiv(now + h, slot) * slot
  for _, g in ipairs(groups) do
    if g[2] == u then
      g[1] = g[1] + x
      return
    end
  end
  if #groups < G then
    local i = #groups + 1
    while i > 1 and groups[i - 1][2] > u do
      groups[i] = groups[i - 1]
      i = i - 1
    end
    groups[i] = {x, u}
    return
  end
  for _, g in ipairs(groups) do
    if g[2] > u then
      g[1] = g[1] + x
      return
    end
  end
  local g = groups[#groups]
  g[1], g[2] = g[1] + x, u
end

local allowed, reset, waiting = 1, 0, false
if mode == 'take' then
  if n > B then
    allowed, reset = 0, W
  elseif level >= n * S then
    level = level - n * S
    if leased > 0 and n > 0 then
      -- A lease's tokens are held until it ends: level + H stays ≤ C.
      hold(n * S, leased)
    end
  else
    -- 0 < n ≤ B, or the level is below 0, here, so L > 0.
    allowed, reset = 0, wait(n * S, now)
  end
  if allowed == 0 then
    -- A denial changes nothing: the refill above is not kept, and nothing
    -- is written. A state past its expiry goes, as the in-memory backend
    -- drops it when touched: a clock that went back must not find it.
    if stale then
      redis.call('DEL', key)
    end
    return {0, math.max(fdiv(level, S), 0), reset, now, 0}
  end
elseif mode == 'charge' or mode == 'record' then
  if n > B or level < n * S then
    allowed = 0
  end
  -- Down to −D tokens at most, −L for a record (one window's refill); a
  -- bucket already lower keeps its level.
  local d = D
  if mode == 'record' then
    d = math.min(D, L)
  end
  if level <= -d * S then
    -- owes as much as it may already
  elseif n * S >= level + d * S then
    level = -d * S
  else
    level = level - n * S
  end
  if level < 0 then
    reset, waiting = wait(0, now), true
  end
else
  -- A lease's give-back, while the lease lasts (now before its end e, its
  -- receipt's time + hold), first takes its tokens from the first group
  -- that ends no sooner than e: once it has ended they may have left their
  -- group, which may hold later leases' only.
  if leased > 0 and ARGV[6] ~= '' and now < tonumber(ARGV[6]) + leased then
    local e = tonumber(ARGV[6]) + leased
    for _, g in ipairs(groups) do
      if g[2] >= e then
        if n >= cdiv(g[1], S) then
          g[1] = 0
        else
          g[1] = g[1] - n * S
        end
        break
      end
    end
    keep(now)
  end
  local most = C - heldFrom(1)
  if n * S >= most - level then
    level = most
  else
    level = level + n * S
  end
end
if not waiting and level < C then
  reset = wait(C, now)
end

-- The state behaves as a new one once the bucket is full again: at the
-- refill slice when it is, else when the refill completes (in absolute
-- microseconds, capped at MAXWAIT like every wait), after the last group
-- ends while leases hold tokens.
x = t * q
if level < C then
  x = wait(C, 0)
end
if x > now then
  local set = {'l', int(level), 't', int(t), 'x', int(x)}
  for i, g in ipairs(groups) do
    set[#set + 1] = 'h' .. i
    set[#set + 1] = int(g[1])
    set[#set + 1] = 'u' .. i
    set[#set + 1] = int(g[2])
  end
  redis.call('HSET', key, unpack(set))
  if had > #groups then
    local gone = {}
    for i = #groups + 1, had do
      gone[#gone + 1] = 'h' .. i
      gone[#gone + 1] = 'u' .. i
    end
    redis.call('HDEL', key, unpack(gone))
  end
  expire(key, x, now)
else
  redis.call('DEL', key)
end

return {allowed, math.max(fdiv(level, S), 0), reset, now, 0}
