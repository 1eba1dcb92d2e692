-- token_bucket: up to B tokens, refilled at L per window in whole slices of
-- W/S, kept in millionths of a token, and down to −D tokens after charges,
-- exactly as internal/algorithms/doc.go states it.
--
-- KEYS[1]  hash {l = level in millionths of a token, below 0 while in debt,
--          t = slice of the last refill, x = when the bucket is full again
--          in µs}
-- ARGV     mode, now, L, W, n, receipt time, receipt seq, B, D (see lua.go)
-- reply    {allowed, remaining, reset, now, 0}
--
-- Every number stays an integer below 2^53 (the level lies in [−D·S, B·S]
-- and n ≤ B + D + 1, so C − level and n·S are below 2^33·10^6), so Lua's
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
local q = W / S
local C = B * S

-- wait returns (t + ⌈(want − level)/L⌉)·q − from for want > level, capped
-- at MAXWAIT. It is formed as k·q + r with r = (t·q − from) mod q, so every
-- term stays exact.
local function wait(level, t, want, from)
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
local state = redis.call('HMGET', key, 'l', 't', 'x')
local level, t, x = tonumber(state[1]), tonumber(state[2]), tonumber(state[3])
if level == nil or t == nil or x == nil or x <= now then
  level, t = C, tau
else
  -- Refill to slice tau: min(C, level + (tau − t)·L), without forming a
  -- product above C − level. A level above C, left by a larger burst, is
  -- cut to C, a debt beyond D forgiven; a clock that went back refills
  -- nothing.
  level = math.max(math.min(level, C), -D * S)
  if tau > t then
    if L > 0 then
      if tau - t >= cdiv(C - level, L) then
        level = C
      else
        level = level + (tau - t) * L
      end
    end
    t = tau
  end
end

local allowed, reset, waiting = 1, 0, false
if mode == 'take' then
  if n > B then
    allowed, reset = 0, W
  elseif level >= n * S then
    level = level - n * S
  else
    -- 0 < n ≤ B, or the level is below 0, here, so L > 0.
    allowed, reset = 0, wait(level, t, n * S, now)
  end
  if allowed == 0 then
    -- A denial changes nothing: the refill above is not kept, and nothing
    -- is written.
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
    reset, waiting = wait(level, t, 0, now), true
  end
elseif n * S >= C - level then
  level = C
else
  level = level + n * S
end
if not waiting and level < C then
  reset = wait(level, t, C, now)
end

-- The state behaves as a new one once the bucket is full again: at the
-- refill slice when it is, else when the refill completes (in absolute
-- microseconds, capped at MAXWAIT like every wait).
x = t * q
if level < C then
  x = wait(level, t, C, 0)
end
if x > now then
  redis.call('HSET', key, 'l', int(level), 't', int(t), 'x', int(x))
  expire(key, x, now)
else
  redis.call('DEL', key)
end

return {allowed, math.max(fdiv(level, S), 0), reset, now, 0}
