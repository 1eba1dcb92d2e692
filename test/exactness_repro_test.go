package test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/testkit/exactness"
)

// leaseEnv returns the environment of leases of tau: the default's, or
// RLS_LEASE_TIME.
func leaseEnv(tau time.Duration) map[string]string {
	if tau == 50*time.Millisecond {
		return nil
	}
	return map[string]string{"RLS_LEASE_TIME": tau.String()}
}

// hammerUntil makes callers callers take key through replica, back to
// back, until until: each take of hits(rng) hits. Caller ids start at
// first.
func hammerUntil(ctx context.Context, run *exactnessRun, replica, first, callers int, key string, hits func(*rand.Rand) uint64, until time.Time) {
	var wg sync.WaitGroup
	for k := range callers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(first+k), 1))
			for time.Now().Before(until) && ctx.Err() == nil {
				run.call(ctx, replica, first+k, key, exactness.Take, hits(rng))
			}
		})
	}
	wg.Wait()
}

// drainEvery takes all key has left through replica every period until
// until: at each tick, takes of each size, largest first, each until one
// is denied or the next tick comes.
func drainEvery(ctx context.Context, run *exactnessRun, replica, caller int, key string, sizes []uint64, period time.Duration, until time.Time) {
	for tick := time.Now(); tick.Before(until) && ctx.Err() == nil; {
		next := tick.Add(period)
		for _, n := range sizes {
			for time.Now().Before(next) && ctx.Err() == nil && run.call(ctx, replica, caller, key, exactness.Take, n).Allowed {
			}
		}
		time.Sleep(time.Until(next))
		tick = next
	}
}

// TestExactnessBucketGiveBack reproduces over-admission after a token
// bucket's lease is given back: two replicas on a bucket of 20 000 a
// second (burst 20 000). Replica A bursts on the full bucket, so that it
// leases, and stops dead, leaving its last lease unused; replica B drains
// the bucket every 5 ms, through A's give-back. No interval [a, b] may
// hold more than the burst and the refill of b − a (CheckAdmitted). Each
// try starts on a fresh bucket; the test tries again within its time.
func TestExactnessBucketGiveBack(t *testing.T) {
	for _, tau := range []time.Duration{50 * time.Millisecond, 500 * time.Millisecond} {
		t.Run(fmt.Sprintf("lease-%s", tau), func(t *testing.T) {
			rules := map[string]exactnessRule{"bucket": {limit: limitOf(algorithms.TokenBucket, 20000, time.Second, 20000)}}
			run := startExactnessRun(t, 2, leaseEnv(tau), rules)
			ctx := t.Context()
			burst, after := 150*time.Millisecond, 3*tau+100*time.Millisecond
			deadline := time.Now().Add(9 * time.Second)
			tries := 0
			for ; time.Now().Add(burst + after).Before(deadline); tries++ {
				start := time.Now()
				var wg sync.WaitGroup
				wg.Go(func() {
					drainEvery(ctx, run, 1, 100, "bucket", []uint64{2000, 500, 100, 20, 5, 1}, 5*time.Millisecond, start.Add(burst+after))
				})
				hammerUntil(ctx, run, 0, 0, 4, "bucket", func(rng *rand.Rand) uint64 { return 100 + rng.Uint64N(400) }, start.Add(burst))
				wg.Wait()
				h := run.restart()
				if vs := exactness.CheckAdmitted(h, exactness.Tolerance{}); len(vs) > 0 {
					judge(t, h, exactness.Tolerance{}, fmt.Sprintf("try %d of the test found it", tries+1), exactness.CheckAdmitted)
					return
				}
			}
			t.Logf("%d tries admitted no more than the bucket allows", tries)
		})
	}
}

