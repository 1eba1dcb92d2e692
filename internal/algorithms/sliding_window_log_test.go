package algorithms_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

func TestSlidingWindowLogSteps(t *testing.T) {
	const us, ms = time.Microsecond, time.Millisecond
	runSteps(t, []stepCase{
		{
			name:  "three per second",
			limit: algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: 3, Window: time.Second},
			steps: []step{
				{at: 0, n: 0, allowed: true, remaining: 3, reset: 0},
				{at: 0, n: 2, allowed: true, remaining: 1, reset: time.Second},
				{at: 400 * ms, n: 1, allowed: true, remaining: 0, reset: time.Second},
				// k = 3 + 2 − 3 = 2: the second oldest entry, logged at 0.
				{at: 400 * ms, n: 2, allowed: false, remaining: 0, reset: 600 * ms},
				{at: time.Second - us, n: 1, allowed: false, remaining: 0, reset: us},
				// Entries with ts ≤ now − W are gone: both of t0.
				{at: time.Second, n: 2, allowed: true, remaining: 0, reset: time.Second},
				{at: time.Second, n: 1, allowed: false, remaining: 0, reset: 400 * ms},
				{at: 1100 * ms, n: 1, refund: true, receipt: 6, allowed: true, remaining: 1, reset: 900 * ms},
				{at: 1100 * ms, n: 1, refund: true, allowed: true, remaining: 2, reset: 300 * ms},
				{at: 1400 * ms, n: 0, allowed: true, remaining: 3, reset: 0},
				{at: 1400 * ms, n: 4, allowed: false, remaining: 3, reset: time.Second},
			},
		},
		{
			name:  "receipts name their own entries",
			limit: algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: 10, Window: time.Minute},
			steps: []step{
				{at: 0, n: 3, allowed: true, remaining: 7, reset: time.Minute},
				{at: 0, n: 4, allowed: true, remaining: 3, reset: time.Minute},
				{at: 10 * time.Second, n: 2, allowed: true, remaining: 1, reset: time.Minute},
				// The middle entry of the second Take: its run splits.
				{at: 20 * time.Second, n: 1, refund: true, receipt: 2, allowed: true, remaining: 2, reset: 50 * time.Second},
				{at: 20 * time.Second, n: 4, refund: true, receipt: 2, allowed: true, remaining: 5, reset: 50 * time.Second},
				{at: 20 * time.Second, n: 4, refund: true, receipt: 2, allowed: true, remaining: 5, reset: 50 * time.Second},
				{at: 20 * time.Second, n: 2, refund: true, receipt: 3, allowed: true, remaining: 7, reset: 40 * time.Second},
				{at: 20 * time.Second, n: 8, allowed: false, remaining: 7, reset: 40 * time.Second},
				{at: 20 * time.Second, n: 1, refund: true, receipt: 1, allowed: true, remaining: 8, reset: 40 * time.Second},
				{at: time.Minute, n: 10, allowed: true, remaining: 0, reset: time.Minute},
			},
		},
		{
			name:  "a lease's hits are logged at its end",
			limit: algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: 5, Window: time.Second},
			steps: []step{
				// Entries (50ms, 1 … 3): the newest is 50ms ahead.
				{at: 0, n: 3, hold: 50 * ms, allowed: true, remaining: 2, reset: 1050 * ms},
				// (0, 4) and (0, 5) go before them: the log is ordered by
				// time, then sequence number.
				{at: 0, n: 2, allowed: true, remaining: 0, reset: 1050 * ms},
				{at: 10 * ms, n: 1, allowed: false, remaining: 0, reset: 990 * ms},
				// The third oldest is the lease's first, logged at 50ms.
				{at: 10 * ms, n: 3, allowed: false, remaining: 0, reset: 1040 * ms},
				// The take's entries have left; the lease's still count.
				{at: time.Second, n: 2, allowed: true, remaining: 0, reset: time.Second},
				{at: 1050*ms - us, n: 1, allowed: false, remaining: 0, reset: us},
				{at: 1050 * ms, n: 3, allowed: true, remaining: 0, reset: time.Second},
			},
		},
		{
			name:  "a lease's give-back removes its entries",
			limit: algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: 10, Window: time.Minute},
			steps: []step{
				// (1s, 1 … 4)
				{at: 0, n: 4, hold: time.Second, allowed: true, remaining: 6, reset: 61 * time.Second},
				// (1.5s, 5 … 7)
				{at: 500 * ms, n: 3, hold: time.Second, allowed: true, remaining: 3, reset: 61 * time.Second},
				// (0.6s, 8), (0.6s, 9), before both leases'.
				{at: 600 * ms, n: 2, allowed: true, remaining: 1, reset: 60900 * ms},
				// The first lease gives back 3 by its receipt: (1s, 1 … 3).
				{at: 700 * ms, n: 3, refund: true, hold: time.Second, receipt: 1, allowed: true, remaining: 4, reset: 60800 * ms},
				// Without a receipt, the newest logged by now go: (0.6s, 9)
				// and (0.6s, 8). The leases' are logged ahead, at their ends.
				{at: 700 * ms, n: 2, refund: true, allowed: true, remaining: 6, reset: 60800 * ms},
				// Nothing logged by now is left: the leases' entries stay
				// theirs, and their holders may still serve them.
				{at: 700 * ms, n: 3, refund: true, allowed: true, remaining: 6, reset: 60800 * ms},
				// The receipt's entries are gone: nothing more goes.
				{at: 700 * ms, n: 3, refund: true, receipt: 1, allowed: true, remaining: 6, reset: 60800 * ms},
			},
		},
		{
			name:  "most entries over a year",
			limit: algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: algorithms.MaxLogRequests, Window: year},
			steps: []step{
				{at: 0, n: algorithms.MaxLogRequests, allowed: true, remaining: 0, reset: year},
				{at: day, n: 1, allowed: false, remaining: 0, reset: year - day},
				{at: year - us, n: algorithms.MaxLogRequests, allowed: false, remaining: 0, reset: us},
				{at: year, n: algorithms.MaxLogRequests, allowed: true, remaining: 0, reset: year},
				{at: year, n: 99_999, refund: true, allowed: true, remaining: 99_999, reset: year},
			},
		},
	})
}

