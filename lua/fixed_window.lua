-- fixed_window: count + n ≤ L per epoch-aligned window of W microseconds (or
-- per UTC day, ISO week, month or year of the calendar),
-- with charges recorded past L as a debt the next windows pay off, exactly
-- as internal/algorithms/doc.go states it.
--
-- KEYS[1]  hash {w = window index, c = count, e = debt (the part of c that
--          charges recorded beyond L; absent when never owed),
--          x = when the state behaves as a new one in µs, while e > 0}
-- ARGV     mode, now, L, W, n, receipt time, D, calendar (see lua.go)
-- reply    {allowed, remaining, reset, now, 0}
--
-- Every number stays an integer below 2^53 (c ≤ L + D < 2^33), so Lua's
-- doubles hold it exactly.

-- fdiv, cdiv, int, clock, expire, paid and charged come from prelude.lua.
local key = KEYS[1]
local mode = ARGV[1]
local now = clock(ARGV[2])
local L = tonumber(ARGV[3])
local W = tonumber(ARGV[4])
local n = tonumber(ARGV[5])
local D = tonumber(ARGV[10])

-- index returns the window holding t µs, and start when window i starts:
-- windows of W from the epoch, or with ARGV[11] the calendar's ISO weeks
-- (from Monday 1970-01-05), months or years, in UTC.
local DAY = 86400000000
local index, start
local cal = ARGV[11]
if cal == 'week' then
  index = function(t) return fdiv(t - 4 * DAY, W) end
  start = function(i) return i * W + 4 * DAY end
elseif cal == 'month' or cal == 'year' then
  -- civil returns the year and month (1 to 12) of day z since the epoch,
  -- and first the day since the epoch of the first of month m of year y,
  -- in the proleptic Gregorian calendar (H. Hinnant's algorithms).
  local function civil(z)
    z = z + 719468
    local era = fdiv(z, 146097)
    local doe = z - era * 146097
    local yoe = fdiv(doe - fdiv(doe, 1460) + fdiv(doe, 36524) - fdiv(doe, 146096), 365)
    local doy = doe - (365 * yoe + fdiv(yoe, 4) - fdiv(yoe, 100))
    local mp = fdiv(5 * doy + 2, 153)
    local m, y = mp + 3, yoe + era * 400
    if mp >= 10 then
      m, y = mp - 9, y + 1
    end
    return y, m
  end
  local function first(y, m)
    local mp = m - 3
    if m <= 2 then
      y, mp = y - 1, m + 9
    end
    local era = fdiv(y, 400)
    local yoe = y - era * 400
    local doe = yoe * 365 + fdiv(yoe, 4) - fdiv(yoe, 100) + fdiv(153 * mp + 2, 5)
    return era * 146097 + doe - 719468
  end
  if cal == 'month' then
    index = function(t)
      local y, m = civil(fdiv(t, DAY))
      return (y - 1970) * 12 + m - 1
    end
    start = function(i)
      local k = fdiv(i, 12)
      return first(1970 + k, i - 12 * k + 1) * DAY
    end
  else
    index = function(t)
      local y = civil(fdiv(t, DAY))
      return y - 1970
    end
    start = function(i) return first(1970 + i, 1) * DAY end
  end
else
  index = function(t) return fdiv(t, W) end
  start = function(i) return i * W end
end

local state = redis.call('HMGET', key, 'w', 'c', 'e', 'x')
local w, c, e, x = tonumber(state[1]), tonumber(state[2]), tonumber(state[3]) or 0, tonumber(state[4])
local w0, c0, e0 = w, c, e -- as stored, to write only what changed
-- drop0 is when the stored state behaves as a new one, which its last write
-- made the key's expiry: a write that keeps it need not move the expiry.
local drop0
if w ~= nil and c ~= nil then
  drop0 = start(w + 1)
  if e > 0 then
    drop0 = x
  end
end
if w == nil or c == nil or (e > 0 and (x == nil or x <= now)) then
  -- New, or past the time it behaves as a new one (as computed when it
  -- last changed, under the limit of that change).
  w, c, e = index(now), 0, 0
end

-- The debt is no more than the count beyond L, nor than D. Then move to
-- window i = max(index(now), w), one window at a time, each new window
-- starting with the debt: (c, e) ← (e, max(0, e − L)). A clock that went
-- backwards keeps counting in the current window.
e = math.min(e, math.max(c - L, 0), D)
local i = index(now)
if c == 0 then
  w = i
elseif i > w then
  c, e = paid(e, i - w - 1, L), paid(e, i - w, L)
  w = i
end
i = w

-- retry returns the wait until a take of need ≤ L hits, c + need > L, is
-- admitted: the start of the first window whose count leaves room for it.
local function retry(need)
  local j = 1
  if e + need > L then
    j = 1 + cdiv(e + need - L, L)
  end
  return start(i + j) - now
end

local allowed, reset, waiting = 1, 0, false
if mode == 'take' then
  if n > L then
    allowed, reset, waiting = 0, W, true
  elseif c + n <= L then
    c = c + n
  else
    allowed, reset, waiting = 0, retry(n), true
  end
elseif mode == 'charge' or mode == 'record' then
  if n > L or c + n > L then
    allowed = 0
  end
  if mode == 'charge' then
    c, e = charged(c, e, n, L, D)
  else
    c = charged(c, e, n, L, D) -- owes nothing: the count ends with its window
  end
  if c > L then
    reset, waiting = retry(0), true
  end
else
  local a = ARGV[6]
  if a == '' or index(tonumber(a)) == w then
    c = math.max(c - n, 0)
    e = math.min(e, math.max(c - L, 0))
  end
end

-- The state behaves as a new one at the end of the last window the debt
-- reaches, or now if it counts nothing.
local drop = w + 1
if e > 0 then
  drop = drop + cdiv(e, L)
end
drop = start(drop)
if not waiting and c > 0 then
  reset = drop - now
end

-- A denial or a peek changes nothing, and writes nothing.
if w == w0 and c == c0 and e == e0 then
  -- unchanged: the key keeps its value and its expiry
elseif c > 0 then
  if e > 0 then
    redis.call('HSET', key, 'w', int(w), 'c', int(c), 'e', int(e), 'x', int(drop))
  elseif e0 > 0 then
    redis.call('HSET', key, 'w', int(w), 'c', int(c), 'e', '0')
  elseif w == w0 then
    redis.call('HSET', key, 'c', int(c)) -- only the count moved
  else
    redis.call('HSET', key, 'w', int(w), 'c', int(c))
  end
  if drop ~= drop0 then
    expire(key, drop, now)
  end
else
  redis.call('DEL', key)
end

return {allowed, math.max(L - c, 0), reset, now, 0}