// TestExactnessFlushGiveBacks reproduces give-backs that land on a state
// Redis forgot: two replicas on a limit of 5 000 a second. Replica A's two
// callers take 1 to 3 hits every millisecond for 250 ms, hot enough to
// lease and far from the limit, and stop, leaving their last leases
// unused; Redis is flushed; replica B then takes all the fresh state holds
// every 5 ms for most of the second, while A's give-backs of its unused
// leases land. No window may then hold more than the limit
// (CheckAdmitted). A stopped before the flush, so no lease taken before it
// serves after it: the check holds every call after the flush, without the
// lease time of hold (Tolerance.Hold 0). Each algorithm is tried twice.
func TestExactnessFlushGiveBacks(t *testing.T) {
	for _, alg := range algorithms.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			limit := limitOf(alg, 5000, time.Second, 0)
			run := startExactnessRun(t, 2, nil, map[string]exactnessRule{"hot": {limit: limit}})
			ctx := t.Context()
			var sizes []uint64
			for _, n := range []uint64{1000, 100, 10, 1} {
				if n <= maxHits(limit) {
					sizes = append(sizes, n)
				}
			}
			for try := range 2 {
				// Start 20 ms into a window, so that one window holds it all.
				start := time.Now().Truncate(time.Second).Add(time.Second + 20*time.Millisecond)
				time.Sleep(time.Until(start))
				var wg sync.WaitGroup
				for k := range 2 {
					wg.Go(func() {
						rng := rand.New(rand.NewPCG(uint64(k), uint64(try)))
						for time.Now().Before(start.Add(250 * time.Millisecond)) {
							run.call(ctx, 0, k, "hot", exactness.Take, 1+rng.Uint64N(3))
							time.Sleep(time.Millisecond)
						}
					})
				}
				wg.Wait()
				require.NoError(t, run.flush(ctx))
				drainEvery(ctx, run, 1, 100, "hot", sizes, 5*time.Millisecond, start.Add(930*time.Millisecond))
				if vs := judge(t, run.restart(), exactness.Tolerance{}, fmt.Sprintf("try %d", try+1), exactness.CheckAdmitted); len(vs) > 0 {
					return
				}
			}
		})
	}
}

