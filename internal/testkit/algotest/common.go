package algotest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/rate"
)

// commonBehaviours are the properties every algorithm has.
func commonBehaviours() []behaviour {
	return []behaviour{
		{name: "admits exactly the limit then denies", run: admitsExactlyTheLimit},
		{name: "zero limit admits nothing", run: zeroLimit},
		{name: "peek consumes nothing", run: peekConsumesNothing},
		{name: "request above capacity is denied and consumes nothing", run: aboveCapacity},
		{name: "remaining counts down", run: remainingCountsDown},
		{name: "refund with receipt restores the state", run: refundWithReceipt},
		{name: "refund without receipt gives back the newest hits", run: refundWithoutReceipt},
		{name: "retry-after is exact for one hit", run: func(s *suite) { exactRetryAfter(s, false) }},
		{name: "retry-after is exact for several hits", run: func(s *suite) { exactRetryAfter(s, true) }},
		{name: "admitted reset is the wait until fully replenished", run: fullReplenishment},
		{name: "keys and windows are independent", run: keysAreIndependent},
		{name: "algorithms are independent", run: algorithmsAreIndependent},
		{name: "changed limit keeps the state", run: limitChangeKeepsState},
	}
}

// someLimits returns a few limits of the algorithm under test, with a burst
// above the rate for a token bucket.
func (s *suite) someLimits() []algorithms.Limit {
	ls := []algorithms.Limit{s.limit(1, time.Second), s.limit(7, time.Minute), s.limit(100, time.Second)}
	if s.alg == algorithms.TokenBucket {
		l := s.limit(5, 2*time.Second)
		l.Burst = 12
		ls = append(ls, l)
	}
	return ls
}

func admitsExactlyTheLimit(s *suite) {
	for _, l := range s.someLimits() {
		c := l.Capacity()
		k := s.key()
		for i := uint64(1); i <= c; i++ {
			res := s.take(k, l, 1)
			require.True(s.t, res.Allowed, "hit %d of %d", i, c)
			require.Equal(s.t, c-i, res.Remaining, "hit %d of %d", i, c)
		}
		s.denied(s.take(k, l, 1), 0, emptiedRetry(l, s.clock.Now(), 1), fmt.Sprintf("hit %d of %d", c+1, c))

		k = s.key()
		s.admitted(s.take(k, l, c), 0, emptiedReset(l, s.clock.Now()), "all hits at once")
		s.denied(s.take(k, l, 1), 0, emptiedRetry(l, s.clock.Now(), 1), "one more hit")
	}
}

func zeroLimit(s *suite) {
	for _, w := range []time.Duration{time.Second, time.Hour} {
		l, k := s.limit(0, w), s.key()
		s.denied(s.take(k, l, 1), 0, w, "one hit")
		s.denied(s.take(k, l, 5), 0, w, "five hits")
		s.admitted(s.peek(k, l), 0, 0, "peek")
	}
}

func peekConsumesNothing(s *suite) {
	for _, l := range s.someLimits() {
		c := l.Capacity()
		k := s.key()
		s.admitted(s.peek(k, l), c, 0, "peek at a new key")
		used := min(c, 3)
		require.True(s.t, s.take(k, l, used).Allowed)
		s.clock.Advance(123 * time.Microsecond)
		p := s.peek(k, l)
		require.True(s.t, p.Allowed, "peek %s", s.at())
		for range 3 {
			again := s.peek(k, l)
			require.Equal(s.t, p.Allowed, again.Allowed, "peek again %s", s.at())
			require.Equal(s.t, p.Remaining, again.Remaining, "peek again %s", s.at())
			require.Equal(s.t, p.ResetAfter, again.ResetAfter, "peek again %s", s.at())
		}
		// Exactly what the peeks reported is still there.
		require.True(s.t, s.take(k, l, p.Remaining).Allowed, "take what the peek reported %s", s.at())
		exhausted := s.peek(k, l)
		require.True(s.t, exhausted.Allowed, "peek at an exhausted key %s", s.at())
		require.Zero(s.t, exhausted.Remaining, "peek at an exhausted key %s", s.at())
		require.False(s.t, s.take(k, l, 1).Allowed, "take after exhausting %s", s.at())
	}
}

