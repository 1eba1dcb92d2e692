-- sliding_window_counter: this window's count plus the previous window's,
-- weighted by the part of it still inside the sliding window, measured in
-- whole slices of W/S, with charges recorded past L as a debt the next
-- windows pay off, exactly as internal/algorithms/doc.go states it.
--
-- KEYS[1]  hash {w = window index, c = this window's count, p = the previous
--          window's, e = debt (the part of c that charges recorded beyond
--          L; absent when never owed), x = when the state behaves as a new
--          one in µs, while e > 0, g = the epoch, the time of the state's
--          first lease (absent before)}
-- ARGV     mode, now, L, W, n, receipt time, receipt seq, B, slack, D, and
--          for a lease's take its hold, for a refund its receipt's epoch,
--          for a settlement its leases (see lua.go)
-- reply    {allowed, remaining, reset, now, 0, epoch} and, after a lease's
--          take, the state: {w, c, p, g}
--
-- Every number stays an integer below 2^53 (counts are at most
-- L + D < 2^33, so prev·S < 2^33·10^6), so Lua's doubles hold it exactly.

-- fdiv, cdiv, int, clock, expire, paid and charged come from prelude.lua.
local S = 1000000

local key = KEYS[1]
local mode = ARGV[1]
local now = clock(ARGV[2])
local L = tonumber(ARGV[3])
local W = tonumber(ARGV[4])
local n = tonumber(ARGV[5])
local D = tonumber(ARGV[10])
local q = W / S

local state = redis.call('HMGET', key, 'w', 'c', 'p', 'e', 'x', 'g')
local w, cur, prev = tonumber(state[1]), tonumber(state[2]), tonumber(state[3])
local e, x, g = tonumber(state[4]) or 0, tonumber(state[5]) or 0, tonumber(state[6]) or 0
local w0, cur0, prev0, e0, g0 = w, cur, prev, e, g -- as stored, to write only what changed

-- expiry returns when the state starts to behave as a new one: once both
-- counts have left the sliding window, after the last window the debt
-- reaches.
local function expiry()
  if cur > 0 then
    local k = 0
    if e > 0 then
      k = cdiv(e, L)
    end
    return (w + 2 + k) * W
  elseif prev > 0 then
    return (w + 1) * W
  end
  return w * W
end

-- drop0 is when the stored state behaves as a new one, which its last write
-- made the key's expiry: a write that keeps it need not move the expiry. A
-- debt's expiry is the one computed when the state last changed, under the
-- limit of that change.
local drop0
if w ~= nil and cur ~= nil and prev ~= nil then
  drop0 = x
  if e == 0 then
    drop0 = expiry()
  end
end
if w == nil or cur == nil or prev == nil or (e > 0 and x <= now) or (e == 0 and expiry() <= now) then
  w, cur, prev, e = fdiv(now, W), 0, 0, 0
end

-- The debt is no more than cur beyond L, nor than D. Then move to window
-- i = max(⌊now/W⌋, w), one window at a time, each new window taking the
-- debt as its count and leaving the rest of cur to the previous window:
-- (prev, cur, e) ← (cur − e, e, max(0, e − L)).
e = math.min(e, math.max(cur - L, 0), D)
local i = math.max(fdiv(now, W), w)
local j = i - w
if j == 1 then
  prev, cur = cur - e, e
  e = paid(e, 1, L)
elseif j > 1 then
  local before = paid(e, j - 2, L)
  cur = paid(e, j - 1, L)
  prev = before - cur
  e = paid(e, j, L)
end
w = i
if cur == 0 and prev == 0 and e == 0 then
  -- Both windows are empty: a new state, which its old leases'
  -- settlements do not name.
  g = 0
end

-- The elapsed slice of window i, clamped to [0, S−1].
local s = math.min(math.max(fdiv(now - i * W, q), 0), S - 1)

-- fits reports whether need hits fit the estimate now.
local function fits(need)
  return cur + need <= L and prev * (S - s) <= (L - cur - need) * S
end

-- wait returns the wait until a take of need ≤ L hits that does not fit is
-- admitted: at the first slice boundary at which the estimate admits it.
local function wait(need)
  if cur + need <= L then
    -- In this window, once enough of prev (> 0 here) has slid out.
    return i * W + (S - fdiv((L - cur - need) * S, prev)) * q - now
  end
  -- In the first window i + m whose count, max(0, e − (m−1)·L), leaves
  -- room, after a previous window that kept cur − e (m = 1) or at most L.
  local m, p = 1, cur - e
  if e + need > L then
    m = 1 + cdiv(e + need - L, L)
    p = math.min(L, paid(e, m - 2, L))
  end
  local c = paid(e, m - 1, L)
  return (i + m) * W + (S - fdiv((L - c - need) * S, p)) * q - now