// TestExactnessTokenBudget reproduces a token budget answered wrongly
// through its leases. Limits as Envoy Gateway sends them over xDS, written
// as a limits file: fixed windows whose hits are charges counted as
// envoyproxy/ratelimit counts them (charge: window), 1 000 tokens an hour,
// checked on the request path (hits_addend 0) and charged when the
// response ends. One replica, leases at their defaults.
//
// A budget charged 56, then 66, then 800 (922 in all) while 8 checks run
// concurrently with the last charge: every check and the 800 charge must be
// OK, with 78 left, as envoyproxy/ratelimit answers. The lease the second
// charge takes decides whether the answers go wrong, and its size depends
// on when the charges come, so the sequence is tried five times on fresh
// budgets, the charges 0 to 8 ms apart. Then an input and an output
// budget, each checked before and charged after 24 responses (40 input
// tokens, 45 output tokens each): a check after them must answer the true
// remaining, 40 of the input budget, and deny the output budget, which is
// spent. Every answer is held to the model strictly (CheckDenials,
// CheckRemaining, within a millisecond).
func TestExactnessTokenBudget(t *testing.T) {
	if into := time.Since(time.Now().Truncate(time.Hour)); into > time.Hour-10*time.Second {
		t.Logf("waiting %s for the hour to end", time.Hour-into)
		time.Sleep(time.Hour - into)
	}
	budget := exactnessRule{limit: limitOf(algorithms.FixedWindow, 1000, time.Hour, 0), charges: true}
	run := startExactnessRun(t, 1, nil, map[string]exactnessRule{"budget": budget, "input": budget, "output": budget})
	ctx := t.Context()
	call := func(caller int, key string, kind exactness.Kind, n uint64) exactness.Call {
		return run.call(ctx, 0, caller, key, kind, n)
	}
	strict := exactness.Tolerance{Slack: time.Millisecond}

	for try, gap := range []time.Duration{0, time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond, 8 * time.Millisecond} {
		assert.Equal(t, uint64(1000), call(0, "budget", exactness.Check, 0).Remaining)
		for _, n := range []uint64{56, 66} {
			time.Sleep(gap)
			c := call(0, "budget", exactness.Charge, n)
			assert.True(t, c.Allowed, "%s", c)
		}
		time.Sleep(gap)
		var wg sync.WaitGroup
		checks := make([]exactness.Call, 8)
		for i := range checks {
			wg.Go(func() { checks[i] = call(1+i, "budget", exactness.Check, 0) })
		}
		last := call(0, "budget", exactness.Charge, 800)
		wg.Wait()
		assert.True(t, last.Allowed, "try %d: the charge that leaves 78: %s", try+1, last)
		assert.Equal(t, uint64(78), last.Remaining, "try %d: the charge that leaves 78: %s", try+1, last)
		for _, c := range checks {
			assert.True(t, c.Allowed, "try %d: a check during the charge of 800: %s", try+1, c)
		}
		after := call(0, "budget", exactness.Check, 0)
		assert.True(t, after.Allowed, "try %d: %s", try+1, after)
		assert.Equal(t, uint64(78), after.Remaining, "try %d: a check after 922 of 1 000 were charged: %s", try+1, after)
		judge(t, run.restart(), strict, fmt.Sprintf("try %d: 56, 66 and 800 charged %s apart", try+1, gap), exactness.CheckDenials, exactness.CheckRemaining)
	}

	for range 24 {
		call(0, "input", exactness.Check, 0)
		call(0, "output", exactness.Check, 0)
		call(0, "input", exactness.Charge, 40)
		call(0, "output", exactness.Charge, 45)
	}
	in, out := call(0, "input", exactness.Check, 0), call(0, "output", exactness.Check, 0)
	assert.True(t, in.Allowed, "input after 960 of 1 000: %s", in)
	assert.Equal(t, uint64(40), in.Remaining, "input after 960 of 1 000: %s", in)
	assert.False(t, out.Allowed, "output after 1 080 of 1 000: %s", out)
	assert.Zero(t, out.Remaining, "output after 1 080 of 1 000: %s", out)
	judge(t, run.history(), strict, "24 responses of input and output", exactness.CheckDenials, exactness.CheckRemaining)
}

// TestExactnessLeaseRemaining reproduces a leased limit's wrong
// limit_remaining: one caller makes one call at a time, for two seconds,
// to one replica, on a token bucket of 5 000 a second that it drives hard
// enough to lease (takes of 1 to 5 hits). Each remaining must lie within
// the model's over the moments the call may have been decided, within a
// millisecond, and never rise between two calls by more than the model's
// could (CheckRemaining); nothing is admitted past the limit
// (CheckAdmitted).
func TestExactnessLeaseRemaining(t *testing.T) {
	rules := map[string]exactnessRule{"bucket": {limit: limitOf(algorithms.TokenBucket, 5000, time.Second, 0)}}
	run := startExactnessRun(t, 1, nil, rules)
	hammerUntil(t.Context(), run, 0, 0, 1, "bucket", func(rng *rand.Rand) uint64 { return 1 + rng.Uint64N(5) }, time.Now().Add(2*time.Second))
	h := run.history()
	vs := judge(t, h, exactness.Tolerance{Slack: time.Millisecond}, "", exactness.CheckAdmitted, exactness.CheckRemaining)
	below := 0
	for _, v := range vs {
		if v.Check == exactness.Remain && v.Got < v.Low {
			below++
		}
	}
	t.Logf("%d of %d answers below the model's least remaining, by %d at most; %d rises past the model's, by %d at most",
		below, len(h.Calls), exactness.Worst(vs, exactness.Remain), exactness.Count(vs, exactness.Rise), exactness.Worst(vs, exactness.Rise))
}
