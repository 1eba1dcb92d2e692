package algorithms_test

import (
	"math"
	"testing"
	"time"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

func TestTokenBucketSteps(t *testing.T) {
	const us, ms = time.Microsecond, time.Millisecond
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
