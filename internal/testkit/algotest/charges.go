package algotest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/rate"
)

// chargeBehaviours are the properties of charges (usage already spent),
// which every algorithm has.
func chargeBehaviours() []behaviour {
	return []behaviour{
		{name: "charge records past the limit", run: chargeRecordsPastTheLimit},
		{name: "charge of more than the limit can hold is recorded", run: chargeAboveCapacity},
		{name: "check after a charge waits exactly for the debt", run: func(s *suite) { exactRetryAfterCharges(s, false) }},
		{name: "take after a charge waits exactly for the debt", run: func(s *suite) { exactRetryAfterCharges(s, true) }},
		{name: "admitted reset after charges is the wait until fully replenished", run: replenishmentAfterCharges},
		{name: "refund without receipt gives charged hits back", run: refundCharged},
		{name: "charged debt is bounded", run: chargeDebtBounded},
		{name: "record records past the limit", run: recordRecordsPastTheLimit},
		{name: "record owes nothing past its window", run: recordOwesNothing},
		{name: "check after records waits exactly", run: exactRetryAfterRecords},
		{name: "admitted reset after records is the wait until fully replenished", run: replenishmentAfterRecords},
	}
}

// charge records n hits as spent, as a debt past the limit, and checks
// that it carries no receipt.
func (s *suite) charge(k rate.Key, l algorithms.Limit, n uint64) algorithms.Result {
	s.t.Helper()
	res := s.do(rate.Op{Key: k, Limit: l, Hits: n, Kind: rate.Charge, Debt: true})[0]
	require.Zero(s.t, res.Receipt, "a charge has no receipt %s", s.at())
	return res
}

// record records n hits as spent, owing nothing past the window, and
// checks that it carries no receipt.
func (s *suite) record(k rate.Key, l algorithms.Limit, n uint64) algorithms.Result {
	s.t.Helper()
	res := s.do(rate.Op{Key: k, Limit: l, Hits: n, Kind: rate.Charge})[0]
	require.Zero(s.t, res.Receipt, "a record has no receipt %s", s.at())
	return res
}

// recordRecordsPastTheLimit: a token budget as envoyproxy/ratelimit counts
// it, checked with 0 hits and charged afterwards: records within the limit
// are allowed; the one that takes it past L is recorded, reported over, and
// denies later checks and takes.
func recordRecordsPastTheLimit(s *suite) {
	for _, l := range s.someLimits() {
		c := l.Capacity()
		k := s.key()
		for i := uint64(1); i <= c; i++ {
			require.True(s.t, s.peek(k, l).Allowed, "check before record %d of %d %s", i, c, s.at())
			res := s.record(k, l, 1)
			require.True(s.t, res.Allowed, "record %d of %d %s", i, c, s.at())
			require.Equal(s.t, c-i, res.Remaining, "record %d of %d", i, c)
		}
		over := s.record(k, l, 1)
		require.False(s.t, over.Allowed, "record past the limit %s", s.at())
		require.Zero(s.t, over.Remaining)
		require.Positive(s.t, over.ResetAfter)
		s.denied(s.peek(k, l), 0, over.ResetAfter, "check after the record past the limit")
		require.False(s.t, s.take(k, l, 1).Allowed, "take after the record past the limit %s", s.at())
	}
}

// recordOwesNothing: on a limit of 1 a second, a record of 2^32−1 hits
// denies checks only until what it recorded stops counting, as any hit
// would: the end of its window (fixed_window), W after it
// (sliding_window_log, where a charge is a record), the end of the next window (sliding_window_counter,
// whose previous window weighs), or one window's refill (token_bucket). A
// charge of as many hits owes for years.
func recordOwesNothing(s *suite) {
	l, k := s.limit(1, time.Second), s.key()
	s.clock.Advance(250 * time.Millisecond)
	res := s.record(k, l, math.MaxUint32)
	require.False(s.t, res.Allowed)
	start := windowStart(s.clock.Now(), time.Second)
	var want time.Time
	switch s.alg {
	case algorithms.FixedWindow:
		want = start.Add(time.Second)
	case algorithms.SlidingWindowLog:
		want = s.clock.Now().Add(time.Second)
	case algorithms.SlidingWindowCounter:
		want = start.Add(2 * time.Second)
	case algorithms.TokenBucket:
		// From −1 token to 0 at one a second.
		want = s.clock.Now().Add(time.Second)
	}
	s.denied(res, 0, want.Sub(s.clock.Now()), "record of 2^32−1")
	s.denied(s.peek(k, l), 0, want.Sub(s.clock.Now()), "check after the record")
	s.clock.Advance(want.Sub(s.clock.Now()))
	require.True(s.t, s.peek(k, l).Allowed, "check once the record stopped counting %s", s.at())
	if s.alg == algorithms.TokenBucket {
		s.clock.Advance(time.Second) // the bucket refills its token
	}
	require.True(s.t, s.take(k, l, 1).Allowed, "take of the whole limit %s", s.at())

	if s.alg != algorithms.SlidingWindowLog { // whose charges are records
		charged := s.key()
		require.False(s.t, s.charge(charged, l, math.MaxUint32).Allowed)
		s.clock.Advance(2 * time.Second)
		require.False(s.t, s.peek(charged, l).Allowed, "a charge of as many hits still owes %s", s.at())
	}
}