func aboveCapacity(s *suite) {
	limits := []algorithms.Limit{s.limit(10, time.Second), s.limit(10, time.Minute)}
	if s.alg == algorithms.TokenBucket {
		l := s.limit(4, time.Second)
		l.Burst = 9
		limits = append(limits, l)
	}
	for _, l := range limits {
		c := l.Capacity()
		k := s.key()
		s.denied(s.take(k, l, c+1), c, l.Window, "capacity+1 at a new key")
		s.denied(s.take(k, l, math.MaxUint32), c, l.Window, "2^32-1 hits at a new key")
		s.admitted(s.take(k, l, 4), c-4, freshReset(l, s.clock.Now(), 4), "4 hits")
		s.denied(s.take(k, l, c+1), c-4, l.Window, "capacity+1 after 4")
		s.admitted(s.take(k, l, c-4), 0, emptiedReset(l, s.clock.Now()), "the rest")
		s.denied(s.take(k, l, c+1), 0, l.Window, "capacity+1 when exhausted")
	}
}

func remainingCountsDown(s *suite) {
	l := s.limit(6, time.Second)
	k := s.key()
	for want := uint64(5); ; want-- {
		res := s.take(k, l, 1)
		require.True(s.t, res.Allowed)
		require.Equal(s.t, want, res.Remaining)
		if want == 0 {
			break
		}
	}
	s.denied(s.take(k, l, 1), 0, emptiedRetry(l, s.clock.Now(), 1), "seventh hit")

	k = s.key()
	for _, want := range []uint64{4, 2, 0} {
		res := s.take(k, l, 2)
		require.True(s.t, res.Allowed)
		require.Equal(s.t, want, res.Remaining)
	}
	s.denied(s.take(k, l, 2), 0, emptiedRetry(l, s.clock.Now(), 2), "two more hits")
}

// refundWithReceipt builds random states, then takes hits and gives them
// back with the receipt at the same instant: the state must be exactly as
// before the Take, and remaining must mean what it says.
func refundWithReceipt(s *suite) {
	rng := rand.New(rand.NewPCG(11, uint64(s.alg)))
	for iter := 0; iter < 12; iter++ {
		l, k := s.randomLimit(rng, 1), s.key()
		for range 1 + rng.IntN(8) {
			s.wander(rng, l.Window)
			s.take(k, l, rng.Uint64N(l.Capacity()+1))
		}
		s.wander(rng, l.Window)
		before := s.peek(k, l)
		require.True(s.t, before.Allowed, "peek %s", s.at())
		if before.Remaining == 0 {
			s.clock.Advance(before.ResetAfter)
			before = s.peek(k, l)
		}
		n := 1 + rng.Uint64N(before.Remaining)
		taken := s.take(k, l, n)
		require.True(s.t, taken.Allowed, "take %d of %d remaining %s", n, before.Remaining, s.at())
		require.Equal(s.t, before.Remaining-n, taken.Remaining)
		s.admitted(s.refund(k, l, n, taken.Receipt), before.Remaining, before.ResetAfter, fmt.Sprintf("refund of %d with receipt", n))
		s.admitted(s.peek(k, l), before.Remaining, before.ResetAfter, "peek after the refund")

		// Part of a Take given back with its receipt.
		if n >= 2 {
			taken = s.take(k, l, n)
			require.True(s.t, taken.Allowed)
			require.Equal(s.t, before.Remaining-n+1, s.refund(k, l, 1, taken.Receipt).Remaining, "refund of 1 of %d %s", n, s.at())
			s.admitted(s.refund(k, l, n-1, algorithms.Receipt{}), before.Remaining, before.ResetAfter, "refund of the rest")
		}

		// Remaining is exactly how many more hits are admitted.
		if before.Remaining < l.Capacity() {
			require.False(s.t, s.take(k, l, before.Remaining+1).Allowed, "remaining+1 %s", s.at())
		}
		require.True(s.t, s.take(k, l, before.Remaining).Allowed, "remaining %s", s.at())
	}
}