end

-- giveBack gives back n hits of a take made at time a (µs, "" for none).
local function giveBack(n, a)
  if a == '' then
    -- The newest hits first: this window's, then the previous one's.
    local fromCur = math.min(n, cur)
    cur = cur - fromCur
    prev = math.max(prev - (n - fromCur), 0)
  else
    local k = fdiv(tonumber(a), W)
    if k == w then
      cur = math.max(cur - n, 0)
    elseif k == w - 1 then
      prev = math.max(prev - n, 0)
    end
  end
  e = math.min(e, math.max(cur - L, 0))
end

local allowed, reset, waiting, leased = 1, 0, false, false
if mode == 'take' then
  if n > L then
    allowed, reset, waiting = 0, W, true
  elseif fits(n) then
    cur = cur + n
    if (tonumber(ARGV[11]) or 0) > 0 then
      leased = true
      if g == 0 then
        g = math.max(now, 1)
      end
    end
  else
    allowed, reset, waiting = 0, wait(n), true
  end
elseif mode == 'charge' or mode == 'record' then
  if n > L or not fits(n) then
    allowed = 0
  end
  if mode == 'charge' then
    cur, e = charged(cur, e, n, L, D)
  else
    cur = charged(cur, e, n, L, D) -- owes nothing: weighs as any hit does
  end
  if not fits(0) then
    reset, waiting = wait(0), true
  end
elseif mode == 'refund' then
  -- A refund by the receipt of another state's lease gives nothing back.
  local re = tonumber(ARGV[11]) or 0
  if re == 0 or re == g then
    giveBack(n, ARGV[6])
  end
else
  -- A settlement: ARGV[11] leases, each as eight numbers (receipt time,
  -- receipt seq, epoch, hold, size, reported, close, runs) and its runs of
  -- served hits (time, seq, n); a lease of this state that closes gives
  -- back what it did not serve, as a refund by its receipt does.
  local i = 12
  for _ = 1, tonumber(ARGV[11]) do
    local at, re = ARGV[i], tonumber(ARGV[i + 2])
    local size, reported, close = tonumber(ARGV[i + 4]), tonumber(ARGV[i + 5]), ARGV[i + 6] == '1'
    local runs = tonumber(ARGV[i + 7])
    i = i + 8
    local sum = 0
    for _ = 1, runs do
      sum = sum + tonumber(ARGV[i + 2])
      i = i + 3
    end
    if close and g ~= 0 and re == g then
      local left = size - math.min(reported, size)
      giveBack(left - math.min(sum, left), at)
    end
  end
end
local drop = expiry()
if not waiting then
  if cur > 0 or prev > 0 then
    reset = drop - now
  end
end

if w == w0 and cur == cur0 and prev == prev0 and e == e0 and g == g0 then
  -- unchanged (a denial or a peek within one window): nothing to write
elseif drop > now then
  if e > 0 then
    redis.call('HSET', key, 'w', int(w), 'c', int(cur), 'p', int(prev), 'e', int(e), 'x', int(drop))
  elseif e0 > 0 then
    redis.call('HSET', key, 'w', int(w), 'c', int(cur), 'p', int(prev), 'e', '0')
  elseif w == w0 and prev == prev0 then
    redis.call('HSET', key, 'c', int(cur)) -- only the current count moved
  else
    redis.call('HSET', key, 'w', int(w), 'c', int(cur), 'p', int(prev))
  end
  if g ~= g0 then
    if g ~= 0 then
      redis.call('HSET', key, 'g', int(g))
    else
      redis.call('HDEL', key, 'g')
    end
  end
  if drop ~= drop0 then
    expire(key, drop, now)
  end
else
  redis.call('DEL', key)
end

local reply = {allowed, math.max(L - cur - cdiv(prev * (S - s), S), 0), reset, now, 0, 0}
if leased then
  reply[6] = g
end
if leased and n > 0 then
  for _, v in ipairs({w, cur, prev, g}) do
    reply[#reply + 1] = v
  end
end
return reply
