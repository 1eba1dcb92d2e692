package algorithms_test

import (
	"testing"
	"time"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

func TestSlidingWindowCounterSteps(t *testing.T) {
	const us, ms = time.Microsecond, time.Millisecond
	b := untilBoundary(time.Second) // 876544µs
	runSteps(t, []stepCase{
		{
			name:  "ten per second",
			limit: algorithms.Limit{Algorithm: algorithms.SlidingWindowCounter, Requests: 10, Window: time.Second},
			steps: []step{
				{at: 0, n: 0, allowed: true, remaining: 10, reset: 0},
				{at: 0, n: 10, allowed: true, remaining: 0, reset: b + time.Second},
				// cur + n > L: slice S − ⌊9·S/10⌋ = 100000 of the next window.
				{at: 0, n: 1, allowed: false, remaining: 0, reset: b + 100*ms},
				// 250ms in: prev weighs 10·750000/10^6 = 7.5.
				{at: b + 250*ms, n: 0, allowed: true, remaining: 2, reset: 750 * ms},
				{at: b + 250*ms, n: 3, allowed: false, remaining: 2, reset: 50 * ms},
				// The zero Receipt takes from cur, then from prev.
				{at: b + 250*ms, n: 5, refund: true, allowed: true, remaining: 6, reset: 750 * ms},
				{at: b + 250*ms, n: 6, allowed: true, remaining: 0, reset: 1750 * ms},
				// A receipt from the previous window gives back to prev.
				{at: b + 250*ms, n: 2, refund: true, receipt: 2, allowed: true, remaining: 1, reset: 1750 * ms},
				// Two windows on, cur = 6 is prev: at slice 100000 it weighs 5.4.
				{at: b + 1100*ms, n: 5, allowed: false, remaining: 4, reset: 66667 * us},
				{at: b + 1100*ms, n: 4, allowed: true, remaining: 0, reset: 1900 * ms},
				// A receipt two windows old gives nothing back.
				{at: b + 1100*ms, n: 4, refund: true, receipt: 2, allowed: true, remaining: 0, reset: 1900 * ms},
				{at: b + 1100*ms, n: 4, refund: true, receipt: 10, allowed: true, remaining: 4, reset: 900 * ms},
				{at: b + 3*time.Second, n: 0, allowed: true, remaining: 10, reset: 0},
			},
		},
		{
			name:  "zero receipt takes from prev once cur is empty",
			limit: algorithms.Limit{Algorithm: algorithms.SlidingWindowCounter, Requests: 10, Window: time.Second},
			steps: []step{
				{at: 0, n: 8, allowed: true, remaining: 2, reset: b + time.Second},
				{at: b, n: 2, allowed: true, remaining: 0, reset: 2 * time.Second},
				{at: b, n: 5, refund: true, allowed: true, remaining: 5, reset: time.Second},
				{at: b, n: 20, refund: true, allowed: true, remaining: 10, reset: 0},
			},
		},
		{
			name:  "clock going back stays in the newest window",
			limit: algorithms.Limit{Algorithm: algorithms.SlidingWindowCounter, Requests: 4, Window: time.Second},
			steps: []step{
				{at: b + 10*ms, n: 4, allowed: true, remaining: 0, reset: 1990 * ms},
				// Back into the previous window: still window i, slice 0.
				{at: b - 10*ms, n: 1, allowed: false, remaining: 0, reset: 10*ms + time.Second + 250*ms},
				{at: b - 10*ms, n: 1, refund: true, allowed: true, remaining: 1, reset: 2010 * ms},
			},
		},
		{
			name:  "changed limit",
			limit: algorithms.Limit{Algorithm: algorithms.SlidingWindowCounter, Requests: 10, Window: time.Second},
			steps: []step{
				{at: 0, n: 6, allowed: true, remaining: 4, reset: b + time.Second},
				// cur > L: slice S − ⌊4·S/6⌋ = 333334 of the next window.
				{at: 0, n: 0, limit: lim(algorithms.SlidingWindowCounter, 4, time.Second, 0), allowed: false, remaining: 0, reset: b + 333334*us},
				{at: 0, n: 0, limit: lim(algorithms.SlidingWindowCounter, 20, time.Second, 0), allowed: true, remaining: 14, reset: b + time.Second},
			},
		},
	})
}
