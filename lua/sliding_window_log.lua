-- sliding_window_log: one sorted-set entry per admitted or charged hit,
-- scored by its time; admits when the hits in (now − W, ∞) plus n stay
-- within L, logs a lease's hits at its end (now + hold), and logs charges
-- past L up to 2L entries, exactly as internal/algorithms/doc.go states it.
--
-- KEYS[1]  sorted set: one member per admitted hit, scored by its time in µs;
--          the member is the hit's sequence number, zero-padded to 16 digits
--          so that members of equal score sort by sequence number
-- KEYS[2]  string: the last sequence number issued
-- ARGV     mode, now, L, W, n, receipt time, receipt seq, D = L, and a
--          lease's hold or nothing (see lua.go)
-- reply    {allowed, remaining, reset, receipt time (now, or now + hold for
--          a lease's take), seq of the first entry added}
--
-- Sequence numbers make every hit its own member, even many in one
-- microsecond. Denied hits are never logged.

-- fdiv, cdiv, int, clock and expire come from prelude.lua.
-- member returns the sorted-set member of sequence number seq.
local function member(seq)
  return string.format('%016.0f', seq)
end

-- chunk bounds the arguments of one command, below Lua's C stack limit.
local chunk = 1000

local log, seqkey = KEYS[1], KEYS[2]
local mode = ARGV[1]
local now = clock(ARGV[2])
local L = tonumber(ARGV[3])
local W = tonumber(ARGV[4])
local n = tonumber(ARGV[5])
local D = tonumber(ARGV[10])
local hold = tonumber(ARGV[11]) or 0

-- append logs k > 0 entries at ts with the next sequence numbers and
-- returns the first of them.
local function append(k, ts)
  local first = redis.call('INCRBY', seqkey, int(k)) - k + 1
  local args = {}
  for seq = first, first + k - 1 do
    args[#args + 1] = int(ts)
    args[#args + 1] = member(seq)
    if #args == 2 * chunk or seq == first + k - 1 then
      redis.call('ZADD', log, unpack(args))
      args = {}
    end
  end
  return first
end

-- oldest returns the wait until the k-th oldest entry leaves the window.
local function oldest(k)
  local kth = redis.call('ZRANGE', log, k - 1, k - 1, 'WITHSCORES')
  return tonumber(kth[2]) + W - now
end

redis.call('ZREMRANGEBYSCORE', log, '-inf', int(now - W))
local c = redis.call('ZCARD', log)
if c == 0 then
  -- An empty log is a new one: sequence numbers start again.
  redis.call('DEL', seqkey)
end

local allowed, reset, first, waiting, at = 1, 0, 0, false, now
if mode == 'take' then
  if n > L then
    allowed, reset = 0, W
  elseif c + n <= L then
    -- A lease's hits are logged at its end, and its receipt names them there.
    at = now + hold
    if n == 0 then
      -- A peek's receipt names the sequence number the next hit would get.
      first = (tonumber(redis.call('GET', seqkey)) or 0) + 1
    else
      first = append(n, at)
      c = c + n
    end
  else
    allowed, reset = 0, oldest(c + n - L)
  end
  if allowed == 0 then
    -- A denial logs nothing, so the newest entry and with it the keys'
    -- expiry are as they were: nothing more to write.
    return {0, math.max(L - c, 0), reset, now, 0}
  end
elseif mode == 'charge' or mode == 'record' then -- the same: entries leave after W
  if n > L or c + n > L then
    allowed = 0
  end
  -- At most L + D entries; the rest is forgotten.
  local k = math.min(n, math.max(L + D - c, 0))
  if k > 0 then
    append(k, now)
    c = c + k
  end
  if c > L then
    reset, waiting = oldest(c - L), true
  end
elseif n > 0 then
  if ARGV[6] == '' then
    redis.call('ZREMRANGEBYRANK', log, -n, -1)
  else
    local at, from = ARGV[6], tonumber(ARGV[7])
    local gone = {}
    for _, m in ipairs(redis.call('ZRANGEBYSCORE', log, at, at)) do
      local seq = tonumber(m)
      if seq >= from and seq < from + n then
        gone[#gone + 1] = m
        if #gone == chunk then
          redis.call('ZREM', log, unpack(gone))
          gone = {}
        end
      end
    end
    if #gone > 0 then
      redis.call('ZREM', log, unpack(gone))
    end
  end
  c = redis.call('ZCARD', log)
end

-- The state behaves as a new one once its newest entry leaves the window,
-- or now when it is empty.
local drop = now
if c > 0 then
  local newest = redis.call('ZRANGE', log, -1, -1, 'WITHSCORES')
  drop = tonumber(newest[2]) + W
end
if not waiting then
  reset = drop - now
end
if drop > now then
  expire(log, drop, now)
  expire(seqkey, drop, now)
else
  redis.call('DEL', log, seqkey)
end

return {allowed, math.max(L - c, 0), reset, at, first}
