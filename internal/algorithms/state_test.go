package algorithms_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

func TestNewState(t *testing.T) {
	require.IsType(t, &algorithms.FixedWindowState{}, algorithms.NewState(algorithms.FixedWindow))
	require.IsType(t, &algorithms.SlidingWindowLogState{}, algorithms.NewState(algorithms.SlidingWindowLog))
	require.IsType(t, &algorithms.SlidingWindowCounterState{}, algorithms.NewState(algorithms.SlidingWindowCounter))
	require.IsType(t, &algorithms.TokenBucketState{}, algorithms.NewState(algorithms.TokenBucket))
	require.Nil(t, algorithms.NewState(0))
	require.Nil(t, algorithms.NewState(algorithms.TokenBucket+1))
}

// TestZeroLimit: L = 0 admits nothing but a peek, for every algorithm, and
// keeps nothing.
func TestZeroLimit(t *testing.T) {
	for _, a := range algorithms.Algorithms {
		t.Run(a.String(), func(t *testing.T) {
			for _, w := range []time.Duration{time.Second, year} {
				l := algorithms.Limit{Algorithm: a, Requests: 0, Window: w}
				require.NoError(t, l.Validate())
				st := algorithms.NewState(a)
				require.Equal(t, algorithms.Result{Remaining: 0, ResetAfter: w}, st.Take(l, t0, 1))
				require.Equal(t, algorithms.Result{Remaining: 0, ResetAfter: w}, st.Take(l, t0, 1<<32))
				require.Equal(t, algorithms.Result{Allowed: true, Receipt: st.Take(l, t0, 0).Receipt}, st.Take(l, t0, 0))
				require.Equal(t, algorithms.Result{Allowed: true}, st.Refund(l, t0, 3, algorithms.Receipt{}))
				require.False(t, st.Expiry(l).After(t0), "a zero limit keeps nothing")
			}
		})
	}
}

// TestTokenBucketWithoutRate: a bucket with L = 0 never refills, so it holds
// nothing even when given a burst (which Limit.Validate rejects).
func TestTokenBucketWithoutRate(t *testing.T) {
	l := algorithms.Limit{Algorithm: algorithms.TokenBucket, Window: time.Second, Burst: 5}
	require.ErrorIs(t, l.Validate(), algorithms.ErrInvalidLimit)
	var st algorithms.TokenBucketState
	require.Equal(t, algorithms.Result{ResetAfter: time.Second}, st.Take(l, t0, 1))
	require.Equal(t, algorithms.Result{Allowed: true, Receipt: algorithms.Receipt{At: t0.UnixMicro()}}, st.Take(l, t0, 0))
	require.Equal(t, algorithms.Result{Allowed: true}, st.Refund(l, t0, 5, algorithms.Receipt{}))
}

// TestReceiptShardIsNotAReceipt: a receipt that only names a shard is the
// zero Receipt to the state.
func TestReceiptShardIsNotAReceipt(t *testing.T) {
	for _, a := range algorithms.Algorithms {
		l := algorithms.Limit{Algorithm: a, Requests: 5, Window: time.Second}
		st := algorithms.NewState(a)
		require.True(t, st.Take(l, t0, 4).Allowed)
		got := st.Refund(l, t0, 2, algorithms.Receipt{Shard: 3})
		require.Equal(t, uint64(3), got.Remaining, a.String())
	}
}

