-- token_bucket: up to B tokens, refilled at L per window in whole slices of
-- W/S, kept in millionths of a token, and down to −D tokens after charges;
-- the tokens of leases held until the last of them ends, exactly as
-- internal/algorithms/doc.go states it.
--
-- KEYS[1]  hash {l = level in millionths of a token, below 0 while in debt,
--          t = slice of the last refill, x = when the bucket is full again
--          in µs, and while leases hold tokens, h = the tokens they hold
--          in millionths and u = when the last of them ends in µs}
-- ARGV     mode, now, L, W, n, receipt time, receipt seq, B, D, and a
--          lease's hold or nothing (see lua.go)
-- reply    {allowed, remaining, reset, now, 0}
--
-- Every number stays an integer below 2^53 (the level lies in [−D·S, B·S],
-- h in [0, B·S], and n ≤ B + D + 1, so C − level and n·S are below
-- 2^33·10^6; u is now + hold, below 2^53 as now + MaxHold + W is), so Lua's
-- doubles hold it exactly.

-- fdiv, cdiv, int, clock and expire come from prelude.lua.
local S = 1000000
-- MAXWAIT caps a reported wait at 2^53−1 µs (about 285 years): only a burst
-- that takes longer than that to refill from empty reaches it.
local MAXWAIT = 9007199254740991

local key = KEYS[1]
local mode = ARGV[1]
local now = clock(ARGV[2])
local L = tonumber(ARGV[3])
local W = tonumber(ARGV[4])
local n = tonumber(ARGV[5])
local B = tonumber(ARGV[8])
local D = tonumber(ARGV[10])
local hold = tonumber(ARGV[11]) or 0
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

-- A state that has reached its expiry x is a new, full bucket.
local tau = fdiv(now, q)
local state = redis.call('HMGET', key, 'l', 't', 'x', 'h', 'u')
local level, t, x = tonumber(state[1]), tonumber(state[2]), tonumber(state[3])
local h, u = tonumber(state[4]) or 0, tonumber(state[5]) or 0
local hadHold = h > 0
local stale = x ~= nil and x <= now
if level == nil or t == nil or x == nil or x <= now then
  level, t, h, u = C, tau, 0, 0
else
  -- Refill to slice tau: min(C, level + (tau − t)·L), without forming a
  -- product above C − level; while leases hold h tokens, only up to C − h
  -- until the last slice that starts before u. A level above C − h, left
  -- by a larger burst, is cut, a debt beyond D forgiven; a clock that went
  -- back refills nothing.
  h = math.min(h, C)
  level = math.max(math.min(level, C - h), -D * S)
  if tau > t then
    local from = t
    if h > 0 then
      local m = math.min(tau, math.max(t, cdiv(u, q) - 1))
      level = filled(level, m - t, C - h)
      from = m
    end
    level = filled(level, tau - from, C)
    t = tau
  end
  -- Every lease counted in h has ended by u.
  if now >= u or h == 0 then
    h, u = 0, 0
  end
end

-- wait returns the wait from from until the bucket, left alone, holds
-- want > level: while leases hold tokens and want is above C − h, the
-- refill reaches C − h at the last slice before u, and goes on from there.
local function wait(want, from)
  if h > 0 and want > C - h then
    local m = math.max(t, cdiv(u, q) - 1)
    return slices(filled(level, m - t, C - h), m, want, from)
  end
  return slices(level, t, want, from)
end

local allowed, reset, waiting = 1, 0, false
if mode == 'take' then
  if n > B then
    allowed, reset = 0, W
  elseif level >= n * S then
    level = level - n * S
    if hold > 0 and n > 0 then
      -- A lease's tokens are held until it ends: level + h stays ≤ C.
      h = h + n * S
      u = math.max(u, now + hold)
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
  -- A lease's give-back, while the lease lasts (now before its receipt's
  -- time + hold), first takes its tokens from those held: once it has
  -- ended they may have left h, which may hold later leases' only.
  if hold > 0 and ARGV[6] ~= '' and now < tonumber(ARGV[6]) + hold then
    if n >= cdiv(h, S) then
      h, u = 0, 0
    else
      h = h - n * S
    end
  end
  if n * S >= C - h - level then
    level = C - h
  else
    level = level + n * S
  end
end
if not waiting and level < C then
  reset = wait(C, now)
end

-- The state behaves as a new one once the bucket is full again: at the
-- refill slice when it is, else when the refill completes (in absolute
-- microseconds, capped at MAXWAIT like every wait), after u while leases
-- hold tokens.
x = t * q
if level < C then
  x = wait(C, 0)
end
if x > now then
  if h > 0 then
    redis.call('HSET', key, 'l', int(level), 't', int(t), 'x', int(x), 'h', int(h), 'u', int(u))
  else
    redis.call('HSET', key, 'l', int(level), 't', int(t), 'x', int(x))
    if hadHold then
      redis.call('HDEL', key, 'h', 'u')
    end
  end
  expire(key, x, now)
else
  redis.call('DEL', key)
end

return {allowed, math.max(fdiv(level, S), 0), reset, now, 0}