func refundWithoutReceipt(s *suite) {
	for _, l := range s.someLimits() {
		c := l.Capacity()
		if c < 5 {
			continue
		}
		k := s.key()
		s.admitted(s.refund(k, l, 3, algorithms.Receipt{}), c, 0, "refund at a new key")
		reset3 := freshReset(l, s.clock.Now(), 3)
		s.admitted(s.take(k, l, 3), c-3, reset3, "3 hits after the refund")
		require.True(s.t, s.take(k, l, 2).Allowed)
		res := s.refund(k, l, 2, algorithms.Receipt{})
		s.admitted(res, c-3, reset3, "refund of the newest 2")
		require.Zero(s.t, res.Receipt, "a refund has no receipt")
		s.admitted(s.refund(k, l, 10, algorithms.Receipt{}), c, 0, "refund of more than was taken")
		s.admitted(s.take(k, l, c), 0, emptiedReset(l, s.clock.Now()), "the whole capacity after the refunds")
		require.False(s.t, s.take(k, l, 1).Allowed, "one more %s", s.at())
	}
}

// exactRetryAfter drives random states until a request is denied, then
// checks that waiting ResetAfter less one microsecond is not enough and
// waiting ResetAfter is.
func exactRetryAfter(s *suite, several bool) {
	seed, minCap := uint64(1), uint64(1)
	if several {
		seed, minCap = 2, 2
	}
	rng := rand.New(rand.NewPCG(seed, uint64(s.alg)))
	s.retryAfterIsExact(rng, 20, minCap, func(k rate.Key, l algorithms.Limit) {
		s.take(k, l, rng.Uint64N(l.Capacity()+1))
	}, func(c uint64) uint64 {
		if several {
			return 2 + rng.Uint64N(c-1)
		}
		return 1
	})
}

// retryAfterIsExact drives keys random states, moving the clock and calling
// drive, until a take of hits(capacity) hits is denied, then checks that
// waiting ResetAfter less one microsecond is not enough and waiting
// ResetAfter is; three times a key.
func (s *suite) retryAfterIsExact(rng *rand.Rand, keys int, minCap uint64, drive func(rate.Key, algorithms.Limit), hits func(capacity uint64) uint64) {
	const checksPerKey = 3
	checked := 0
	for range keys {
		l, k := s.randomLimit(rng, minCap), s.key()
		for step, checks := 0, 0; step < 200 && checks < checksPerKey; step++ {
			s.wander(rng, l.Window)
			drive(k, l)
			n := hits(l.Capacity())
			res := s.take(k, l, n)
			if res.Allowed {
				continue
			}
			what := fmt.Sprintf("%d of %d per %s (burst %d)", n, l.Requests, l.Window, l.Burst)
			require.Positive(s.t, res.ResetAfter, "%s: denied %s", what, s.at())
			s.clock.Advance(res.ResetAfter - time.Microsecond)
			again := s.take(k, l, n)
			require.False(s.t, again.Allowed, "%s: retried 1µs before the %s reset, %s", what, res.ResetAfter, s.at())
			require.Equal(s.t, time.Microsecond, again.ResetAfter, "%s: reset 1µs before the %s reset, %s", what, res.ResetAfter, s.at())
			s.clock.Advance(time.Microsecond)
			require.True(s.t, s.take(k, l, n).Allowed, "%s: retried after the %s reset, %s", what, res.ResetAfter, s.at())
			checks++
			checked++
		}
	}
	require.Equal(s.t, keys*checksPerKey, checked, "denials reached")
}

