-- token_bucket: up to B tokens, refilled at L per window in whole slices of
-- W/S, kept in millionths of a token, and down to −D tokens after charges;
-- the tokens of leases held in groups, each until its end, and settled as
-- their holders report them, exactly as internal/algorithms/doc.go states it.
--
-- KEYS[1]  hash {l = level in millionths of a token, below 0 while in debt,
--          t = slice of the last refill, x = when the bucket is full again
--          in µs, and, only once a lease was taken, g = "e:f:h1,u1,h2,u2…":
--          the epoch e (the time of the bucket's first lease), the slice f
--          the level has been at its cap since (empty when it is not), and
--          for each group of leases' tokens that is held, in order of their
--          ends, the tokens hi it holds in millionths and its end ui in µs}
-- ARGV     mode, now, L, W, n, receipt time, receipt seq, B, slack, D, and
--          for a lease's take its hold, for a refund its receipt's epoch,
--          for a settlement its leases (see lua.go)
-- reply    {allowed, remaining, reset, now, 0, epoch} and, after a lease's
--          take, the state: {l, t, x, capped (0 or 1), f, e, groups, h1,
--          u1, …}
--
-- Every number stays an integer below 2^53 (the level lies in [−D·S, B·S],
-- what the groups hold in [0, B·S], and n ≤ B + D + 1, so C − level and n·S
-- are below 2^33·10^6; a group's end is below now + 2·hold, below 2^53 as
-- now + MaxHold + W is), so Lua's doubles hold it exactly. A bucket no
-- lease touched reads and writes three fields, as it did before leases.

-- fdiv, cdiv, int, clock and expire come from prelude.lua.
local S = 1000000
-- MAXWAIT caps a reported wait at 2^53−1 µs (about 285 years): only a burst
-- that takes longer than that to refill from empty reaches it.
local MAXWAIT = 9007199254740991
-- G is the most groups of leases' tokens a bucket keeps (holdGroups).
local G = 9

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

-- The state: level, refill slice t, expiry x; the epoch, whether the level
-- is capped and since which slice, and the groups of leases' tokens held,
-- {h, u} in order of u, H in all.
local tau = fdiv(now, q)
local state = redis.call('HMGET', key, 'l', 't', 'x', 'g')
local level, t, x = tonumber(state[1]), tonumber(state[2]), tonumber(state[3])
local g0 = state[4]
local epoch, capped, from, groups, H = 0, false, 0, {}, 0
if g0 then
  local e, f, rest = string.match(g0, '^(%d*):(%-?%d*):(.*)$')
  epoch = tonumber(e) or 0
  if f ~= nil and f ~= '' then
    capped, from = true, tonumber(f)
  end
  for h, u in string.gmatch(rest or '', '(%-?%d+),(%-?%d+)') do
    groups[#groups + 1] = {tonumber(h), tonumber(u)}
    H = H + tonumber(h)
  end
end

-- heldFrom returns what the groups from the i-th on hold.
local function heldFrom(i)
  local h = 0
  for j = i, #groups do
    h = h + groups[j][1]
  end
  return h
end

-- keep keeps the groups that hold tokens and end after now (all that hold
-- tokens when now is nil), and sets H to what they hold.
local function keep(now)
  local kept = {}
  H = 0
  for _, g in ipairs(groups) do
    if g[1] > 0 and (now == nil or g[2] > now) then
      kept[#kept + 1] = g
      H = H + g[1]
    end
  end
  groups = kept
end

-- A state that has reached its expiry x is a new, full bucket, of no epoch.
local stale = x ~= nil and x <= now
if level == nil or t == nil or x == nil or x <= now then
  level, t, groups, H, epoch, capped = C, tau, {}, 0, 0, false
elseif #groups == 0 then
  -- No lease holds tokens: the refill to slice tau, up to C, as the
  -- bucket has always refilled. A level above C, left by a larger burst,
  -- is cut, a debt beyond D forgiven; a clock that went back refills
  -- nothing.
  level = math.max(math.min(level, C), -D * S)
  if tau > t then
    level = filled(level, tau - t, C)
    t = tau
  end
  capped = false
else
  -- fill refills the level from slice a to slice b up to most, L per
  -- slice; a level at most, or that reaches it there, is capped: from the
  -- slice it reaches it at, or from a, unless it was capped already.
  local function fill(a, b, most)
    if b <= a then
      return
    end
    if level < most then
      if L == 0 then
        capped = false
        return
      end
      local need = cdiv(most - level, L)
      if need > b - a then
        level, capped = level + (b - a) * L, false
        return
      end
      level, capped, from = most, true, a + need
      return
    end
    if not capped then
      capped, from = true, a
    end
  end
  -- What the groups hold beyond C (a burst lowered under them), the
  -- earliest hold no longer.
  local over = H - C
  for _, g in ipairs(groups) do
    local d = math.min(math.max(over, 0), g[1])
    g[1] = g[1] - d
    over = over - d
  end
  keep(nil)
  -- A level above its cap, left by a larger burst, is cut, a debt beyond D
  -- forgiven. Then the refill to slice tau: a slice that starts before a
  -- group's end refills only up to C less what it and the later groups
  -- hold; a clock that went back refills nothing.
  if level > C - H then
    level, capped = C - H, false
  end
  level = math.max(level, -D * S)
  if tau > t then
    local f = t
    for i, g in ipairs(groups) do
      local m = math.min(tau, math.max(f, cdiv(g[2], q) - 1))
      fill(f, m, C - heldFrom(i))
      f = m
    end
    fill(f, tau, C)
    t = tau
  end
  -- The leases of the groups that end by now have ended.
  keep(now)
  if H == 0 or level ~= C - H then
    capped = false
  end
end

-- markCap keeps capped only while groups hold tokens and the level is at
-- C − H: from where it was, or from slice t when it was not or restart asks.
local function markCap(restart)
  if H == 0 or level ~= C - H then
    capped = false
  elseif restart or not capped then
    capped, from = true, t
  end
end

-- wait returns the wait from from until the bucket, left alone, holds
-- want > level: while want is above C less what the groups from the i-th
-- on hold, the refill reaches that cap at the last slice before the i-th
-- group ends, and goes on from there.
local function wait(want, from)
  local base, lv = t, level
  for i, g in ipairs(groups) do
    local most = C - heldFrom(i)
    if want <= most then
      break
    end
    local m = math.max(base, cdiv(g[2], q) - 1)
    lv = filled(lv, m - base, most)
    base = m
  end
  return slices(lv, base, want, from)
end

local allowed, reset, waiting, leased = 1, 0, false, false
if mode == 'take' then
  local h = tonumber(ARGV[11]) or 0
  if n > B then
    allowed, reset = 0, W
  elseif level >= n * S then
    level = level - n * S
    if h > 0 then
      -- hold holds x tokens of a lease taken at now with hold h, until its end
      -- rounded up to a slot of ⌈h/(G − 1)⌉: in the group that ends then, or a
      -- new one, or, with G groups already, the first that ends later, or else
      -- the last, which then ends then.
      local function hold(x, h)
        H = H + x
        local slot = cdiv(h, G - 1)
        local u = cdiv(now + h, slot) * slot
        for _, g in ipairs(groups) do
          if g[2] == u then
            g[1] = g[1] + x
            return
          end
        end
        if #groups < G then
          local i = #groups + 1
          while i > 1 and groups[i - 1][2] > u do
            groups[i] = groups[i - 1]
            i = i - 1
          end
          groups[i] = {x, u}
          return
        end
        for _, g in ipairs(groups) do
          if g[2] > u then
            g[1] = g[1] + x
            return
          end
        end
        local g = groups[#groups]
        g[1], g[2] = g[1] + x, u
      end
      leased = true
      if epoch == 0 then
        epoch = math.max(now, 1)
      end
      if n > 0 then
        -- A lease's tokens are held until it ends: level + H stays ≤ C.
        hold(n * S, h)
      end
    end
    markCap(false)
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
    return {0, math.max(fdiv(level, S), 0), reset, now, 0, 0}
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
  markCap(false)
  if level < 0 then
    reset, waiting = wait(0, now), true
  end
else
  -- put adds x millionths of a token, up to C − H.
  local function put(x)
    if x >= C - H - level then
      level = C - H
    else
      level = level + x
    end
  end
  if mode == 'refund' then
    -- A refund by the receipt of another bucket's lease gives nothing back.
    local e = tonumber(ARGV[11]) or 0
    if e == 0 or e == epoch then
      put(n * S)
      markCap(false)
    end
  else
    -- release holds k tokens fewer, down to 0, for a lease that ends at e: from
    -- the first group that ends no sooner than e.
    local function release(k, e)
      for _, g in ipairs(groups) do
        if g[1] > 0 and g[2] >= e then
          if k >= cdiv(g[1], S) then
            g[1] = 0
          else
            g[1] = g[1] - k * S
          end
          break
        end
      end
      keep(nil)
    end

    -- reclaim returns what the cap kept out since the tokens served (runs
    -- {at, n}, in order of at) were served, in millionths: the least, over the
    -- slice boundaries b since the level was capped, of the tokens served before
    -- b plus L for each boundary after b, and no more than was served before
    -- the current slice (TokenBucketState.reclaim).
    local function reclaim(served)
      if not capped then
        return 0
      end
      local total = 0
      for _, r in ipairs(served) do
        total = math.min(total + r[2], B)
      end
      local most = total * S
      local function after(b)
        if L == 0 or t - b >= cdiv(most, L) then
          return most
        end
        return (t - b) * L
      end
      local best, before, seen = after(from), 0, from
      for _, r in ipairs(served) do
        local b = fdiv(r[1], q)
        if b >= t then
          break
        end
        if b > seen then
          best = math.min(best, before + after(b))
          seen = b
        end
        before = math.min(before + math.min(r[2], total) * S, most)
      end
      return math.min(best, before)
    end

    -- A settlement: ARGV[11] leases, each as eight numbers (receipt time,
    -- receipt seq, epoch, hold, size, reported, close, runs) and its runs of
    -- served tokens (time, seq, n). A lease of this bucket that still lasts
    -- holds the tokens it served since its last settlement no longer, nor,
    -- when it closes, those it did not serve, which go back; the bucket gets
    -- back what its cap kept out since the served ones were served.
    local i, served, back, settled = 12, {}, 0, false
    for _ = 1, tonumber(ARGV[11]) do
      local at, e, h = tonumber(ARGV[i]), tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3])
      local size, reported, close = tonumber(ARGV[i + 4]), tonumber(ARGV[i + 5]), ARGV[i + 6] == '1'
      local runs = tonumber(ARGV[i + 7])
      i = i + 8
      local sum, mine = 0, {}
      for _ = 1, runs do
        local r = {tonumber(ARGV[i]), tonumber(ARGV[i + 2])}
        mine[#mine + 1] = r
        sum = sum + r[2]
        i = i + 3
      end
      if epoch ~= 0 and e == epoch and now < at + h then
        settled = true
        local left = size - math.min(reported, size)
        local used = math.min(sum, left)
        for _, r in ipairs(mine) do
          served[#served + 1] = r
        end
        local k = used
        if close then
          k, back = left, back + left - used
        end
        release(k, at + h)
      end
    end
    if settled then
      table.sort(served, function(a, b) return a[1] < b[1] end)
      put(back * S + reclaim(served))
      markCap(true)
    end
  end
end
if not waiting and level < C then
  reset = wait(C, now)
end

-- The state behaves as a new one once the bucket is full again: at the
-- refill slice when it is, else when the refill completes (in absolute
-- microseconds, capped at MAXWAIT like every wait), after the last group
-- ends while leases hold tokens.
x = t * q
if level < C then
  x = wait(C, 0)
end
if x > now then
  if epoch ~= 0 then
    local parts = {}
    for _, g in ipairs(groups) do
      parts[#parts + 1] = int(g[1]) .. ',' .. int(g[2])
    end
    local f = ''
    if capped then
      f = int(from)
    end
    redis.call('HSET', key, 'l', int(level), 't', int(t), 'x', int(x),
      'g', int(epoch) .. ':' .. f .. ':' .. table.concat(parts, ','))
  else
    redis.call('HSET', key, 'l', int(level), 't', int(t), 'x', int(x))
    if g0 then
      redis.call('HDEL', key, 'g')
    end
  end
  expire(key, x, now)
else
  redis.call('DEL', key)
end

local reply = {allowed, math.max(fdiv(level, S), 0), reset, now, 0, 0}
if leased then
  reply[6] = epoch
end
if leased and n > 0 then
  local f = 0
  if capped then
    f = 1
  end
  for _, v in ipairs({level, t, x, f, from, epoch, #groups}) do
    reply[#reply + 1] = v
  end
  for _, g in ipairs(groups) do
    reply[#reply + 1] = g[1]
    reply[#reply + 1] = g[2]
  end
end
return reply
