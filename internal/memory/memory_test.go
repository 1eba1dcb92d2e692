package memory_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/memory"
	"github.com/ratewarden/ratewarden/internal/rate"
	"github.com/ratewarden/ratewarden/internal/testkit/algotest"
)

// t0 is a realistic instant, 123456µs into its second.
var t0 = time.Date(2026, 11, 21, 10, 0, 0, 123456000, time.UTC)

func TestMemory(t *testing.T) {
	algotest.Run(t, func(t *testing.T, clock *algotest.Clock) rate.Limiter {
		m := memory.New(memory.WithClock(clock.Now))
		t.Cleanup(m.Close)
		return m
	})
}

func TestMemoryOneShard(t *testing.T) {
	algotest.Run(t, func(t *testing.T, clock *algotest.Clock) rate.Limiter {
		m := memory.New(memory.WithClock(clock.Now), memory.WithShards(1), memory.WithSweepInterval(0))
		t.Cleanup(m.Close)
		return m
	})
}

// TestMemoryConcurrentTakes: 64 goroutines racing for one key on a frozen
// clock get exactly the limit between them, for every algorithm.
func TestMemoryConcurrentTakes(t *testing.T) {
	const goroutines, takes, L = 64, 40, 1000
	for _, a := range algorithms.Algorithms {
		t.Run(a.String(), func(t *testing.T) {
			m := memory.New(memory.WithClock(func() time.Time { return t0 }))
			defer m.Close()
			op := rate.Op{
				Key:   rate.Key{Domain: "race", Entries: []rate.Entry{{Key: "k", Value: "v"}}},
				Limit: algorithms.Limit{Algorithm: a, Requests: L, Window: time.Minute},
				Hits:  1,
			}
			var admitted, denied atomic.Int64
			var wg sync.WaitGroup
			for range goroutines {
				wg.Go(func() {
					for range takes {
						res, err := m.Do(context.Background(), []rate.Op{op, {Key: op.Key, Limit: op.Limit}})
						if err != nil {
							t.Error(err)
							return
						}
						if res[0].Allowed {
							admitted.Add(1)
						} else {
							denied.Add(1)
						}
					}
				})
			}
			wg.Wait()
			require.Equal(t, int64(L), admitted.Load())
			require.Equal(t, int64(goroutines*takes-L), denied.Load())
			require.Equal(t, 1, m.Len())
		})
	}
}

// TestMemoryConcurrentKeys: goroutines over many keys, each key getting
// exactly its limit.
func TestMemoryConcurrentKeys(t *testing.T) {
	const goroutines, keys, L = 16, 200, 5
	m := memory.New(memory.WithClock(func() time.Time { return t0 }), memory.WithShards(8))
	defer m.Close()
	var admitted [keys]atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range keys {
				k := (i + g*7) % keys
				op := rate.Op{
					Key:   rate.Key{Domain: "keys", Entries: []rate.Entry{{Key: "k", Value: fmt.Sprint(k)}}},
					Limit: algorithms.Limit{Algorithm: algorithms.Algorithms[k%4], Requests: L, Window: time.Second},
					Hits:  1,
				}
				res, err := m.Do(context.Background(), []rate.Op{op})
				if err != nil {
					t.Error(err)
					return
				}
				if res[0].Allowed {
					admitted[k].Add(1)
				}
			}
		})
	}
	wg.Wait()
	for k := range admitted {
		require.Equal(t, int64(L), admitted[k].Load(), "key %d", k)
	}
	require.Equal(t, keys, m.Len())
}

func TestMemoryDoErrors(t *testing.T) {
	m := memory.New(memory.WithClock(func() time.Time { return t0 }))
	defer m.Close()
	good := rate.Op{Key: rate.Key{Domain: "d"}, Limit: algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 1, Window: time.Second}, Hits: 1}
	for name, bad := range map[string]algorithms.Limit{
		"no algorithm":         {Requests: 1, Window: time.Second},
		"no window":            {Algorithm: algorithms.FixedWindow, Requests: 1},
		"fractional window":    {Algorithm: algorithms.FixedWindow, Requests: 1, Window: 1500 * time.Millisecond},
		"log over its bound":   {Algorithm: algorithms.SlidingWindowLog, Requests: algorithms.MaxLogRequests + 1, Window: time.Second},
		"burst without rate":   {Algorithm: algorithms.TokenBucket, Window: time.Second, Burst: 1},
		"burst in a window":    {Algorithm: algorithms.FixedWindow, Requests: 1, Window: time.Second, Burst: 2},
		"requests over 2^32-1": {Algorithm: algorithms.SlidingWindowCounter, Requests: 1 << 32, Window: time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			res, err := m.Do(context.Background(), []rate.Op{good, {Key: good.Key, Limit: bad, Hits: 1}})
			require.ErrorIs(t, err, algorithms.ErrInvalidLimit)
			require.ErrorContains(t, err, "memory: op 1: ")
			require.Nil(t, res)
			require.Zero(t, m.Len(), "nothing is applied")
		})
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := m.Do(ctx, []rate.Op{good})
	require.ErrorIs(t, err, context.Canceled)
	require.Zero(t, m.Len(), "nothing is applied")

	res, err := m.Do(context.Background(), nil)
	require.NoError(t, err)
	require.Empty(t, res)
}

