package algorithms

import "time"

// TokenBucketState is the state of one token_bucket limit: the level of the
// bucket in millionths of a token and the index t of the slice it was last
// refilled at. The zero value is a new, full bucket. A TokenBucketState is
// not safe for concurrent use.
type TokenBucketState struct {
	level   uint64
	slice   int64
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
// last refill up to the capacity C = B·S, and returns C. A level above C,
// left by a larger burst, is cut to C. A clock that went back refills
// nothing and leaves the refill slice where it was.
func (s *TokenBucketState) refill(l Limit, q, t int64) uint64 {
	c := bucketBurst(l) * SlicesPerWindow
	tau := floorDiv(t, q)
	if !s.started {
		s.level, s.slice, s.started = c, tau, true
		return c
	}
	s.level = min(s.level, c)
	if tau > s.slice {
		// min(C, level + (τ−t)·L), without forming a product above C.
		if L, elapsed := l.Requests, uint64(tau-s.slice); L > 0 {
			if elapsed >= ceilDiv(c-s.level, L) {
				s.level = c
			} else {
				s.level += elapsed * L
			}
		}
		s.slice = tau
	}
	return c
}

// Take asks for n tokens at now: admitted iff the refilled bucket holds n.
func (s *TokenBucketState) Take(l Limit, now time.Time, n uint64) Result {
	w, q, t := l.WindowMicros(), l.SliceMicros(), now.UnixMicro()
	c := s.refill(l, q, t)
	const S = SlicesPerWindow
	switch {
	case n > bucketBurst(l):
		return Result{Remaining: s.level / S, ResetAfter: micros(w)}
	case s.level >= n*S:
		s.level -= n * S
		return s.admitted(l, c, q, t, Receipt{At: t})
	}
	// Denied: 0 < n ≤ B, so L > 0.
	return Result{Remaining: s.level / S, ResetAfter: micros(s.until(ceilDiv(n*S-s.level, l.Requests), q, t))}
}

// Refund puts n tokens back at now, up to the capacity. The receipt makes no
// difference: a token is a token.
func (s *TokenBucketState) Refund(l Limit, now time.Time, n uint64, _ Receipt) Result {
	q, t := l.SliceMicros(), now.UnixMicro()
	c := s.refill(l, q, t)
	if n > bucketBurst(l) {
		s.level = c
	} else {
		s.level = min(c, s.level+n*SlicesPerWindow)
	}
	return s.admitted(l, c, q, t, Receipt{})
}

// Expiry returns when the bucket is full again: the slice it was last
// refilled at when it already is, the zero Time when it was never used.
func (s *TokenBucketState) Expiry(l Limit) time.Time {
	if !s.started {
		return time.Time{}
	}
	c := bucketBurst(l) * SlicesPerWindow
	if s.level >= c {
		return time.UnixMicro(s.slice * l.SliceMicros())
	}
	return time.UnixMicro(s.until(ceilDiv(c-s.level, l.Requests), l.SliceMicros(), 0))
}

func (s *TokenBucketState) admitted(l Limit, c uint64, q, t int64, r Receipt) Result {
	res := Result{Allowed: true, Remaining: s.level / SlicesPerWindow, Receipt: r}
	if s.level < c {
		// c > 0, so L > 0.
		res.ResetAfter = micros(s.until(ceilDiv(c-s.level, l.Requests), q, t))
	}
	return res
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
