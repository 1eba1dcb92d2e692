package lease

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestBackendClockBoundsTheBackendsTime: calls to a backend whose clock is
// theta ahead, each decided somewhere between its send and its answer; the
// clock's bounds of the backend's time always hold it, the upper no
// earlier and the lower no later, and neither is further from it than a
// round trip; the estimate answers are given at is within the bounds, and
// off by no more than half the quickest round trip of the calls noted in
// the last second.
func TestBackendClockBoundsTheBackendsTime(t *testing.T) {
	rng := rand.New(rand.NewPCG(26, 1))
	for _, theta := range []time.Duration{0, 3 * time.Millisecond, -40 * time.Millisecond} {
		var c backendClock
		now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
		slowest := time.Duration(0)
		var recent []time.Time // when each call of the last second ended
		var rtts []time.Duration
		for range 2000 {
			sent := now
			rtt := time.Duration(50+rng.Int64N(5000)) * time.Microsecond
			received := sent.Add(rtt)
			decided := sent.Add(time.Duration(rng.Int64N(int64(rtt) + 1)))
			c.note(sent, received, decided.Add(theta).UnixMicro())
			slowest = max(slowest, rtt)
			recent, rtts = append(recent, received), append(rtts, rtt)
			now = received.Add(time.Duration(rng.Int64N(300)) * time.Microsecond)

			at := now.Add(time.Duration(rng.Int64N(1000)) * time.Microsecond)
			hi, lo := c.read(at)
			truth := at.Add(theta).UnixMicro()
			require.GreaterOrEqual(t, hi, truth, "the upper bound is never earlier")
			require.LessOrEqual(t, lo, truth, "the lower bound is never later")
			require.LessOrEqual(t, hi-lo, 2*slowest.Microseconds(), "theta %s", theta)
			est := c.estimate(at)
			require.GreaterOrEqual(t, est, lo, "the estimate is within the bounds")
			require.LessOrEqual(t, est, hi, "the estimate is within the bounds")
			quickest := slowest
			for i, end := range recent {
				if received.Sub(end) < clockWindow-clockWindow/clockSlices {
					quickest = min(quickest, rtts[i])
				}
			}
			require.LessOrEqual(t, abs(est-truth), quickest.Microseconds()/2+1, "the estimate is off by at most half the quickest recent round trip")
		}
	}
}

func abs(n int64) int64 { return max(n, -n) }
