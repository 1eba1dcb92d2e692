package algorithms

import (
	"cmp"
	"slices"
	"time"
)

// TokenBucketState is the state of one token_bucket limit: the level of the
// bucket in millionths of a token, below zero while charges have left it in
// debt, the index t of the slice it was last refilled at, when it is full
// again as of its last change (its Expiry), and the tokens that leases took
// and may still serve, in groups each held until its end. The zero value is
// a new, full bucket. A TokenBucketState is not safe for concurrent use.
type TokenBucketState struct {
	level int64
	slice int64
	full  int64 // µs; set by every change, kept by a denial
	// holds are the tokens of leases that may still serve them, H in all,
	// counted as if they were in the bucket until their groups end:
	// level + H ≤ C at every step.
	holds bucketHolds
	// capped reports, while the groups hold tokens, that the level has
	// been at its cap, C − H, since slice from: every refill since then
	// went beyond the cap, and the holds kept it out (see Settle).
	capped bool
	from   int64
	// epoch names this incarnation of the bucket to its leases' receipts:
	// the time of its first lease, 0 before.
	epoch   int64
	started bool
}

// bucketBurst returns B: Limit.Burst, or Limit.Requests when that is 0. A
// bucket that never refills (L = 0) holds nothing.
func bucketBurst(l Limit) uint64 {
	switch {
	case l.Requests == 0:
		return 0
	case l.Burst != 0:
		return l.Burst
	}
	return l.Requests
}

// refill brings the bucket to slice τ = ⌊t/q⌋, adding L per slice since the
// last refill up to the capacity C = B·S, and returns C. The level is first
// kept within [−D·S, C − H]: a level above it, left by a larger burst, is
// cut, and a debt beyond what the limit allows is forgiven. The tokens that
// leases hold are counted as in the bucket: a slice that starts before a
// group's end refills only up to C less what that group and the groups that
// end after it hold. Then the groups that have ended by t are dropped. A
// clock that went back refills nothing and leaves the refill slice where it
// was. It keeps capped: the slice at which the level last reached its cap,
// while it has stayed there.
func (s *TokenBucketState) refill(l Limit, q, t int64) int64 {
	c := int64(bucketBurst(l) * SlicesPerWindow)
	tau := floorDiv(t, q)
	if !s.started {
		*s = TokenBucketState{level: c, slice: tau, started: true}
		return c
	}
	if t >= s.full {
		// Full again as of its last change: a new bucket, which its old
		// leases' settlements do not name.
		s.epoch = 0
	}
	s.holds.cut(c)
	if most := c - s.holds.total(); s.level > most {
		s.level, s.capped = most, false
	}
	s.level = max(s.level, -int64(l.MaxDebt()*SlicesPerWindow))
	if tau > s.slice {
		from := s.slice
		for i, g := range s.holds {
			if g.held == 0 {
				break
			}
			m := min(tau, max(from, lastSliceBefore(g.until, q)))
			s.fill(l, from, m, c-s.holds.from(i))
			from = m
		}
		s.fill(l, from, tau, c)
		s.slice = tau
	}
	s.holds.end(t)
	if h := s.holds.total(); h == 0 || s.level != c-h {
		s.capped = false
	}
	return c
}

// fill refills the level from slice a to slice b, up to most: L per slice,
// as filled does. A level at most, or that reaches it there, is capped: from
// the slice it reaches it at, or from a, unless it was capped already.
func (s *TokenBucketState) fill(l Limit, a, b, most int64) {
	if b <= a {
		return
	}
	if s.level < most {
		L := l.Requests
		if L == 0 {
			s.capped = false
			return
		}
		need := int64(ceilDiv(uint64(most-s.level), L))
		if need > b-a {
			s.level += (b - a) * int64(L)
			s.capped = false
			return
		}
		s.level, s.capped, s.from = most, true, a+need
		return
	}
	if !s.capped {
		s.capped, s.from = true, a
	}
}

// lastSliceBefore returns ⌈u/q⌉ − 1, the last slice that starts before u.
func lastSliceBefore(u, q int64) int64 {
	return floorDiv(u+q-1, q) - 1
}

