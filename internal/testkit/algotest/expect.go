package algotest

import (
	"math/rand/v2"
	"time"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

// emptiedReset returns the reset the documentation gives for an admitted
// Take that empties a new state of limit l at now.
func emptiedReset(l algorithms.Limit, now time.Time) time.Duration {
	return freshReset(l, now, l.Capacity())
}

// freshReset returns the reset the documentation gives for an admitted Take
// of n > 0 hits from a new state of limit l at now.
func freshReset(l algorithms.Limit, now time.Time, n uint64) time.Duration {
	t, w := now.UnixMicro(), l.WindowMicros()
	switch l.Algorithm {
	case algorithms.FixedWindow:
		return us(w - t%w)
	case algorithms.SlidingWindowLog:
		return l.Window
	case algorithms.SlidingWindowCounter:
		return us(2*w - t%w)
	default:
		q := l.SliceMicros()
		return us((t/q+ceil(n*algorithms.SlicesPerWindow, l.Requests))*q - t)
	}
}

// emptiedRetry returns the reset the documentation gives for a Take of n
// hits (0 < n ≤ capacity) denied at now by a state emptied at now from new.
func emptiedRetry(l algorithms.Limit, now time.Time, n uint64) time.Duration {
	t, w := now.UnixMicro(), l.WindowMicros()
	const S = algorithms.SlicesPerWindow
	switch l.Algorithm {
	case algorithms.FixedWindow:
		return us(w - t%w)
	case algorithms.SlidingWindowLog:
		return l.Window
	case algorithms.SlidingWindowCounter:
		L := l.Requests
		slice := int64(S - (L-n)*S/L)
		return us(w - t%w + slice*l.SliceMicros())
	default:
		q := l.SliceMicros()
		return us((t/q+ceil(n*S, l.Requests))*q - t)
	}
}

func ceil(a, b uint64) int64 { return int64((a + b - 1) / b) }

// randomLimit returns a limit of the algorithm under test with a capacity of
// at least minCap and at most minCap+11 (more with a token bucket's burst),
// over a window of one second to one hour.
func (s *suite) randomLimit(rng *rand.Rand, minCap uint64) algorithms.Limit {
	windows := []time.Duration{time.Second, 7 * time.Second, time.Minute, time.Hour}
	l := s.limit(minCap+rng.Uint64N(12), windows[rng.IntN(len(windows))])
	if l.Algorithm == algorithms.TokenBucket && rng.IntN(2) == 0 {
		l.Burst = l.Requests + rng.Uint64N(2*l.Requests+1)
	}
	return l
}

// wander moves the clock forward by a random step for window w: none, a few
// microseconds, a few slices, part of the window, more than the window, or
// exactly to the next window boundary or the microsecond before it.
func (s *suite) wander(rng *rand.Rand, w time.Duration) {
	wu := w.Microseconds()
	next := windowStart(s.clock.Now(), w).Add(w)
	switch rng.IntN(8) {
	case 0:
	case 1:
		s.clock.Advance(us(1 + rng.Int64N(3)))
	case 2:
		s.clock.Advance(us(rng.Int64N(3*wu/algorithms.SlicesPerWindow + 1)))
	case 3, 4:
		s.clock.Advance(us(rng.Int64N(wu / 4)))
	case 5:
		s.clock.Advance(us(rng.Int64N(2 * wu)))
	case 6:
		s.clock.Set(next)
	case 7:
		s.clock.Set(next.Add(-time.Microsecond))
	}
}
