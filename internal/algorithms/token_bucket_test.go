package algorithms_test

import (
	"math"
	"testing"
	"time"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

func TestTokenBucketSteps(t *testing.T) {
	const us, ms = time.Microsecond, time.Millisecond
	// t0 + sec starts a second, so the ends of leases below fall on their
	// slots unless they say otherwise.
	sec := time.Duration(1_000_000-t0.UnixMicro()%1_000_000) * us
	// t0 is 36µs into a slice of a one-minute window (60µs slices).
	qYear := year / algorithms.SlicesPerWindow
	intoYearSlice := time.Duration(t0.UnixMicro()%qYear.Microseconds()) * us
	runSteps(t, []stepCase{
		{
			name:  "ten per second, burst twenty",
			limit: algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Window: time.Second, Burst: 20},
			steps: []step{
				{at: 0, n: 0, allowed: true, remaining: 20, reset: 0},
				{at: 0, n: 20, allowed: true, remaining: 0, reset: 2 * time.Second},
				{at: 0, n: 1, allowed: false, remaining: 0, reset: 100 * ms},
				{at: 50 * ms, n: 0, allowed: true, remaining: 0, reset: 1950 * ms},
				{at: 50 * ms, n: 3, refund: true, allowed: true, remaining: 3, reset: 1650 * ms},
				{at: 50 * ms, n: 4, allowed: false, remaining: 3, reset: 50 * ms},
				{at: 100*ms - us, n: 4, allowed: false, remaining: 3, reset: us},
				{at: 100 * ms, n: 4, allowed: true, remaining: 0, reset: 2 * time.Second},
				{at: 10 * time.Second, n: 0, allowed: true, remaining: 20, reset: 0},
				{at: 10 * time.Second, n: 21, allowed: false, remaining: 20, reset: time.Second},
				{at: 10 * time.Second, n: 5, refund: true, allowed: true, remaining: 20, reset: 0},
				{at: 10 * time.Second, n: math.MaxUint32, refund: true, allowed: true, remaining: 20, reset: 0},
			},
		},
		{
			name:  "six per minute refill in slices",
			limit: algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 6, Window: time.Minute},
			steps: []step{
				{at: 0, n: 6, allowed: true, remaining: 0, reset: time.Minute - 36*us},
				// ⌈10^6/6⌉ = 166667 slices of 60µs.
				{at: 0, n: 1, allowed: false, remaining: 0, reset: 166667*60*us - 36*us},
				{at: 166667*60*us - 37*us, n: 1, allowed: false, remaining: 0, reset: us},
				{at: 166667*60*us - 36*us, n: 1, allowed: true, remaining: 0, reset: time.Minute},
			},
		},
		{
			name:  "most tokens per year",
			limit: algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: math.MaxUint32, Window: year, Burst: math.MaxUint32},
			steps: []step{
				{at: 0, n: math.MaxUint32, allowed: true, remaining: 0, reset: year - intoYearSlice},
				{at: 0, n: 1, allowed: false, remaining: 0, reset: qYear - intoYearSlice},
				// Half a year is 500000 slices: half the bucket.
				{at: year / 2, n: 0, allowed: true, remaining: math.MaxUint32 / 2, reset: year/2 - intoYearSlice},
			},
		},
		{
			name:  "one per year with a burst of ten",
			limit: algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 1, Window: year, Burst: 10},
			steps: []step{
				{at: 0, n: 10, allowed: true, remaining: 0, reset: 10*year - intoYearSlice},
				{at: 0, n: 1, allowed: false, remaining: 0, reset: year - intoYearSlice},
			},
		},
		{
			name:  "a lower burst cuts the level",
			limit: algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Window: time.Second, Burst: 20},
			steps: []step{
				{at: 0, n: 5, allowed: true, remaining: 15, reset: 500 * ms},
				{at: 0, n: 0, limit: lim(algorithms.TokenBucket, 10, time.Second, 8), allowed: true, remaining: 8, reset: 0},
				{at: 0, n: 1, allowed: true, remaining: 7, reset: 100 * ms},
				{at: 0, n: 0, limit: lim(algorithms.TokenBucket, 10, time.Second, 20), allowed: true, remaining: 7, reset: 1300 * ms},
			},
		},
		{
			// Without the hold, the bucket would be full again at 600ms,
			// and admit 10 tokens while the lease may still serve its 5.
			name:  "a lease's tokens are held until its end",
			limit: algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Window: time.Second},
			steps: []step{
				// H = 5 until 800ms (a multiple of the slot, 100ms): the
				// refill stops at C − H = 5 until the slice before, and
				// fills the rest from there.
				{at: sec, n: 5, hold: 800 * ms, allowed: true, remaining: 5, reset: 1300*ms - us},
				{at: sec + 600*ms, n: 0, allowed: true, remaining: 5, reset: 700*ms - us},
				{at: sec + 600*ms, n: 10, allowed: false, remaining: 5, reset: 700*ms - us},
				// 199999 slices of 10 millionths until the slice before
				// the end: 1999990, then ⌈(10^7 − 1999990)/10⌉ = 800001
				// slices.
				{at: sec + 600*ms, n: 5, allowed: true, remaining: 0, reset: time.Second},
				{at: sec + 800*ms - us, n: 2, allowed: false, remaining: 1, reset: us},
				// At the end the hold ends: 2000000 millionths, capped at C.
				{at: sec + 800*ms, n: 2, allowed: true, remaining: 0, reset: time.Second},
			},
		},
		{
			name:  "a lease's end is rounded up to an eighth of its hold",
			limit: algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 1000, Window: time.Second, Burst: 10},
			steps: []step{
				// Held until 56.25ms, the multiple of 6.25ms after 51ms.
				{at: sec + ms, n: 10, hold: 50 * ms, allowed: true, remaining: 0, reset: 65250*us - us},
				// A token a millisecond from the slice before it.
				{at: sec + 56250*us - us, n: 1, allowed: false, remaining: 0, reset: ms},
				{at: sec + 56250*us, n: 1, allowed: false, remaining: 0, reset: ms - us},
			},
		},
		{
			name:  "a lease's settlement ends its hold",
			limit: algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Window: time.Second},
			steps: []step{
				{at: sec, n: 10, hold: 50 * ms, allowed: true, remaining: 0, reset: 1050*ms - us},
				// H = 6: the 4 go back up to C − H = 4.
				{at: sec + 10*ms, n: 4, refund: true, hold: 50 * ms, receipt: 1, allowed: true, remaining: 4, reset: 640*ms - us},
				// A refund adds up to C − H too.
				{at: sec + 10*ms, n: 4, refund: true, allowed: true, remaining: 4, reset: 640*ms - us},
				// H = 0: the bucket may be full.
				{at: sec + 10*ms, n: 6, refund: true, hold: 50 * ms, receipt: 1, allowed: true, remaining: 10, reset: 0},
				// H = 10 until 75ms, 70ms rounded up to 6.25ms.
				{at: sec + 20*ms, n: 10, hold: 50 * ms, allowed: true, remaining: 0, reset: 1055*ms - us},
				// A settlement without the lease's receipt names no lease of
				// this bucket: it changes nothing.
				{at: sec + 30*ms, n: 5, refund: true, hold: 50 * ms, allowed: true, remaining: 0, reset: 1045*ms - us},
				// Once the lease has ended, so has its hold: 25001 slices
				// of refill since the slice before 75ms, and nothing back,
				// as its tokens were given up when the hold ended.
				{at: sec + 100*ms, n: 6, refund: true, hold: 50 * ms, receipt: 5, allowed: true, remaining: 0, reset: 975*ms - us},
			},
		},
		{
			// Were it to take its tokens from H, the bucket would give
			// them out while the second lease may still serve all of its.
			name:  "an ended lease gives back into the bucket, not out of a later lease's hold",
			limit: algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Window: time.Second},
			steps: []step{
				{at: sec, n: 5, hold: 50 * ms, allowed: true, remaining: 5, reset: 550*ms - us},
				{at: sec + 600*ms, n: 0, allowed: true, remaining: 10, reset: 0},
				{at: sec + 600*ms, n: 10, hold: 50 * ms, allowed: true, remaining: 0, reset: 1050*ms - us},
				{at: sec + 610*ms, n: 5, refund: true, hold: 50 * ms, receipt: 1, allowed: true, remaining: 0, reset: 1040*ms - us},
			},
		},
		{
			// Held with the second until it ends, the first lease's
			// tokens would leave the bucket at 0 until 90ms.
			name:  "leases that end apart are held apart",
			limit: algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 1000, Window: time.Second, Burst: 10},
			steps: []step{
				// 5 held until 50ms: 5 tokens, one a millisecond, after it.
				{at: sec, n: 5, hold: 50 * ms, allowed: true, remaining: 5, reset: 55*ms - us},
				// 5 more until 93.75ms: the refill stops at 0 until the
				// first lease ends, at 5 until the second does.
				{at: sec + 40*ms, n: 5, hold: 50 * ms, allowed: true, remaining: 0, reset: 58750*us - us},
				{at: sec + 60*ms, n: 0, allowed: true, remaining: 5, reset: 38750*us - us},
				{at: sec + 60*ms, n: 6, allowed: false, remaining: 5, reset: 34750*us - us},
				{at: sec + 93750*us, n: 6, allowed: false, remaining: 5, reset: ms - us},
				{at: sec + 94750*us - us, n: 6, allowed: true, remaining: 0, reset: 10 * ms},
			},
		},
		{
			name:  "a lease gives back from its own group",
			limit: algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 1000, Window: time.Second, Burst: 10},
			steps: []step{
				{at: sec, n: 5, hold: 50 * ms, allowed: true, remaining: 5, reset: 55*ms - us},
				{at: sec + 40*ms, n: 5, hold: 50 * ms, allowed: true, remaining: 0, reset: 58750*us - us},
				// The second lease's 5 are held no more: back into the
				// bucket, up to C less the first's.
				{at: sec + 45*ms, n: 5, refund: true, hold: 50 * ms, receipt: 2, allowed: true, remaining: 5, reset: 10*ms - us},
				{at: sec + 55*ms - us, n: 0, allowed: true, remaining: 10, reset: 0},
			},
		},
		{
			name:  "leases hold until the last one ends",
			limit: algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Window: time.Second},
			steps: []step{
				// 3 held until 100ms.
				{at: sec, n: 3, hold: 100 * ms, allowed: true, remaining: 7, reset: 400*ms - us},
				// 3 more until 150ms: C − 6 = 4 until 100ms, C − 3 = 7
				// until 150ms, where the refill has reached 4.5.
				{at: sec + 50*ms, n: 3, hold: 100 * ms, allowed: true, remaining: 4, reset: 650*ms - us},
				// 4.20001 tokens, under a cap of 7.
				{at: sec + 120*ms, n: 5, allowed: false, remaining: 4, reset: 80*ms - us},
				{at: sec + 200*ms - us, n: 5, allowed: true, remaining: 0, reset: time.Second},
			},
		},
		{
			name:  "clock going back refills nothing",
			limit: algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Window: time.Second},
			steps: []step{
				{at: time.Second, n: 10, allowed: true, remaining: 0, reset: time.Second},
				{at: 0, n: 1, allowed: false, remaining: 0, reset: time.Second + 100*ms},
				{at: time.Second + 100*ms, n: 1, allowed: true, remaining: 0, reset: time.Second},
			},
		},
	})
}
