package rls

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/algorithms/algotest"
)

// countingLimiter counts the ops that reach the Limiter it wraps.
type countingLimiter struct {
	Limiter
	ops atomic.Int64
}

func (c *countingLimiter) Do(ctx context.Context, ops []algorithms.Op) ([]algorithms.Result, error) {
	c.ops.Add(int64(len(ops)))
	return c.Limiter.Do(ctx, ops)
}

func newCached(t *testing.T) (*DenyCache, *countingLimiter, *algotest.Clock) {
	clock := algotest.NewClock(t0)
	mem := algorithms.NewMemory(algorithms.WithClock(clock.Now))
	t.Cleanup(mem.Close)
	inner := &countingLimiter{Limiter: mem}
	return NewDenyCache(inner, 1000, clock.Now), inner, clock
}

func take(k string, l algorithms.Limit, hits uint64) algorithms.Op {
	return algorithms.Op{Key: algorithms.Key{Domain: "d", Entries: []algorithms.Entry{{Key: "k", Value: k}}}, Limit: l, Hits: hits}
}

func do(t *testing.T, l Limiter, ops ...algorithms.Op) []algorithms.Result {
	t.Helper()
	res, err := l.Do(context.Background(), ops)
	require.NoError(t, err)
	return res
}

// TestDenyCacheDecidesAsTheBackend drives random sequences of takes, peeks
// and refunds through a DenyCache in front of one in-memory limiter and
// straight into another: every decision, every wait of a denial and every
// remaining count of an admission is the same, for every algorithm, while
// the cache answers many of the denials.
func TestDenyCacheDecidesAsTheBackend(t *testing.T) {
	for _, alg := range algorithms.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(alg), 7))
			cache, _, clock := newCached(t)
			bare := algorithms.NewMemory(algorithms.WithClock(clock.Now))
			t.Cleanup(bare.Close)
			limits := []algorithms.Limit{
				{Algorithm: alg, Requests: 5, Window: time.Second},
				{Algorithm: alg, Requests: 3, Window: time.Second},
				{Algorithm: alg, Requests: 50, Window: time.Minute},
			}
			for step := range 5000 {
				// Each key keeps its limit: a limit whose numbers change is
				// decided by the backend (TestDenyCacheForgets).
				k := rng.IntN(len(limits))
				l, key := limits[k], fmt.Sprint(k)
				op := take(key, l, uint64(rng.IntN(int(l.Requests)+2)))
				if rng.IntN(8) == 0 {
					op.Refund = true
					op.Hits = uint64(rng.IntN(3))
				}
				got, want := do(t, cache, op)[0], do(t, bare, op)[0]
				what := fmt.Sprintf("step %d: %+v", step, op)
				require.Equal(t, want.Allowed, got.Allowed, what)
				if !want.Allowed {
					require.Equal(t, want.ResetAfter, got.ResetAfter, what)
				} else {
					require.Equal(t, want.Remaining, got.Remaining, what)
				}
				clock.Advance(time.Duration(rng.IntN(60_000)) * time.Microsecond)
			}
			assert.Positive(t, cache.Hits(), "the cache answered some denials")
			t.Logf("%s: %d of 5000 decisions from the cache", alg, cache.Hits())
		})
	}
}

func TestDenyCacheSparesTheBackendOnAHotKey(t *testing.T) {
	cache, inner, clock := newCached(t)
	l := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 10, Window: time.Minute}
	for range 10 {
		require.True(t, do(t, cache, take("hot", l, 1))[0].Allowed)
	}
	before := inner.ops.Load()
	first := do(t, cache, take("hot", l, 1))[0]
	require.False(t, first.Allowed)
	for range 1000 {
		clock.Advance(maxDenyHold / 1001)
		r := do(t, cache, take("hot", l, 1))[0]
		require.False(t, r.Allowed)
	}
	assert.Equal(t, before+1, inner.ops.Load(), "one denial reached the backend, the next 1000 did not")
	assert.EqualValues(t, 1000, cache.Hits())

	// Other hit counts, peeks among them, are left to the backend: their
	// waits differ.
	do(t, cache, take("hot", l, 3))
	do(t, cache, take("hot", l, 0))
	assert.Equal(t, before+3, inner.ops.Load())

	// At the reset the backend decides again.
	clock.Set(t0.Add(first.ResetAfter))
	assert.True(t, do(t, cache, take("hot", l, 1))[0].Allowed)
}

func TestDenyCacheForgets(t *testing.T) {
	l := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 2, Window: time.Hour}
	exhaust := func(t *testing.T, c Limiter, key string) {
		t.Helper()
		for range 2 {
			require.True(t, do(t, c, take(key, l, 1))[0].Allowed)
		}
		require.False(t, do(t, c, take(key, l, 1))[0].Allowed)
	}
	t.Run("a refund", func(t *testing.T) {
		cache, _, _ := newCached(t)
		exhaust(t, cache, "r")
		back := take("r", l, 1)
		back.Refund = true
		do(t, cache, back)
		assert.True(t, do(t, cache, take("r", l, 1))[0].Allowed)
	})
	t.Run("a changed limit", func(t *testing.T) {
		cache, _, _ := newCached(t)
		l := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 2, Window: time.Hour}
		exhaust(t, cache, "c")
		more := l
		more.Requests = 3
		assert.True(t, do(t, cache, take("c", more, 1))[0].Allowed, "a reload or override that raises the limit is decided by the backend")
	})
	t.Run("sharded limits are left to the backend", func(t *testing.T) {
		cache, inner, _ := newCached(t)
		op := take("s", l, 1)
		op.Shards = 4
		for range 5 {
			do(t, cache, op)
		}
		assert.EqualValues(t, 5, inner.ops.Load())
		assert.Zero(t, cache.Hits())
	})
}

func TestDenyCacheStaysBounded(t *testing.T) {
	cache, _, _ := newCached(t)
	l := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 0, Window: time.Hour}
	for i := range 5000 {
		do(t, cache, take(fmt.Sprint(i), l, 1))
	}
	n := 0
	for i := range cache.shards {
		n += len(cache.shards[i].m)
	}
	assert.LessOrEqual(t, n, 1000+denyShards)
}

func TestDenyCacheIsSafeForConcurrentUse(t *testing.T) {
	cache, _, _ := newCached(t)
	l := algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: 100, Window: time.Hour}
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 50 {
				if do(t, cache, take("c", l, 1))[0].Allowed {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	assert.EqualValues(t, 100, admitted.Load())
}