// randomSteps applies random takes and refunds to st over a clock that
// moves forwards and backwards, calling check with each result. A third of
// the takes are leases held for up to maxHold(l), and a third of the refunds
// settlements of leases.
func randomSteps(rng *rand.Rand, st algorithms.State, l algorithms.Limit, now time.Time, steps int, back bool, check func(res algorithms.Result, now time.Time, refund bool)) time.Time {
	var receipts []algorithms.Receipt
	for range steps {
		switch r := rng.IntN(10); {
		case r < 3:
			now = now.Add(time.Duration(rng.Int64N(int64(l.Window / 3))))
		case r < 5:
			now = now.Add(time.Duration(rng.Int64N(5)) * time.Microsecond)
		case r < 6:
			now = now.Add(time.Duration(rng.Int64N(int64(3 * l.Window))))
		case r < 8 && back:
			now = now.Add(-time.Duration(rng.Int64N(int64(2 * l.Window))))
		case r < 9 && back:
			now = now.Add(-time.Duration(rng.Int64N(int64(year))))
		}
		now = now.Truncate(time.Microsecond)
		n := rng.Uint64N(l.Capacity() + 2)
		hold := time.Duration(1+rng.Int64N(maxHold(l).Microseconds())) * time.Microsecond
		if rng.IntN(4) == 0 {
			var rc algorithms.Receipt
			if len(receipts) > 0 && rng.IntN(2) == 0 {
				rc = receipts[rng.IntN(len(receipts))]
			}
			if rng.IntN(3) == 0 {
				ls := algorithms.Lease{Receipt: rc, Hold: hold, Size: n, Close: rng.IntN(2) == 0,
					Served: []algorithms.Served{{At: rc.At, Seq: rc.Seq, N: rng.Uint64N(n + 1)}}}
				st.Settle(l, now, []algorithms.Lease{ls})
				check(st.Take(l, now, 0), now, false)
			} else {
				check(st.Refund(l, now, n, rc), now, true)
			}
			continue
		}
		var res algorithms.Result
		if rng.IntN(3) == 0 {
			res = st.Lease(l, now, n, hold)
		} else {
			res = st.Take(l, now, n)
		}
		if res.Allowed {
			receipts = append(receipts, res.Receipt)
		}
		check(res, now, false)
	}
	return now
}

// maxHold is the longest hold of randomSteps' leases.
func maxHold(l algorithms.Limit) time.Duration { return l.Window / 10 }

// holdSlot returns the slot a bucket rounds the end of a lease of hold h up
// to, ⌈h/(HoldGroups − 1)⌉.
func holdSlot(h time.Duration) time.Duration {
	const us = time.Microsecond
	return (h/us + algorithms.HoldGroups - 2) / (algorithms.HoldGroups - 1) * us
}

// TestClockGoingBack: a clock that jumps back, by microseconds or by a year,
// never makes a state panic, report a negative wait or more than its
// capacity, or deny without a wait.
func TestClockGoingBack(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	for _, a := range algorithms.Algorithms {
		t.Run(a.String(), func(t *testing.T) {
			for seq := range 200 {
				l := algorithms.Limit{Algorithm: a, Requests: 1 + rng.Uint64N(20), Window: []time.Duration{time.Second, time.Minute, day}[rng.IntN(3)]}
				if a == algorithms.TokenBucket && rng.IntN(2) == 0 {
					l.Burst = 1 + rng.Uint64N(40)
				}
				st := algorithms.NewState(a)
				randomSteps(rng, st, l, t0, 80, true, func(res algorithms.Result, now time.Time, refund bool) {
					what := fmt.Sprintf("sequence %d at %s: %+v", seq, now.Sub(t0), res)
					require.GreaterOrEqual(t, res.ResetAfter, time.Duration(0), what)
					require.LessOrEqual(t, res.Remaining, l.Capacity(), what)
					if refund {
						require.True(t, res.Allowed, what)
					}
					if !res.Allowed {
						require.Positive(t, res.ResetAfter, what)
					}
				})
			}
		})
	}
}