// filled returns min(most, level + k·L) for level ≤ most and k ≥ 0: the
// level after k slices of refill up to most, without forming a product above
// most − level.
func filled(l Limit, level, k, most int64) int64 {
	if L := l.Requests; L > 0 && k > 0 {
		if uint64(k) >= ceilDiv(uint64(most-level), L) {
			return most
		}
		return level + k*int64(L)
	}
	return level
}

// Take asks for n tokens at now: admitted iff the refilled bucket holds n. A
// denial changes nothing: the refill it computed is not kept, so the next
// call refills from the same slice (at the rate the limit then has), as the
// script, which writes nothing on a denial, does.
func (s *TokenBucketState) Take(l Limit, now time.Time, n uint64) Result {
	return s.take(l, now.UnixMicro(), n, 0)
}

// Lease asks for n tokens at now as Take does, for a lease that serves them
// until now + hold: the bucket holds them until then, rounded up to a
// multiple of hold, in a group of leases that end about then, so that it
// does not refill to full while the lease may still serve them, and a full
// burst never comes on top of them. Its receipt names the bucket's epoch,
// the time of its first lease.
func (s *TokenBucketState) Lease(l Limit, now time.Time, n uint64, hold time.Duration) Result {
	return s.take(l, now.UnixMicro(), n, HoldMicros(hold))
}

// take asks for n tokens at t, held until t + hold when hold > 0.
func (s *TokenBucketState) take(l Limit, t int64, n uint64, hold int64) Result {
	w, q := l.WindowMicros(), l.SliceMicros()
	before := *s
	c := s.refill(l, q, t)
	res, ok := s.decide(l, c, n, w, q, t)
	if !ok {
		*s = before
		return res
	}
	s.level -= int64(n * SlicesPerWindow)
	r := Receipt{At: t}
	if hold > 0 {
		if s.epoch == 0 {
			s.epoch = max(t, 1)
		}
		r.Epoch = s.epoch
		if n > 0 {
			// level + H stays as it was, at most C.
			s.holds.hold(int64(n*SlicesPerWindow), t, hold)
		}
	}
	s.markCap(c, false)
	s.noteExpiry(l, c, q)
	return s.admitted(l, c, q, t, r)
}

// markCap keeps capped true only while the groups hold tokens and the level
// is at its cap, C − H: from the slice it was capped from, or from the
// current slice when it was not capped, or when restart asks to (a
// settlement has given back what the cap kept out until then).
func (s *TokenBucketState) markCap(c int64, restart bool) {
	switch h := s.holds.total(); {
	case h == 0 || s.level != c-h:
		s.capped = false
	case restart || !s.capped:
		s.capped, s.from = true, s.slice
	}
}

// Charge takes n tokens at now even from a bucket that does not hold them,
// down to a level of −D tokens: the bucket is in debt until its refill
// brings it back to zero. It reports what a check would report after it.
func (s *TokenBucketState) Charge(l Limit, now time.Time, n uint64) Result {
	return s.charge(l, now, n, l.MaxDebt())
}

// Record takes n tokens at now as Charge does, but down to a level of −L
// tokens only: what it owes, one window's refill pays off. It reports what
// a check would report after it.
func (s *TokenBucketState) Record(l Limit, now time.Time, n uint64) Result {
	return s.charge(l, now, n, min(l.MaxDebt(), l.Requests))
}

// charge takes n tokens at now, down to a level of −d tokens; d ≤ D. A
// bucket already lower than that (owing a debt of charges) keeps its level.
func (s *TokenBucketState) charge(l Limit, now time.Time, n, d uint64) Result {
	w, q, t := l.WindowMicros(), l.SliceMicros(), now.UnixMicro()
	c := s.refill(l, q, t)
	_, within := s.decide(l, c, n, w, q, t)
	const S = SlicesPerWindow
	// level − n·S, but no lower than −d·S; n·S is formed only below
	// (B + D + 1)·S.
	switch floor := -int64(d * S); {
	case s.level <= floor:
	case n > uint64(s.level-floor)/S:
		s.level = floor
	default:
		s.level -= int64(n * S)
	}
	s.markCap(c, false)
	s.noteExpiry(l, c, q)
	res, ok := s.decide(l, c, 0, w, q, t)
	if ok {
		res = s.admitted(l, c, q, t, Receipt{})
	}
	res.Allowed = within
	return res
}

