-- fixed_window_settle: settles leases of a fixed window, whose counts are
-- kept without a script (see internal/redisx/counter.go): each lease that
-- closes gives back the hits it did not serve to the count of its window, as
-- algorithms.FixedWindowState.Settle does, when the count is the one the lease
-- was taken from.
--
-- It gives them back even when Redis's TIME has passed the window's end: each
-- window has a count of its own, which no op counts in once the window has
-- ended by the clock that names it, so a late give-back changes nothing for
-- them. But the ops of a count are decided without a script, in the window of
-- Redis's clock as the Limiter follows it (serverclock.go), which may lag TIME
-- by up to a millisecond or so: a check sent beside the settlement that ends
-- a replica's leases, in the window's last moments, still reads this count,
-- and must not find the leases' unused hits in it.
--
-- KEYS     the counts of the windows the leases were taken in (two when a
--          lease taken ahead near a window's end is of the next one): each a
--          string holding an integer, made with an expiry whose end, in
--          milliseconds, differs from one count of a window to the next (it
--          is drawn when the count is made), and which a lease's receipt
--          names as its epoch. A lease gives back to the count its epoch
--          names, and to no other.
-- ARGV     "settle", now, L, W, n, the end of the first lease's window in µs (not
--          read: see above), "",
--          B, slack, D, and the leases (see lua.go)
-- reply    {1, 0, 0, now, 0, 0}: a settlement's answer says only that it ran

-- fdiv, cdiv, int, clock and expire come from prelude.lua.
local now = clock(ARGV[2])

local counts, epochs = {}, {}
for k = 1, #KEYS do
  counts[k] = tonumber(redis.call('GET', KEYS[k])) or 0
  if counts[k] > 0 then
    epochs[k] = redis.call('PEXPIRETIME', KEYS[k])
  end
end
local i = 12
for _ = 1, tonumber(ARGV[11]) do
  local e, size, reported = tonumber(ARGV[i + 2]), tonumber(ARGV[i + 4]), tonumber(ARGV[i + 5])
  local close, runs = ARGV[i + 6] == '1', tonumber(ARGV[i + 7])
  i = i + 8
  local sum = 0
  for _ = 1, runs do
    sum = sum + tonumber(ARGV[i + 2])
    i = i + 3
  end
  if close then
    for k = 1, #KEYS do
      if epochs[k] == e then
        local left = size - math.min(reported, size)
        local back = math.min(left - math.min(sum, left), counts[k])
        if back > 0 then
          counts[k] = redis.call('DECRBY', KEYS[k], back)
        end
        break
      end
    end
  end
end

return {1, 0, 0, now, 0, 0}