// exactRetryAfterRecords drives random states through takes, records and
// charges (often past the limit) and time, and whenever a check is denied,
// checks that waiting ResetAfter less one microsecond is not enough and
// waiting ResetAfter is.
func exactRetryAfterRecords(s *suite) {
	rng := rand.New(rand.NewPCG(24, uint64(s.alg)))
	s.retryAfterIsExact(rng, 12, 1, func(k rate.Key, l algorithms.Limit) {
		switch rng.IntN(4) {
		case 0:
			s.take(k, l, rng.Uint64N(l.Capacity()+1))
		case 1:
			s.charge(k, l, chargeHits(rng, l))
		default:
			s.record(k, l, chargeHits(rng, l))
		}
	}, func(uint64) uint64 { return 0 })
}

// replenishmentAfterRecords builds random states with records and checks
// that once a check is admitted, its reset is exactly when the whole
// capacity is available again.
func replenishmentAfterRecords(s *suite) {
	rng := rand.New(rand.NewPCG(25, uint64(s.alg)))
	for range 20 {
		l, k := s.randomLimit(rng, 1), s.key()
		c := l.Capacity()
		for range 1 + rng.IntN(8) {
			s.wander(rng, l.Window)
			if rng.IntN(2) == 0 {
				s.take(k, l, rng.Uint64N(c+1))
			} else {
				s.record(k, l, chargeHits(rng, l))
			}
		}
		s.wander(rng, l.Window)
		p := s.peek(k, l)
		if !p.Allowed {
			s.clock.Advance(p.ResetAfter)
			p = s.peek(k, l)
			require.True(s.t, p.Allowed, "check after its reset %s", s.at())
		}
		if p.ResetAfter > 0 {
			s.clock.Advance(p.ResetAfter - time.Microsecond)
			require.False(s.t, s.take(k, l, c).Allowed, "whole capacity 1µs before the %s reset %s", p.ResetAfter, s.at())
			s.clock.Advance(time.Microsecond)
		}
		s.admitted(s.take(k, l, c), 0, emptiedReset(l, s.clock.Now()), fmt.Sprintf("whole capacity after the %s reset", p.ResetAfter))
	}
}

// chargeRecordsPastTheLimit: the scenario of a token budget checked with 0
// hits and charged afterwards, as envoyproxy/ratelimit's token-quota script
// runs it. Charges within the limit are allowed; the one that takes it past
// L is recorded and reported over; checks are then denied.
func chargeRecordsPastTheLimit(s *suite) {
	for _, l := range s.someLimits() {
		c := l.Capacity()
		k := s.key()
		for i := uint64(1); i <= c; i++ {
			require.True(s.t, s.peek(k, l).Allowed, "check before charge %d of %d %s", i, c, s.at())
			res := s.charge(k, l, 1)
			require.True(s.t, res.Allowed, "charge %d of %d %s", i, c, s.at())
			require.Equal(s.t, c-i, res.Remaining, "charge %d of %d", i, c)
		}
		require.True(s.t, s.peek(k, l).Allowed, "check at the limit %s", s.at())
		over := s.charge(k, l, 1)
		require.False(s.t, over.Allowed, "charge past the limit %s", s.at())
		require.Zero(s.t, over.Remaining)
		require.Positive(s.t, over.ResetAfter)
		check := s.peek(k, l)
		s.denied(check, 0, over.ResetAfter, "check after the charge past the limit")
		require.False(s.t, s.take(k, l, 1).Allowed, "take after the charge past the limit %s", s.at())
	}
}

func chargeAboveCapacity(s *suite) {
	l := s.limit(10, time.Minute)
	k := s.key()
	res := s.charge(k, l, 25)
	require.False(s.t, res.Allowed, "25 of 10 %s", s.at())
	require.Zero(s.t, res.Remaining)
	require.Greater(s.t, res.ResetAfter, time.Duration(0))
	s.denied(s.peek(k, l), 0, res.ResetAfter, "check after 25 of 10")

	// A charge of 2^32−1 leaves the largest debt the limit takes, and
	// asks for no more of the backend than that.
	k = s.key()
	res = s.charge(k, l, math.MaxUint32)
	require.False(s.t, res.Allowed)
	again := s.charge(k, l, math.MaxUint32)
	s.denied(again, 0, res.ResetAfter, "a second charge past the bound")
	s.denied(s.peek(k, l), 0, res.ResetAfter, "check after the bound")

	// A limit of 0 pays nothing off, so it takes no debt.
	zero, k := s.limit(0, time.Minute), s.key()
	s.outcome(s.charge(k, zero, 3), false, 0, 0, "3 hits on a limit of 0")
	s.admitted(s.peek(k, zero), 0, 0, "check on a limit of 0")
}