// decide reports whether the refilled bucket of capacity c holds n tokens,
// and when it does not, the Result of their denial. It changes nothing.
func (s *TokenBucketState) decide(l Limit, c int64, n uint64, w, q, t int64) (Result, bool) {
	const S = SlicesPerWindow
	switch {
	case n > bucketBurst(l):
		return Result{Remaining: s.remaining(), ResetAfter: micros(w)}, false
	case s.level >= int64(n*S):
		return Result{}, true
	}
	// n ≤ B and the level is below n·S: L > 0, or the bucket would hold
	// nothing and owe nothing.
	return Result{Remaining: s.remaining(), ResetAfter: micros(s.wait(l, c, int64(n*S), q, t))}, false
}

// Refund puts n tokens back at now, up to the capacity less the tokens that
// leases hold (C − H). The receipt makes no difference, a token being a
// token, but one that names another epoch than the bucket's (a lease's
// served token, given back after the bucket was lost) gives nothing back.
func (s *TokenBucketState) Refund(l Limit, now time.Time, n uint64, r Receipt) Result {
	q, t := l.SliceMicros(), now.UnixMicro()
	c := s.refill(l, q, t)
	if r.Epoch == 0 || r.Epoch == s.epoch {
		s.put(c, n*SlicesPerWindow)
		s.markCap(c, false)
	}
	s.noteExpiry(l, c, q)
	return s.admitted(l, c, q, t, Receipt{})
}

// put adds x millionths of a token, up to C − H.
func (s *TokenBucketState) put(c int64, x uint64) {
	if most := c - s.holds.total(); x >= uint64(most-s.level) {
		s.level = most
	} else {
		s.level += int64(x)
	}
}

// Settle settles leases of the bucket. The leases that it took (their
// receipts name its epoch) and that still last (now < r.At + hold) hold the
// tokens they served since the last settlement no longer, nor, if they
// close, the tokens they did not serve, which go back; and the bucket gets
// back what its cap kept out since those tokens were served (reclaim).
// Once a lease has ended, its tokens were given up when its group ended,
// and the bucket may have refilled where they were: its settlement gives
// nothing back.
func (s *TokenBucketState) Settle(l Limit, now time.Time, leases []Lease) {
	q, t := l.SliceMicros(), now.UnixMicro()
	c := s.refill(l, q, t)
	var served []Served
	var back uint64
	settled := false
	for i := range leases {
		ls := &leases[i]
		end := ls.Receipt.At + HoldMicros(ls.Hold)
		if s.epoch == 0 || ls.Receipt.Epoch != s.epoch || t >= end {
			continue
		}
		settled = true
		n := ls.served()
		served = append(served, ls.Served...)
		if ls.Close {
			n += ls.unused()
			back += ls.unused()
		}
		s.holds.release(n, end)
	}
	if settled {
		slices.SortStableFunc(served, func(a, b Served) int { return cmp.Compare(a.At, b.At) })
		s.put(c, back*SlicesPerWindow+s.reclaim(l, served))
		s.markCap(c, true)
	}
	s.noteExpiry(l, c, q)
}

// reclaim returns what a settlement gives back of the refill that the cap
// kept out since the tokens that served lists were served, in millionths: a
// lower bound of what the bucket would hold beyond what it does had those
// tokens been taken when served rather than held. The level has been at its
// cap since slice from (capped), so each slice boundary since then cut a
// whole refill L that the bucket, without the hold of tokens already
// served, would have kept, until the served tokens are made up. The bound
// is the least, over the boundaries b from then on, of the tokens served
// before b plus L for each boundary after b; what was served in the
// current slice is not made up yet. Each settlement claims only what the
// boundaries since the last one cut (Settle restarts capped), so that the
// leases of several holders never claim one refill twice.
func (s *TokenBucketState) reclaim(l Limit, served []Served) uint64 {
	if !s.capped {
		return 0
	}
	const S = SlicesPerWindow
	L, tau := l.Requests, s.slice
	var total uint64
	for _, sv := range served {
		total = min(total+sv.N, bucketBurst(l))
	}
	most := total * S
	// after returns min(most, L·(tau − b)) for b ≤ tau.
	after := func(b int64) uint64 {
		if L == 0 || uint64(tau-b) >= ceilDiv(most, L) {
			return most
		}
		return uint64(tau-b) * L
	}
	best := after(s.from)
	var before uint64 // served before the boundary, in millionths
	seen := s.from
	for _, sv := range served {
		b := floorDiv(sv.At, l.SliceMicros())
		if b >= tau {
			break
		}
		if b > seen {
			best = min(best, before+after(b))
			seen = b
		}
		before = min(before+min(sv.N, total)*S, most)
	}
	return min(best, before)
}