// TestExpiryMeansNew: from its Expiry on, a state answers every operation as
// a new state does, so a store may drop it then.
func TestExpiryMeansNew(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 10))
	for _, a := range algorithms.Algorithms {
		t.Run(a.String(), func(t *testing.T) {
			for seq := range 300 {
				l := algorithms.Limit{Algorithm: a, Requests: 1 + rng.Uint64N(10), Window: []time.Duration{time.Second, time.Minute}[rng.IntN(2)]}
				if a == algorithms.TokenBucket && rng.IntN(2) == 0 {
					l.Burst = 1 + rng.Uint64N(20)
				}
				old := algorithms.NewState(a)
				last := randomSteps(rng, old, l, t0, rng.IntN(10), seq%2 == 0, func(algorithms.Result, time.Time, bool) {})
				expiry := old.Expiry(l)
				// Any time from the expiry on, before or after the last
				// operation.
				from := last.Add(-time.Duration(rng.Int64N(int64(2 * l.Window)))).Truncate(time.Microsecond)
				if from.Before(expiry) {
					from = expiry.Add(time.Duration(rng.Int64N(3)) * time.Microsecond)
				}
				fresh := algorithms.NewState(a)
				var oldReceipts, freshReceipts []algorithms.Receipt
				now := from
				for i := range 20 {
					what := fmt.Sprintf("sequence %d step %d, %s after the expiry", seq, i, now.Sub(expiry))
					n := rng.Uint64N(l.Capacity() + 2)
					var got, want algorithms.Result
					hold := time.Duration(rng.Int64N(maxHold(l).Microseconds())) * time.Microsecond
					if rng.IntN(4) == 0 && len(oldReceipts) > 0 {
						j := rng.IntN(len(oldReceipts))
						settle := func(r algorithms.Receipt) []algorithms.Lease {
							return []algorithms.Lease{{Receipt: r, Hold: hold, Size: n, Close: true,
								Served: []algorithms.Served{{At: r.At, Seq: r.Seq, N: n / 2}}}}
						}
						old.Settle(l, now, settle(oldReceipts[j]))
						fresh.Settle(l, now, settle(freshReceipts[j]))
						got, want = old.Take(l, now, 0), fresh.Take(l, now, 0)
					} else {
						got, want = old.Lease(l, now, n, hold), fresh.Lease(l, now, n, hold)
						if got.Allowed {
							oldReceipts, freshReceipts = append(oldReceipts, got.Receipt), append(freshReceipts, want.Receipt)
						}
					}
					// A log numbers its entries on from where it was, and an
					// epoch is the state's own.
					got.Receipt.Seq, want.Receipt.Seq = 0, 0
					got.Receipt.Epoch, want.Receipt.Epoch = 0, 0
					require.Equal(t, want, got, what)
					now = now.Add(time.Duration(rng.Int64N(int64(l.Window / 2)))).Truncate(time.Microsecond)
				}
			}
		})
	}
}

// TestLifetimeBoundsExpiry: after any operation at now, on a clock that does
// not go back, a state expires no later than now plus its limit's Lifetime
// and the longest hold of a lease, so neither a store nor Redis keeps it
// longer.
func TestLifetimeBoundsExpiry(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 11))
	for _, a := range algorithms.Algorithms {
		t.Run(a.String(), func(t *testing.T) {
			longest := 0.0
			for seq := range 300 {
				l := algorithms.Limit{Algorithm: a, Requests: 1 + rng.Uint64N(10), Window: []time.Duration{time.Second, time.Minute, day}[rng.IntN(3)]}
				if a == algorithms.TokenBucket && rng.IntN(2) == 0 {
					l.Burst = 1 + rng.Uint64N(40)
				}
				require.NoError(t, l.Validate())
				st := algorithms.NewState(a)
				randomSteps(rng, st, l, t0, 60, false, func(_ algorithms.Result, now time.Time, _ bool) {
					left := st.Expiry(l).Sub(now)
					require.LessOrEqual(t, left, l.Lifetime()+maxHold(l)+holdSlot(maxHold(l)), "sequence %d: %+v at %s", seq, l, now.Sub(t0))
					longest = max(longest, float64(left)/float64(l.Lifetime()))
				})
			}
			// The bound is tight: some state lives (almost) that long.
			assert.Greater(t, longest, 0.99, "the longest a state lived, as a share of the Lifetime")
		})
	}
}

func TestLifetime(t *testing.T) {
	for _, tc := range []struct {
		l    algorithms.Limit
		want time.Duration
	}{
		{algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 5, Window: time.Hour}, time.Hour},
		{algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: 5, Window: time.Hour}, time.Hour},
		{algorithms.Limit{Algorithm: algorithms.SlidingWindowCounter, Requests: 5, Window: time.Hour}, 2 * time.Hour},
		{algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 5, Window: time.Hour}, time.Hour},
		{algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 5, Burst: 3, Window: time.Hour}, time.Hour},
		{algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 5, Burst: 11, Window: time.Hour}, 3 * time.Hour},
		{algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 0, Window: time.Hour}, time.Hour},
	} {
		assert.Equal(t, tc.want, tc.l.Lifetime(), "%+v", tc.l)
	}
}
