package algorithms

import "time"

// TokenBucketState is the state of one token_bucket limit: the level of the
// bucket in millionths of a token, below zero while charges have left it in
// debt, the index t of the slice it was last refilled at, and when it is
// full again as of its last change (its Expiry). The zero value is a new,
// full bucket. A TokenBucketState is not safe for concurrent use.
type TokenBucketState struct {
	level   int64
	slice   int64
	full    int64 // µs; set by every change, kept by a denial
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
// kept within [−D·S, C]: a level above C, left by a larger burst, is cut to
// C, and a debt beyond what the limit allows is forgiven. A clock that went
// back refills nothing and leaves the refill slice where it was.
func (s *TokenBucketState) refill(l Limit, q, t int64) int64 {
	c := int64(bucketBurst(l) * SlicesPerWindow)
	tau := floorDiv(t, q)
	if !s.started {
		s.level, s.slice, s.started = c, tau, true
		return c
	}
	s.level = max(min(s.level, c), -int64(l.MaxDebt()*SlicesPerWindow))
	if tau > s.slice {
		// min(C, level + (τ−t)·L), without forming a product above C − level.
		if L, elapsed := l.Requests, uint64(tau-s.slice); L > 0 {
			if elapsed >= ceilDiv(uint64(c-s.level), L) {
				s.level = c
			} else {
				s.level += int64(elapsed * L)
			}
		}
		s.slice = tau
	}
	return c
}

// Take asks for n tokens at now: admitted iff the refilled bucket holds n. A
// denial changes nothing: the refill it computed is not kept, so the next
// call refills from the same slice (at the rate the limit then has), as the
// script, which writes nothing on a denial, does.
func (s *TokenBucketState) Take(l Limit, now time.Time, n uint64) Result {
	w, q, t := l.WindowMicros(), l.SliceMicros(), now.UnixMicro()
	before := *s
	c := s.refill(l, q, t)
	res, ok := s.decide(l, n, w, q, t)
	if !ok {
		*s = before
		return res
	}
	s.level -= int64(n * SlicesPerWindow)
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
	_, within := s.decide(l, n, w, q, t)
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
	res, ok := s.decide(l, 0, w, q, t)
	if ok {
		res = s.admitted(l, c, q, t, Receipt{})
	}
	res.Allowed = within
	return res
}

// decide reports whether the refilled bucket holds n tokens, and when it
// does not, the Result of their denial. It changes nothing.
func (s *TokenBucketState) decide(l Limit, n uint64, w, q, t int64) (Result, bool) {
	const S = SlicesPerWindow
	switch {
	case n > bucketBurst(l):
		return Result{Remaining: s.remaining(), ResetAfter: micros(w)}, false
	case s.level >= int64(n*S):
		return Result{}, true
	}
	// n ≤ B and the level is below n·S: L > 0, or the bucket would hold
	// nothing and owe nothing.
	return Result{Remaining: s.remaining(), ResetAfter: micros(s.until(ceilDiv(uint64(int64(n*S)-s.level), l.Requests), q, t))}, false
}

// Refund puts n tokens back at now, up to the capacity. The receipt makes no
// difference: a token is a token.
func (s *TokenBucketState) Refund(l Limit, now time.Time, n uint64, _ Receipt) Result {
	q, t := l.SliceMicros(), now.UnixMicro()
	c := s.refill(l, q, t)
	if n > uint64(c-s.level)/SlicesPerWindow {
		s.level = c
	} else {
		s.level += int64(n * SlicesPerWindow)
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
// was last refilled at when it already is.
func (s *TokenBucketState) settle(l Limit, c int64, q int64) {
	if s.level >= c {
		s.full = s.slice * q
		return
	}
	s.full = s.until(ceilDiv(uint64(c-s.level), l.Requests), q, 0)
}

func (s *TokenBucketState) admitted(l Limit, c int64, q, t int64, r Receipt) Result {
	res := Result{Allowed: true, Remaining: s.remaining(), Receipt: r}
	if s.level < c {
		// c > 0, so L > 0.
		res.ResetAfter = micros(s.until(ceilDiv(uint64(c-s.level), l.Requests), q, t))
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

// until returns (t + x)·q − now in microseconds, where t is the refill slice,
// capped at maxResetMicros: a burst that takes centuries to refill must not
// overflow.
func (s *TokenBucketState) until(x uint64, q, now int64) int64 {
	base := s.slice*q - now
	if base >= maxResetMicros || x > uint64(maxResetMicros-base)/uint64(q) {
		return maxResetMicros
	}
	return base + int64(x)*q
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
