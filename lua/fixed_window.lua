-- fixed_window: count + n ≤ L per epoch-aligned window of W microseconds,
-- exactly as internal/algorithms/doc.go states it.
--
-- KEYS[1]  hash {w = window index, c = count}
-- ARGV     mode, now, L, W, n, receipt time (see lua.go)
-- reply    {allowed, remaining, reset, now, 0}
--
-- Every number stays an integer below 2^53, so Lua's doubles hold it exactly.

-- fdiv, cdiv, int, clock and expire come from prelude.lua.
local key = KEYS[1]
local take = ARGV[1] == 'take'
local now = clock(ARGV[2])
local L = tonumber(ARGV[3])
local W = tonumber(ARGV[4])
local n = tonumber(ARGV[5])

-- Move to window i = max(⌊now/W⌋, w): a later window restarts the count, a
-- clock that went backwards keeps counting in the current one.
local state = redis.call('HMGET', key, 'w', 'c')
local w, c = tonumber(state[1]), tonumber(state[2])
local w0, c0 = w, c -- as stored, to write only what changed
local i = fdiv(now, W)
if w == nil or c == nil then
  w, c = i, 0
elseif i > w then
  w, c = i, 0
end
i = w

local allowed, reset = 1, 0
if take then
  if n > L then
    allowed, reset = 0, W
  elseif c + n <= L then
    c = c + n
  else
    allowed, reset = 0, (i + 1) * W - now
  end
else
  local a = ARGV[6]
  if a == '' or fdiv(tonumber(a), W) == w then
    c = math.max(c - n, 0)
  end
end
if allowed == 1 and c > 0 then
  reset = (i + 1) * W - now
end

-- The state behaves as a new one once the window ends, or now if it counts
-- nothing. A denial or a peek changes nothing, and writes nothing.
if w == w0 and c == c0 then
  -- unchanged: the key keeps its value and its expiry
elseif c > 0 then
  redis.call('HSET', key, 'w', int(w), 'c', int(c))
  expire(key, (w + 1) * W, now)
else
  redis.call('DEL', key)
end

return {allowed, math.max(L - c, 0), reset, now, 0}
