-- sliding_window_log: the admitted and charged hits, each with its time;
-- admits when the hits in (now − W, ∞) plus n stay within L, logs a lease's
-- hits at its end (now + hold), and logs charges past L up to 2L hits,
-- exactly as internal/algorithms/doc.go states it.
--
-- KEYS[1]  sorted set of runs of hits, scored by their time in µs: a member
--          is the sequence number of the run's first hit, zero-padded to 16
--          digits so that members of equal score sort by it, then ":" and
--          the run's length when it holds more than one hit (the hits of
--          one take, or of a lease's, share their time). Runs hold
--          consecutive sequence numbers, and never overlap.
-- KEYS[2]  string "seq:count": the last sequence number issued and the
--          hits in the log (a plain number, from before runs were kept,
--          is the sequence number alone, each member then one hit)
-- ARGV     mode, now, L, W, n, receipt time, receipt seq, D = L, and a
--          lease's hold or nothing (see lua.go)
-- reply    {allowed, remaining, reset, receipt time (now, or now + hold for
--          a lease's take), seq of the first hit added}
--
-- A take of k hits adds one member, so a lease costs Redis the same
-- whatever its size. Denied hits are never logged.

-- fdiv, cdiv, int, clock and expire come from prelude.lua.
-- member returns the sorted-set member of a run of n hits from seq.
local function member(seq, n)
  if n == 1 then
    return string.format('%016.0f', seq)
  end
  return string.format('%016.0f:%.0f', seq, n)
end

-- run returns the first sequence number and the length of a member's run.
local function run(m)
  local seq, n = string.match(m, '^(%d+):(%d+)$')
  if seq then
    return tonumber(seq), tonumber(n)
  end
  return tonumber(m), 1
end

-- page is how many members one read of the log returns.
local page = 128

local log, seqkey = KEYS[1], KEYS[2]
local mode = ARGV[1]
local now = clock(ARGV[2])
local L = tonumber(ARGV[3])
local W = tonumber(ARGV[4])
local n = tonumber(ARGV[5])
local D = tonumber(ARGV[10])
local hold = tonumber(ARGV[11]) or 0

-- count sums the hits of the members of a ZRANGE reply without scores.
local function count(members)
  local c = 0
  for _, m in ipairs(members) do
    local _, k = run(m)
    c = c + k
  end
  return c
end

local seq, c = 0, nil
local stored = redis.call('GET', seqkey)
if stored then
  local s, k = string.match(stored, '^(%d+):(%d+)$')
  if s then
    seq, c = tonumber(s), tonumber(k)
  else
    seq = tonumber(stored)
  end
end
local gone = redis.call('ZRANGEBYSCORE', log, '-inf', int(now - W))
if #gone > 0 then
  redis.call('ZREMRANGEBYSCORE', log, '-inf', int(now - W))
end
if c and c > 0 and redis.call('EXISTS', log) == 0 then
  -- The log is gone without its count (evicted, say): it is empty.
  c = 0
elseif c then
  c = c - count(gone)
else
  -- A log kept one member per hit before it kept runs, or one whose count
  -- is gone: its hits are counted, and sequence numbers go on after its own.
  c = 0
  for _, m in ipairs(redis.call('ZRANGE', log, 0, -1)) do
    local s, k = run(m)
    c, seq = c + k, math.max(seq, s + k - 1)
  end
end
if c == 0 then
  -- An empty log is a new one: sequence numbers start again.
  seq = 0
end

-- append logs k > 0 hits at ts with the next sequence numbers, as one run,
-- and returns the first of them.
local function append(k, ts)
  local first = seq + 1
  redis.call('ZADD', log, int(ts), member(first, k))
  seq, c = seq + k, c + k
  return first
end

-- oldest returns the wait until the k-th oldest hit leaves the window.
local function oldest(k)
  local from = 0
  while true do
    local ms = redis.call('ZRANGE', log, from, from + page - 1, 'WITHSCORES')
    for i = 1, #ms, 2 do
      local _, r = run(ms[i])
      if k <= r then
        return tonumber(ms[i + 1]) + W - now
      end
      k = k - r
    end
    from = from + page
  end
end

-- replace puts the member of n hits from s at ts in place of m (or only
-- removes m when n is 0).
local function replace(m, ts, s, n)
  redis.call('ZREM', log, m)
  if n > 0 then
    redis.call('ZADD', log, ts, member(s, n))
  end
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
      first = seq + 1
    else
      first = append(n, at)
    end
  else
    allowed, reset = 0, oldest(c + n - L)
  end
  if allowed == 0 then
    -- A denial logs nothing: the newest hit and with it the keys' expiry
    -- are as they were. Only hits that left the window change the count.
    if #gone > 0 then
      if c > 0 then
        redis.call('SET', seqkey, int(seq) .. ':' .. int(c), 'KEEPTTL')
      else
        redis.call('DEL', log, seqkey)
      end
    end
    return {0, math.max(L - c, 0), reset, now, 0}
  end
elseif mode == 'charge' or mode == 'record' then -- the same: hits leave after W
  if n > L or c + n > L then
    allowed = 0
  end
  -- At most L + D hits; the rest is forgotten.
  local k = math.min(n, math.max(L + D - c, 0))
  if k > 0 then
    append(k, now)
  end
  if c > L then
    reset, waiting = oldest(c - L), true
  end
elseif n > 0 and c > 0 then
  if ARGV[6] == '' then
    -- The newest n hits: the highest sequence numbers of the newest runs.
    while n > 0 and c > 0 do
      local newest = redis.call('ZRANGE', log, -1, -1, 'WITHSCORES')
      if #newest == 0 then
        break
      end
      local s, r = run(newest[1])
      local k = math.min(n, r)
      replace(newest[1], newest[2], s, r - k)
      n, c = n - k, c - k
    end
  else
    -- The hits (at, from … from + n − 1) still logged.
    local ts, from = ARGV[6], tonumber(ARGV[7])
    local to = from + n
    for _, m in ipairs(redis.call('ZRANGEBYSCORE', log, ts, ts)) do
      local s, r = run(m)
      local e = s + r
      if s < to and e > from then
        local lo, hi = math.max(s, from), math.min(e, to)
        redis.call('ZREM', log, m)
        if s < lo then
          redis.call('ZADD', log, ts, member(s, lo - s))
        end
        if hi < e then
          redis.call('ZADD', log, ts, member(hi, e - hi))
        end
        c = c - (hi - lo)
      end
    end
  end
end

-- The state behaves as a new one once its newest hit leaves the window, or
-- now when it is empty.
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
  redis.call('SET', seqkey, int(seq) .. ':' .. int(c), 'PX', int(cdiv(drop - now, 1000) + tonumber(ARGV[9])))
else
  redis.call('DEL', log, seqkey)
end

return {allowed, math.max(L - c, 0), reset, at, first}
