-- prelude: the helpers every script starts with. lua.Source puts this file in
-- front of each script, so the scripts Redis runs are self-contained.

-- A script that reads TIME and then writes must replicate as its effects,
-- not as itself: the default since Redis 5 and the only way since Redis 7,
-- where this call does nothing.
if redis.replicate_commands then
  redis.replicate_commands()
end

-- fdiv returns ⌊a/b⌋ for b > 0, corrected for the rounding of a/b.
local function fdiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then
    q = q - 1
  elseif (q + 1) * b <= a then
    q = q + 1
  end
  return q + 0 -- turns −0 into 0
end

-- cdiv returns ⌈a/b⌉ for b > 0.
local function cdiv(a, b)
  return 0 - fdiv(-a, b)
end

-- int formats an integer for a Redis command, never in exponent notation.
local function int(x)
  return string.format('%.0f', x)
end

-- clock returns ARGV's now, or Redis TIME in microseconds.
local function clock(arg)
  if arg ~= '' then
    return tonumber(arg)
  end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- expire makes key vanish at drop (µs, after now), when its state behaves as
-- a new one, or ARGV[9] milliseconds later.
local function expire(key, drop, now)
  redis.call('PEXPIRE', key, int(cdiv(drop - now, 1000) + tonumber(ARGV[9])))
end

-- paid returns max(0, d − k·L): a debt d after k windows that each pay L.
-- It forms k·L only below d (L > 0 whenever d > 0).
local function paid(d, k, L)
  if d == 0 or k >= cdiv(d, L) then
    return 0
  end
  return d - k * L
end

-- charged records a charge of n hits on a count c that owes e: up to L + D
-- hits, the part above L owed. It returns the new count and debt.
local function charged(c, e, n, L, D)
  if c < L + D then
    local after = c + math.min(n, L + D - c)
    e = e + math.max(after - math.max(c, L), 0)
    c = after
  end
  return c, e
end
