package algorithms

import "time"

// TokenBucketState is the state of one token_bucket limit: the level of the
// bucket in millionths of a token, below zero while charges have left it in
// debt, the index t of the slice it was last refilled at, when it is full
// again as of its last change (its Expiry), and the tokens that leases took
// and may still serve (held, in millionths, until heldUntil). The zero value
// is a new, full bucket. A TokenBucketState is not safe for concurrent use.
type TokenBucketState struct {
	level int64
	slice int64
	full  int64 // µs; set by every change, kept by a denial
	// held is H, the tokens of leases that may still serve them, counted
	// as if they were in the bucket until heldUntil (U, µs), when the last
	// of those leases has ended: level + H ≤ C at every step. Both are 0
	// while no lease holds any.
	held      int64
	heldUntil int64
	started   bool
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
// cut, and a debt beyond what the limit allows is forgiven. Up to the last
// slice that starts before U the refill stops at C − H, the tokens that
// leases hold being counted as in the bucket; once t ≥ U, no lease holds
// any (nor U, kept only while H > 0). A clock that went back refills
// nothing and leaves the refill slice where it was.
func (s *TokenBucketState) refill(l Limit, q, t int64) int64 {
	c := int64(bucketBurst(l) * SlicesPerWindow)
	tau := floorDiv(t, q)
	if !s.started {
		s.level, s.slice, s.held, s.heldUntil, s.started = c, tau, 0, 0, true
		return c
	}
	s.held = min(s.held, c)
	s.level = max(min(s.level, c-s.held), -int64(l.MaxDebt()*SlicesPerWindow))
	if tau > s.slice {
		from := s.slice
		if s.held > 0 {
			m := min(tau, max(s.slice, s.lastHeldSlice(q)))
			s.level = filled(l, s.level, m-s.slice, c-s.held)
			from = m
		}
		s.level = filled(l, s.level, tau-from, c)
		s.slice = tau
	}
	if t >= s.heldUntil || s.held == 0 {
		s.held, s.heldUntil = 0, 0
	}
	return c
}

// lastHeldSlice returns ⌈U/q⌉ − 1, the last slice that starts before U.
func (s *TokenBucketState) lastHeldSlice(q int64) int64 {
	return floorDiv(s.heldUntil+q-1, q) - 1
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
// until now + hold: the bucket holds them until then (H += n·S,
// U = max(U, now + hold)), so that it does not refill to full while the
// lease may still serve them, and a full burst never comes on top of them.
func (s *TokenBucketState) Lease(l Limit, now time.Time, n uint64, hold time.Duration) Result {
	return s.take(l, now.UnixMicro(), n, holdMicros(hold))
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
	if hold > 0 && n > 0 {
		// level + H stays as it was, at most C.
		s.held += int64(n * SlicesPerWindow)
		s.heldUntil = max(s.heldUntil, t+hold)
	}
	s.settle(l, c, q)
	return s.admitted(l, c, q, t, Receipt{At: t})
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
	s.settle(l, c, q)
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
// leases hold (C − H). The receipt makes no difference: a token is a token.
func (s *TokenBucketState) Refund(l Limit, now time.Time, n uint64, _ Receipt) Result {
	return s.refund(l, now.UnixMicro(), n, false)
}

// Release gives back n unused tokens at now of the lease taken with receipt
// r and hold: while the lease lasts (now < r.At + hold), they are held no
// longer (H −= n·S, down to 0); then they go back into the bucket as a
// refund's do, up to C − H, so that level + H stays at most C. Once the
// lease has ended, its tokens may have left H already (when U passed), and
// what H holds may be other leases' only: the give-back is then a refund,
// and so it is without a receipt.
func (s *TokenBucketState) Release(l Limit, now time.Time, n uint64, r Receipt, hold time.Duration) Result {
	t := now.UnixMicro()
	return s.refund(l, t, n, !noReceipt(r) && t < r.At+holdMicros(hold))
}

// refund puts n tokens back at t, first taking them from those held when
// release is set.
func (s *TokenBucketState) refund(l Limit, t int64, n uint64, release bool) Result {
	const S = SlicesPerWindow
	q := l.SliceMicros()
	c := s.refill(l, q, t)
	if release {
		if n > uint64(s.held)/S {
			s.held = 0
		} else {
			s.held -= int64(n * S)
		}
	}
	if most := c - s.held; n > uint64(most-s.level)/S {
		s.level = most
	} else {
		s.level += int64(n * S)
	}
	if s.held == 0 {
		s.heldUntil = 0
	}
	s.settle(l, c, q)
	return s.admitted(l, c, q, t, Receipt{})
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

// settle records when the bucket, as it is now, is full again: the slice it
// was last refilled at when it already is. While leases hold tokens, that is
// after U.
func (s *TokenBucketState) settle(l Limit, c int64, q int64) {
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
// (t + ⌈(want − level)/L⌉)·q − now when want ≤ C − H, the refill then
// being the same capped or not; otherwise the refill first reaches C − H at
// the last slice m = max(t, ⌈U/q⌉ − 1) before U, and the rest follows from
// there, (m + ⌈(want − level_m)/L⌉)·q − now. L > 0.
func (s *TokenBucketState) wait(l Limit, c, want, q, now int64) int64 {
	base, level := s.slice, s.level
	if s.held > 0 && want > c-s.held {
		base = max(s.slice, s.lastHeldSlice(q))
		level = filled(l, level, base-s.slice, c-s.held)
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
