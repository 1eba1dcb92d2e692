-- sliding_window_counter: this window's count plus the previous window's,
-- weighted by the part of it still inside the sliding window, measured in
-- whole slices of W/S, exactly as internal/algorithms/doc.go states it.
--
-- KEYS[1]  hash {w = window index, c = this window's count, p = the previous window's}
-- ARGV     mode, now, L, W, n, receipt time (see lua.go)
-- reply    {allowed, remaining, reset, now, 0}
--
-- Every number stays an integer below 2^53 (prev·S ≤ 2^32·10^6), so Lua's
-- doubles hold it exactly.

-- fdiv, cdiv, int, clock and expire come from prelude.lua.
local S = 1000000

local key = KEYS[1]
local take = ARGV[1] == 'take'
local now = clock(ARGV[2])
local L = tonumber(ARGV[3])
local W = tonumber(ARGV[4])
local n = tonumber(ARGV[5])
local q = W / S

local state = redis.call('HMGET', key, 'w', 'c', 'p')
local w, cur, prev = tonumber(state[1]), tonumber(state[2]), tonumber(state[3])
local w0, cur0, prev0 = w, cur, prev -- as stored, to write only what changed

-- expiry returns when the state starts to behave as a new one: once both
-- counts have left the sliding window.
local function expiry()
  if cur > 0 then
    return (w + 2) * W
  elseif prev > 0 then
    return (w + 1) * W
  end
  return w * W
end

if w == nil or cur == nil or prev == nil or expiry() <= now then
  w, cur, prev = fdiv(now, W), 0, 0
end

-- Move to window i = max(⌊now/W⌋, w): the next window makes this one the
-- previous, a later one restarts both.
local i = math.max(fdiv(now, W), w)
if i == w + 1 then
  prev, cur = cur, 0
elseif i > w + 1 then
  prev, cur = 0, 0
end
w = i

-- The elapsed slice of window i, clamped to [0, S−1].
local s = math.min(math.max(fdiv(now - i * W, q), 0), S - 1)

local allowed, reset = 1, 0
if take then
  if n > L then
    allowed, reset = 0, W
  elseif cur + n <= L and prev * (S - s) <= (L - cur - n) * S then
    cur = cur + n
  elseif cur + n <= L then
    -- Wait for enough of prev (> 0 here) to slide out of the window.
    allowed = 0
    reset = i * W + (S - fdiv((L - cur - n) * S, prev)) * q - now
  else
    -- Wait for cur (> L − n ≥ 0 here) to become prev and slide out.
    allowed = 0
    reset = (i + 1) * W + (S - fdiv((L - n) * S, cur)) * q - now
  end
else
  local a = ARGV[6]
  if a == '' then
    -- The newest hits first: this window's, then the previous one's.
    local fromCur = math.min(n, cur)
    cur = cur - fromCur
    prev = math.max(prev - (n - fromCur), 0)
  else
    local j = fdiv(tonumber(a), W)
    if j == w then
      cur = math.max(cur - n, 0)
    elseif j == w - 1 then
      prev = math.max(prev - n, 0)
    end
  end
end
if allowed == 1 then
  if cur > 0 then
    reset = (i + 2) * W - now
  elseif prev > 0 then
    reset = (i + 1) * W - now
  end
end

local drop = expiry()
if w == w0 and cur == cur0 and prev == prev0 then
  -- unchanged (a denial or a peek within one window): nothing to write
elseif drop > now then
  redis.call('HSET', key, 'w', int(w), 'c', int(cur), 'p', int(prev))
  expire(key, drop, now)
else
  redis.call('DEL', key)
end

return {allowed, math.max(L - cur - cdiv(prev * (S - s), S), 0), reset, now, 0}
