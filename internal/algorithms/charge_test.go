package algorithms_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

// The traces below follow the charge rules of the package documentation
// step by step; every number was worked out by hand.

func TestFixedWindowCharges(t *testing.T) {
	ub := untilBoundary(time.Minute)
	// D = 2 · ⌊MaxWindow / 1m⌋.
	const debt = 2 * 5_256_000
	runSteps(t, []stepCase{
		{
			name:  "debt carried over windows",
			limit: algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 2, Window: time.Minute},
			steps: []step{
				{at: 0, n: 0, allowed: true, remaining: 2},
				{at: 0, n: 1, charge: true, allowed: true, remaining: 1, reset: ub},
				{at: 0, n: 1, charge: true, allowed: true, remaining: 0, reset: ub},
				// Past L: recorded all the same, and reported over.
				{at: 0, n: 1, charge: true, remaining: 0, reset: ub},
				{at: 0, n: 0, remaining: 0, reset: ub},
				// c = 8, e = 6: windows i+1 and i+2 start over L.
				{at: 0, n: 5, charge: true, remaining: 0, reset: ub + 2*time.Minute},
				{at: 0, n: 1, remaining: 0, reset: ub + 3*time.Minute},
				// Window i+1 starts at c = 6 with e = 4.
				{at: ub, n: 0, remaining: 0, reset: 2 * time.Minute},
				// Window i+3 starts at 2: a check passes, a hit does not.
				{at: ub + 2*time.Minute, n: 0, allowed: true, remaining: 0, reset: time.Minute},
				{at: ub + 2*time.Minute, n: 1, remaining: 0, reset: time.Minute},
				{at: ub + 3*time.Minute, n: 2, allowed: true, remaining: 0, reset: time.Minute},
			},
		},
		{
			name:  "debt bounded by D",
			limit: algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 2, Window: time.Minute},
			steps: []step{
				{at: 0, n: math.MaxUint32, charge: true, remaining: 0, reset: ub + (5_256_000-1)*time.Minute},
				{at: 0, n: 1, charge: true, remaining: 0, reset: ub + (5_256_000-1)*time.Minute},
				{at: 0, n: debt, refund: true, allowed: true, remaining: 0, reset: ub},
				{at: 0, n: 1, remaining: 0, reset: ub},
			},
		},
		{
			name:  "zero limit takes no debt",
			limit: algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 0, Window: time.Minute},
			steps: []step{
				{at: 0, n: 1, charge: true, remaining: 0, reset: 0},
				{at: 0, n: 0, allowed: true, remaining: 0, reset: 0},
			},
		},
	})
}

func TestSlidingWindowCounterCharges(t *testing.T) {
	ub := untilBoundary(time.Minute)
	l := algorithms.Limit{Algorithm: algorithms.SlidingWindowCounter, Requests: 4, Window: time.Minute}
	runSteps(t, []stepCase{
		{
			name:  "debt becomes the next window's count",
			limit: l,
			steps: []step{
				// cur = 6, e = 2. In window i+1, prev = 4 and cur = 2: a check
				// passes once half of prev has slid out.
				{at: 0, n: 6, charge: true, remaining: 0, reset: ub + 30*time.Second},
				{at: ub + 30*time.Second - time.Microsecond, n: 0, remaining: 0, reset: time.Microsecond},
				{at: ub + 30*time.Second, n: 0, allowed: true, remaining: 0, reset: 90 * time.Second},
				// Within L but not within the estimate: over, and no debt.
				{at: ub + 30*time.Second, n: 1, charge: true, remaining: 0, reset: 15 * time.Second},
				{at: ub + 45*time.Second, n: 0, allowed: true, remaining: 0, reset: 75 * time.Second},
			},
		},
		{
			name:  "debt over several windows",
			limit: l,
			steps: []step{
				// cur = 20, e = 16: windows i+1 … i+4 start at 16, 12, 8 and 4,
				// each after a previous window of 4.
				{at: 0, n: 20, charge: true, remaining: 0, reset: ub + 4*time.Minute},
				{at: ub + 3*time.Minute, n: 0, remaining: 0, reset: time.Minute},
				{at: ub + 4*time.Minute, n: 0, allowed: true, remaining: 0, reset: time.Minute},
				{at: ub + 4*time.Minute, n: 1, remaining: 0, reset: 15 * time.Second},
			},
		},
	})
}

func TestSlidingWindowLogCharges(t *testing.T) {
	l := algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: 3, Window: time.Minute}
	runSteps(t, []stepCase{
		{
			name:  "entries past L",
			limit: l,
			steps: []step{
				{at: 0, n: 2, charge: true, allowed: true, remaining: 1, reset: time.Minute},
				// Four of the five fit under 2L; the third oldest is of 10s.
				{at: 10 * time.Second, n: 5, charge: true, remaining: 0, reset: time.Minute},
				{at: time.Minute, n: 0, remaining: 0, reset: 10 * time.Second},
				{at: 70 * time.Second, n: 3, allowed: true, remaining: 0, reset: time.Minute},
			},
		},
		{
			name:  "at most 2L entries",
			limit: l,
			steps: []step{
				{at: 0, n: 100, charge: true, remaining: 0, reset: time.Minute},
				{at: 0, n: 6, refund: true, allowed: true, remaining: 3, reset: 0},
			},
		},
	})
}

func TestTokenBucketCharges(t *testing.T) {
	runSteps(t, []stepCase{
		{
			name:  "refill pays the debt",
			limit: algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Window: time.Second},
			steps: []step{
				// The level goes to −5 tokens, refilled at 10 a second.
				{at: 0, n: 15, charge: true, remaining: 0, reset: 500 * time.Millisecond},
				{at: 500*time.Millisecond - time.Microsecond, n: 0, remaining: 0, reset: time.Microsecond},
				{at: 500 * time.Millisecond, n: 0, allowed: true, remaining: 0, reset: time.Second},
				{at: 500 * time.Millisecond, n: 1, remaining: 0, reset: 100 * time.Millisecond},
				{at: 500 * time.Millisecond, n: 1, charge: true, remaining: 0, reset: 100 * time.Millisecond},
				{at: 600 * time.Millisecond, n: 0, allowed: true, remaining: 0, reset: time.Second},
			},
		},
		{
			name:  "refund from debt",
			limit: algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Window: time.Second},
			steps: []step{
				{at: 0, n: 30, charge: true, remaining: 0, reset: 2 * time.Second},
				{at: 0, n: 25, refund: true, allowed: true, remaining: 5, reset: 500 * time.Millisecond},
			},
		},
	})
}

// TestChargeOfZeroIsACheck: a charge of nothing reports what a check does
// and changes nothing.
func TestChargeOfZeroIsACheck(t *testing.T) {
	for _, alg := range algorithms.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			l := algorithms.Limit{Algorithm: alg, Requests: 5, Window: time.Minute}
			a, b := algorithms.NewState(alg), algorithms.NewState(alg)
			now := t0
			for i, n := range []uint64{3, 0, 4, 0, 9, 0} {
				now = now.Add(7 * time.Second)
				a.Charge(l, now, n)
				b.Charge(l, now, n)
				check := a.Take(l, now, 0)
				charged := b.Charge(l, now, 0)
				check.Receipt = algorithms.Receipt{}
				require.Equal(t, check, charged, "step %d", i)
			}
		})
	}
}