// TestMemoryKeepsOnlyWhatMatters: refunds and peeks of unknown keys create
// no state, and a state that is as good as new is not kept.
func TestMemoryKeepsOnlyWhatMatters(t *testing.T) {
	clock := algotest.NewClock(t0)
	m := memory.New(memory.WithClock(clock.Now), memory.WithSweepInterval(0))
	defer m.Close()
	for _, a := range algorithms.Algorithms {
		k := rate.Key{Domain: "keep", Entries: []rate.Entry{{Key: "alg", Value: a.String()}}}
		l := algorithms.Limit{Algorithm: a, Requests: 3, Window: time.Second}
		res, err := m.Do(context.Background(), []rate.Op{
			{Key: k, Limit: l, Hits: 2, Kind: rate.Refund},
			{Key: k, Limit: l, Hits: 0},
			{Key: k, Limit: l, Hits: 4},
		})
		require.NoError(t, err)
		require.Equal(t, []algorithms.Result{
			{Allowed: true, Remaining: 3},
			{Allowed: true, Remaining: 3, Receipt: res[1].Receipt},
			{Remaining: 3, ResetAfter: time.Second},
		}, res, a.String())
		require.Zero(t, m.Len(), a.String())

		res, err = m.Do(context.Background(), []rate.Op{
			{Key: k, Limit: l, Hits: 2},
			{Key: k, Limit: l, Hits: 2, Kind: rate.Refund},
		})
		require.NoError(t, err)
		require.True(t, res[0].Allowed)
		require.Equal(t, uint64(3), res[1].Remaining)
		require.Zero(t, m.Len(), "%s: given back in full, the state is new again", a)
	}
}

func TestMemoryShardsOption(t *testing.T) {
	for _, n := range []int{-1, 0, 1, 3, 64, 1000} {
		m := memory.New(memory.WithShards(n), memory.WithSweepInterval(0))
		for i := range 50 {
			_, err := m.Do(context.Background(), []rate.Op{{
				Key:   rate.Key{Domain: "shards", Entries: []rate.Entry{{Key: "k", Value: fmt.Sprint(i)}}},
				Limit: algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 1, Window: time.Hour},
				Hits:  1,
			}})
			require.NoError(t, err)
		}
		require.Equal(t, 50, m.Len(), "%d shards", n)
		m.Close()
	}
}

// BenchmarkMemoryDo measures one Do of one Take on a warm key, cycling over
// 1024 keys, for each algorithm; -benchmem shows the allocations (the
// results slice and the identity string). The limit is high and the window
// an hour, so no state runs out or is dropped as replenished.
func BenchmarkMemoryDo(b *testing.B) {
	for _, a := range algorithms.Algorithms {
		ops := make([][]rate.Op, 1024)
		for i := range ops {
			ops[i] = []rate.Op{{
				Key:   rate.Key{Domain: "bench", Entries: []rate.Entry{{Key: "api_key", Value: fmt.Sprintf("tenant-%04d", i)}, {Key: "path", Value: "/v1/items"}}},
				Limit: algorithms.Limit{Algorithm: a, Requests: algorithms.MaxLogRequests, Window: time.Hour},
				Hits:  1,
			}}
		}
		b.Run(a.String(), func(b *testing.B) {
			m := memory.New()
			defer m.Close()
			ctx := context.Background()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := m.Do(ctx, ops[i%len(ops)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
		b.Run(a.String()+"/parallel", func(b *testing.B) {
			m := memory.New()
			defer m.Close()
			ctx := context.Background()
			var next atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := int(next.Add(1)) * 131
				for pb.Next() {
					if _, err := m.Do(ctx, ops[i%len(ops)]); err != nil {
						b.Error(err)
						return
					}
					i++
				}
			})
		})
	}
}