// TestSlidingWindowLogManyTakes logs one entry per Take at distinct times,
// the worst case for the deque, and checks that entries leave in order.
func TestSlidingWindowLogManyTakes(t *testing.T) {
	const L = algorithms.MaxLogRequests
	l := algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: L, Window: time.Second}
	var s algorithms.SlidingWindowLogState
	for i := range L {
		require.True(t, s.Take(l, t0.Add(time.Duration(i)*time.Microsecond), 1).Allowed)
	}
	last := t0.Add((L - 1) * time.Microsecond)
	res := s.Take(l, last, 1)
	require.False(t, res.Allowed)
	require.Equal(t, time.Second-(L-1)*time.Microsecond, res.ResetAfter)
	// 1000 hits wait for the 1000th oldest entry.
	res = s.Take(l, last, 1000)
	require.Equal(t, time.Second-(L-1000)*time.Microsecond, res.ResetAfter)
	// Then one hit every 10µs, exactly the rate L per W, for three windows:
	// every one fits as the oldest leaves.
	for i := range 3 * L {
		now := t0.Add(time.Second + time.Duration(10*i)*time.Microsecond)
		res := s.Take(l, now, 1)
		require.True(t, res.Allowed, "take %d", i)
		if i >= L {
			require.Zero(t, res.Remaining, "take %d", i)
			require.Equal(t, time.Second, res.ResetAfter, "take %d", i)
		}
	}
	require.False(t, s.Take(l, t0.Add(time.Second+time.Duration(30*L-1)*time.Microsecond), 1).Allowed)
}