// fullReplenishment builds random states and checks that an admitted
// request's reset is exactly when the whole capacity is available again.
func fullReplenishment(s *suite) {
	rng := rand.New(rand.NewPCG(3, uint64(s.alg)))
	for range 30 {
		l, k := s.randomLimit(rng, 1), s.key()
		c := l.Capacity()
		for range 1 + rng.IntN(12) {
			s.wander(rng, l.Window)
			s.take(k, l, rng.Uint64N(c+1))
		}
		s.wander(rng, l.Window)
		p := s.peek(k, l)
		require.True(s.t, p.Allowed, "peek %s", s.at())
		if p.ResetAfter > 0 {
			s.clock.Advance(p.ResetAfter - time.Microsecond)
			require.False(s.t, s.take(k, l, c).Allowed, "whole capacity 1µs before the %s reset %s", p.ResetAfter, s.at())
			s.clock.Advance(time.Microsecond)
		}
		s.admitted(s.take(k, l, c), 0, emptiedReset(l, s.clock.Now()), fmt.Sprintf("whole capacity after the %s reset", p.ResetAfter))
	}
}

func keysAreIndependent(s *suite) {
	long := strings.Repeat("v", 300)
	d := s.domain
	e := func(kv ...string) []rate.Entry {
		var es []rate.Entry
		for i := 0; i < len(kv); i += 2 {
			es = append(es, rate.Entry{Key: kv[i], Value: kv[i+1]})
		}
		return es
	}
	keys := []rate.Key{
		{Domain: d, Entries: e("k", "v")},
		{Domain: d, Entries: e("k", "w")},
		{Domain: d, Entries: e("k2", "v")},
		{Domain: d, Entries: e("k", "v", "k2", "v2")},
		{Domain: d, Entries: e("k2", "v2", "k", "v")},
		{Domain: d, Entries: e("k", "v|k2=v2")},
		{Domain: d, Entries: e("k=v", "")},
		{Domain: d, Entries: e("k", "v:1")},
		{Domain: d, Entries: e("k", "{v}")},
		{Domain: d, Entries: e("k", "%7Bv%7D")},
		{Domain: d, Entries: e("k", long)},
		{Domain: d, Entries: e("k", long+"w")},
		{Domain: d, Entries: e("k", "")},
		{Domain: d},
		{Domain: d + "|k=v"},
		{Domain: d + "/other", Entries: e("k", "v")},
	}
	l := s.limit(3, time.Second)
	for i, k := range keys {
		require.True(s.t, s.take(k, l, 3).Allowed, "exhaust key %d", i)
		for j := i + 1; j < len(keys); j++ {
			s.admitted(s.peek(keys[j], l), 3, 0, fmt.Sprintf("key %d after exhausting key %d", j, i))
		}
	}
	for _, w := range []time.Duration{2 * time.Second, time.Minute} {
		s.admitted(s.peek(keys[0], s.limit(3, w)), 3, 0, fmt.Sprintf("window %s after exhausting 1s", w))
	}
}

func algorithmsAreIndependent(s *suite) {
	k := s.key()
	l := s.limit(4, time.Second)
	require.True(s.t, s.take(k, l, 4).Allowed)
	require.False(s.t, s.take(k, l, 1).Allowed)
	for _, a := range algorithms.Algorithms {
		if a == s.alg {
			continue
		}
		other := algorithms.Limit{Algorithm: a, Requests: 4, Window: time.Second}
		s.admitted(s.peek(k, other), 4, 0, "same key under "+a.String())
	}
}

func limitChangeKeepsState(s *suite) {
	k := s.key()
	l := s.limit(10, time.Second)
	s.admitted(s.take(k, l, 4), 6, freshReset(l, s.clock.Now(), 4), "4 of 10")

	// Windows count hits, so a larger limit leaves more room; a bucket
	// counts tokens, which a larger limit leaves as they are.
	raised := s.limit(20, time.Second)
	want := uint64(16)
	if s.alg == algorithms.TokenBucket {
		want = 6
	}
	p := s.peek(k, raised)
	require.True(s.t, p.Allowed)
	require.Equal(s.t, want, p.Remaining, "remaining under the raised limit")
	require.True(s.t, s.take(k, raised, want).Allowed, "take what the raised limit leaves")
	require.False(s.t, s.take(k, raised, 1).Allowed, "one more under the raised limit")

	if s.alg != algorithms.TokenBucket {
		lowered := s.limit(3, time.Second)
		res := s.peek(k, lowered)
		require.False(s.t, res.Allowed, "peek over the lowered limit")
		require.Zero(s.t, res.Remaining, "remaining under the lowered limit")
	}
}
