-- sliding_window_log: the admitted and charged hits, each with its time;
-- admits when the hits in (now − W, ∞) plus n stay within L, logs a lease's
-- hits at its end (now + hold) until its holder settles them at the times it
-- served them, and logs charges past L up to 2L hits, exactly as
-- internal/algorithms/doc.go states it.
--
-- KEYS[1]  sorted set of runs of hits, scored by their time in µs: a member
--          is the sequence number of the run's first hit, zero-padded to 16
--          digits so that members of equal score sort by it, then ":" and
--          the run's length when it holds more than one hit (the hits of
--          one take, or of a lease's, share their time). Runs hold
--          consecutive sequence numbers, and never overlap.
-- KEYS[2]  string: the last sequence number issued, "seq", while every
--          member is one hit (the count is then the set's size), or
--          "seq:count" once a member holds more
-- ARGV     mode, now, L, W, n, receipt time, receipt seq, B, slack, D = L,
--          and for a lease's take its hold, for a settlement its leases
--          (see lua.go)
-- reply    {allowed, remaining, reset, receipt time (now, or now + hold for
--          a lease's take), seq of the first hit added, 0} and, after a
--          lease's take, the hits a holder needs to answer as the log does
--          while the lease lasts: {seq, until, runs, then each run's time,
--          first sequence number and length}: the runs that leave the
--          window before now + hold (up to 256), those logged after now
--          (leases'), and the rest as one run at now, which is what the log
--          holds until the time until (now + hold, or when the 256th of
--          those runs leaves the window if there are more)
--
-- A take of k hits adds one member, so a lease costs Redis the same
-- whatever its size. Denied hits are never logged. A log of single hits
-- (no lease, no take of more than one) is read with ZCARD, as it was before
-- runs were kept.

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
local hold = 0
if mode == 'take' then
  hold = tonumber(ARGV[11]) or 0
end

-- count sums the hits of the members of a ZRANGE reply without scores.
local function count(members)
  local c = 0
  for _, m in ipairs(members) do
    local _, k = run(m)
    c = c + k
  end
  return c
end

-- The log and its count c; runs says the count is kept in KEYS[2], some
-- member possibly holding more than one hit.
local seq, c, runs, left = 0, 0, false, 0
local stored = redis.call('GET', seqkey)
if stored then
  local s, k = string.match(stored, '^(%d+):(%d+)$')
  if s then
    seq, c, runs = tonumber(s), tonumber(k), true
  else
    seq = tonumber(stored)
  end
end
if runs then
  local gone = redis.call('ZRANGEBYSCORE', log, '-inf', int(now - W))
  if #gone > 0 then
    redis.call('ZREMRANGEBYSCORE', log, '-inf', int(now - W))
  end
  left = #gone
  if c > 0 and redis.call('EXISTS', log) == 0 then
    -- The log is gone without its count (evicted, say): it is empty.
    c = 0
  else
    c = c - count(gone)
  end
else
  left = redis.call('ZREMRANGEBYSCORE', log, '-inf', int(now - W))
  c = redis.call('ZCARD', log)
  if c > 0 and not stored then
    -- A log whose count is gone: its hits are counted, and sequence
    -- numbers go on after its own.
    c, runs = 0, true
    for _, m in ipairs(redis.call('ZRANGE', log, 0, -1)) do
      local s, k = run(m)
      c, seq = c + k, math.max(seq, s + k - 1)
    end
  end
end
-- top is the newest hit's time while this call knows it without asking:
-- from an empty log on, as long as it only appends.
local top = nil
if c == 0 then
  -- An empty log is a new one: sequence numbers start again, at now. They
  -- grow slower than the clock, so they never meet those of a log it
  -- replaced, whose leases' settlements then find nothing of theirs.
  seq, runs, top = math.max(now, 0), false, -math.huge
end

-- append logs k > 0 hits at ts with the next sequence numbers, as one run,
-- and returns the first of them.
local function append(k, ts)
  local first = seq + 1
  redis.call('ZADD', log, int(ts), member(first, k))
  seq, c = seq + k, c + k
  if top then
    top = math.max(top, ts)
  end
  if k > 1 then
    runs = true
  end
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

-- extract removes the hits logged at ts with sequence numbers in
-- [from, to) and returns them as runs {seq, n}.
local function extract(ts, from, to)
  local out = {}
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
      out[#out + 1] = {lo, hi - lo}
    end
  end
  return out
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
      if hold > 0 then
        runs = true
      end
      first = append(n, at)
    end
  else
    allowed, reset = 0, oldest(c + n - L)
  end
  if allowed == 0 then
    -- A denial logs nothing: the newest hit and with it the keys' expiry
    -- are as they were. Only hits that left the window change the count.
    if left > 0 then
      if c == 0 then
        redis.call('DEL', log, seqkey)
      elseif runs then
        redis.call('SET', seqkey, int(seq) .. ':' .. int(c), 'KEEPTTL')
      end
    end
    return {0, math.max(L - c, 0), reset, now, 0, 0}
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
elseif mode == 'refund' then
  top = nil
  if n > 0 and c > 0 then
    if ARGV[6] == '' then
      -- The newest n hits logged by now: the highest sequence numbers of
      -- the newest runs. Those logged later are leases', which may serve
      -- them after this refund.
      while n > 0 and c > 0 do
        local newest = redis.call('ZREVRANGEBYSCORE', log, int(now), '-inf', 'WITHSCORES', 'LIMIT', 0, 1)
        if #newest == 0 then
          break
        end
        local s, r = run(newest[1])
        local k = math.min(n, r)
        redis.call('ZREM', log, newest[1])
        if r > k then
          redis.call('ZADD', log, newest[2], member(s, r - k))
        end
        n, c = n - k, c - k
      end
    else
      -- The hits (at, from … from + n − 1) still logged.
      local from = tonumber(ARGV[7])
      extract(ARGV[6], from, from + n)
    end
  end
else
  top = nil
  -- A settlement: ARGV[11] leases, each as eight numbers (receipt time,
  -- receipt seq, epoch, hold, size, reported, close, runs) and its runs of
  -- served hits (time, seq, n). The hits each served move from the lease's
  -- end to the time they were served (or go, if that has left the window);
  -- a lease that closes takes away the hits it did not serve. Only hits
  -- still logged at the lease's end move or go. Each lease costs a read of
  -- the members at its end, one ZREM and one ZADD, whatever its runs.
  local i = 12
  for _ = 1, tonumber(ARGV[11]) do
    local ts, s0, size = ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 4])
    local close, k = ARGV[i + 6] == '1', tonumber(ARGV[i + 7])
    i = i + 8
    local served = {}
    for _ = 1, k do
      served[#served + 1] = {tonumber(ARGV[i]), tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])}
      i = i + 3
    end
    local e0 = s0 + size
    local gone, add = {}, {}
    -- keep logs hits [a, b) at time at (a score, as Redis reads it).
    local function keep(at, a, b)
      if a < b then
        add[#add + 1] = at
        add[#add + 1] = member(a, b - a)
      end
    end
    -- rest keeps the lease's hits [a, b) it did not serve at its end,
    -- unless it closes, which takes them away.
    local function rest(a, b)
      if a >= b then
        return
      end
      if close then
        c = c - (b - a)
      else
        keep(ts, a, b)
      end
    end
    for _, m in ipairs(redis.call('ZRANGEBYSCORE', log, ts, ts)) do
      local s, r = run(m)
      local e = s + r
      if s < e0 and e > s0 then
        gone[#gone + 1] = m
        keep(ts, s, math.max(s, s0))
        keep(ts, math.min(e, e0), e)
        -- The lease's hits of this member, [lo, hi): the served ones move
        -- to their times, the others stay unless the lease closes.
        local lo, hi = math.max(s, s0), math.min(e, e0)
        local at = lo
        for _, sv in ipairs(served) do
          local a, b = math.max(sv[2], at), math.min(sv[2] + sv[3], hi)
          if a < b then
            rest(at, a)
            if sv[1] > now - W then
              keep(int(sv[1]), a, b)
            else
              c = c - (b - a)
            end
            at = b
          end
        end
        rest(at, hi)
      end
    end
    if #gone > 0 then
      redis.call('ZREM', log, unpack(gone))
    end
    if #add > 0 then
      redis.call('ZADD', log, unpack(add))
      runs = true
    end
  end
end

-- The state behaves as a new one once its newest hit leaves the window, or
-- now when it is empty.
local drop = now
if c > 0 and top then
  drop = top + W
elseif c > 0 then
  local newest = redis.call('ZRANGE', log, -1, -1, 'WITHSCORES')
  drop = tonumber(newest[2]) + W
end
if not waiting then
  reset = drop - now
end
if drop > now then
  expire(log, drop, now)
  local v = int(seq)
  if runs then
    v = v .. ':' .. int(c)
  end
  redis.call('SET', seqkey, v, 'PX', int(cdiv(drop - now, 1000) + tonumber(ARGV[9])))
else
  redis.call('DEL', log, seqkey)
end

local reply = {allowed, math.max(L - c, 0), reset, at, first, 0}
if mode == 'take' and hold > 0 and allowed == 1 and n > 0 then
  -- The runs a holder needs: those that leave the window while the lease
  -- lasts, those logged after now (leases'), and the rest at now.
  reply[#reply + 1] = seq
  local listed, parts = 0, {}
  local function list(ms)
    for j = 1, #ms, 2 do
      local s, r = run(ms[j])
      parts[#parts + 1] = tonumber(ms[j + 1])
      parts[#parts + 1] = s
      parts[#parts + 1] = r
      listed = listed + r
    end
    return #ms / 2
  end
  local horizon = now + hold
  if list(redis.call('ZRANGEBYSCORE', log, '(' .. int(now - W), int(now - W + hold), 'WITHSCORES', 'LIMIT', 0, 256)) == 256 then
    horizon = parts[#parts - 2] + W
  end
  reply[#reply + 1] = horizon
  list(redis.call('ZRANGEBYSCORE', log, '(' .. int(math.max(now, now - W + hold)), '+inf', 'WITHSCORES'))
  if c > listed then
    parts[#parts + 1] = now
    parts[#parts + 1] = 0
    parts[#parts + 1] = c - listed
  end
  reply[#reply + 1] = #parts / 3
  for _, v in ipairs(parts) do
    reply[#reply + 1] = v
  end
end
return reply