// exactRetryAfterCharges drives random states through takes, charges (often
// past the limit, sometimes by several windows' worth) and time, and
// whenever a check (or a take) is denied, checks that waiting ResetAfter
// less one microsecond is not enough and waiting ResetAfter is.
func exactRetryAfterCharges(s *suite, take bool) {
	seed := uint64(21)
	if take {
		seed = 22
	}
	rng := rand.New(rand.NewPCG(seed, uint64(s.alg)))
	s.retryAfterIsExact(rng, 12, 1, func(k rate.Key, l algorithms.Limit) {
		if rng.IntN(3) == 0 {
			s.take(k, l, rng.Uint64N(l.Capacity()+1))
		} else {
			s.charge(k, l, chargeHits(rng, l))
		}
	}, func(c uint64) uint64 {
		if take {
			return 1 + rng.Uint64N(c)
		}
		return 0
	})
}

// chargeHits draws the hits of a charge: mostly within the capacity, often
// beyond it, now and then several windows' worth.
func chargeHits(rng *rand.Rand, l algorithms.Limit) uint64 {
	c := l.Capacity()
	switch rng.IntN(6) {
	case 0:
		return 0
	case 1:
		return c + 1 + rng.Uint64N(c)
	case 2:
		return c * (2 + rng.Uint64N(3))
	}
	return 1 + rng.Uint64N(c)
}

// replenishmentAfterCharges builds random states with charges and checks
// that once a check is admitted, its reset is exactly when the whole
// capacity is available again.
func replenishmentAfterCharges(s *suite) {
	rng := rand.New(rand.NewPCG(23, uint64(s.alg)))
	for range 20 {
		l, k := s.randomLimit(rng, 1), s.key()
		c := l.Capacity()
		for range 1 + rng.IntN(8) {
			s.wander(rng, l.Window)
			if rng.IntN(2) == 0 {
				s.take(k, l, rng.Uint64N(c+1))
			} else {
				s.charge(k, l, chargeHits(rng, l))
			}
		}
		s.wander(rng, l.Window)
		p := s.peek(k, l)
		if !p.Allowed {
			s.clock.Advance(p.ResetAfter)
			p = s.peek(k, l)
			require.True(s.t, p.Allowed, "check after its reset %s", s.at())
		}
		if p.ResetAfter > 0 {
			s.clock.Advance(p.ResetAfter - time.Microsecond)
			require.False(s.t, s.take(k, l, c).Allowed, "whole capacity 1µs before the %s reset %s", p.ResetAfter, s.at())
			s.clock.Advance(time.Microsecond)
		}
		s.admitted(s.take(k, l, c), 0, emptiedReset(l, s.clock.Now()), fmt.Sprintf("whole capacity after the %s reset", p.ResetAfter))
	}
}

func refundCharged(s *suite) {
	for _, l := range s.someLimits() {
		c := l.Capacity()
		k := s.key()
		extra := min(3, l.MaxDebt())
		require.False(s.t, s.charge(k, l, c+extra).Allowed, "charge of capacity+%d %s", extra, s.at())
		s.admitted(s.refund(k, l, extra, algorithms.Receipt{}), 0, emptiedReset(l, s.clock.Now()), "refund of the hits beyond")
		s.admitted(s.refund(k, l, c, algorithms.Receipt{}), c, 0, "refund of the rest")
	}
}

// chargeDebtBounded: a window-based limit of 1 per second takes at most
// min(2^32−1, ⌊MaxWindow/1s⌋) hits of debt (a log at most L), which its
// check waits for, and no more.
func chargeDebtBounded(s *suite) {
	l, k := s.limit(1, time.Second), s.key()
	res := s.charge(k, l, math.MaxUint32)
	require.False(s.t, res.Allowed)
	start := windowStart(s.clock.Now(), time.Second)
	var want time.Time
	switch s.alg {
	case algorithms.FixedWindow:
		// The count is 1 + D; window i + D starts at 1.
		want = start.Add(time.Duration(l.MaxDebt()) * time.Second)
	case algorithms.SlidingWindowCounter:
		// Window i + D starts at 1 after a window of 1: a check passes at
		// the start of window i + D + 1.
		want = start.Add(time.Duration(l.MaxDebt()+1) * time.Second)
	case algorithms.SlidingWindowLog:
		// 2L entries, all of now.
		want = s.clock.Now().Add(time.Second)
	case algorithms.TokenBucket:
		// From −D tokens to 0 at one a second, in whole slices of 1µs.
		want = s.clock.Now().Add(time.Duration(l.MaxDebt()) * time.Second)
	}
	s.denied(res, 0, want.Sub(s.clock.Now()), "charge of 2^32−1")
	if s.alg != algorithms.SlidingWindowLog {
		require.Equal(s.t, uint64(algorithms.MaxWindow/time.Second), l.MaxDebt(), "D")
	}
}