// Expiry returns when the bucket is full again as of its last change, under
// the limit of that change, as the script records it: a denial changes
// nothing, so it keeps the Expiry too. It is the zero Time when the bucket
// was never used.
func (s *TokenBucketState) Expiry(Limit) time.Time {
	if !s.started {
		return time.Time{}
	}
	return time.UnixMicro(s.full)
}

// noteExpiry records when the bucket, as it is now, is full again: the slice it
// was last refilled at when it already is. While leases hold tokens, that is
// after the last group ends.
func (s *TokenBucketState) noteExpiry(l Limit, c int64, q int64) {
	if s.level >= c {
		s.full = s.slice * q
		return
	}
	s.full = s.wait(l, c, c, q, 0)
}

func (s *TokenBucketState) admitted(l Limit, c int64, q, t int64, r Receipt) Result {
	res := Result{Allowed: true, Remaining: s.remaining(), Receipt: r}
	if s.level < c {
		// c > 0, so L > 0.
		res.ResetAfter = micros(s.wait(l, c, c, q, t))
	}
	return res
}

// remaining returns the whole tokens the bucket holds, 0 while it is in
// debt.
func (s *TokenBucketState) remaining() uint64 {
	if s.level <= 0 {
		return 0
	}
	return uint64(s.level) / SlicesPerWindow
}

// wait returns the wait from now (in µs since the epoch, or 0 for the time
// itself) until the bucket of capacity c, left alone, holds want > level:
// (t + ⌈(want − level)/L⌉)·q − now when want is within the cap of the
// refill from slice t on (C less what all groups hold); otherwise the
// refill first reaches that cap at the last slice m before the first group
// ends, and the same holds from there, with level_m and the next cap, up to
// C once every group has ended. L > 0.
func (s *TokenBucketState) wait(l Limit, c, want, q, now int64) int64 {
	base, level := s.slice, s.level
	for i, g := range s.holds {
		most := c - s.holds.from(i)
		if g.held == 0 || want <= most {
			break
		}
		m := max(base, lastSliceBefore(g.until, q))
		level = filled(l, level, m-base, most)
		base = m
	}
	return until(base, ceilDiv(uint64(want-level), l.Requests), q, now)
}

// until returns (base + x)·q − now in microseconds, capped at
// maxResetMicros: a burst that takes centuries to refill must not overflow.
func until(base int64, x uint64, q, now int64) int64 {
	b := base*q - now
	if b >= maxResetMicros || x > uint64(maxResetMicros-b)/uint64(q) {
		return maxResetMicros
	}
	return b + int64(x)*q
}

// bucketLifetime is Limit.Lifetime of a token_bucket: the time it takes to
// refill from empty, W·⌈B/L⌉ at most, and W when B ≤ L.
func bucketLifetime(l Limit) time.Duration {
	if b := bucketBurst(l); b > l.Requests {
		// Validate keeps this within MaxWindow.
		return time.Duration(ceilDiv(b, l.Requests)) * l.Window
	}
	return l.Window
}

// Clone returns a copy of the bucket.
func (s *TokenBucketState) Clone() State {
	c := *s
	return &c
}

// TokenBucketStateOf returns the bucket a store keeps: its level in
// millionths of a token, the slice it was last refilled at, when it is full
// again (µs), the groups of leases' tokens it holds ({held in millionths,
// until in µs}, in order of their ends), the slice its level has been at
// its cap since (capped), and its epoch.
func TokenBucketStateOf(level, slice, full int64, groups [][2]int64, capped bool, from, epoch int64) *TokenBucketState {
	s := &TokenBucketState{level: level, slice: slice, full: full, capped: capped, from: from, epoch: epoch, started: true}
	for i, g := range groups {
		if i < len(s.holds) {
			s.holds[i] = holdGroup{held: g[0], until: g[1]}
		}
	}
	s.holds.compact()
	return s
}
