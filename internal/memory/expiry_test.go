package memory

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/rate"
)

// fakeNow is a clock a test moves by hand.
type fakeNow struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeNow) now() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.t }
func (f *fakeNow) add(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.t = f.t.Add(d)
}

var expiryStart = time.Date(2026, 11, 21, 10, 0, 0, 123456000, time.UTC)

// algs is how many states fill keeps per key: one for each algorithm.
var algs = len(algorithms.Algorithms)

// fill takes one hit from keys keys of every algorithm, one window each.
func fill(t *testing.T, m *Limiter, keys int, window time.Duration) {
	t.Helper()
	for _, a := range algorithms.Algorithms {
		for i := range keys {
			res, err := m.Do(context.Background(), []rate.Op{{
				Key:   rate.Key{Domain: "expiry", Entries: []rate.Entry{{Key: "k", Value: fmt.Sprint(i)}}},
				Limit: algorithms.Limit{Algorithm: a, Requests: 10, Window: window},
				Hits:  1,
			}})
			require.NoError(t, err)
			require.True(t, res[0].Allowed)
		}
	}
}

func TestMemorySweepDropsExpired(t *testing.T) {
	clock := &fakeNow{t: expiryStart}
	m := New(WithClock(clock.now), WithSweepInterval(0), WithShards(4))
	defer m.Close()
	fill(t, m, 500, time.Second)
	fill(t, m, 20, time.Hour)
	require.Equal(t, algs*520, m.Len())

	// Nothing has expired yet.
	require.Zero(t, m.sweep())
	require.Equal(t, algs*520, m.Len())

	// Two seconds on, every one-second state has expired (a sliding window
	// counter keeps a hit for up to two windows); the hour states have not.
	clock.add(2 * time.Second)
	sweeps := 0
	for m.Len() > algs*20 {
		dropped := m.sweep()
		require.Positive(t, dropped, "a sweep with expired states left dropped none")
		sweeps++
		require.Less(t, sweeps, 10, "sweeps to drop 2000 expired states")
	}
	require.Equal(t, algs*20, m.Len())

	clock.add(2 * time.Hour)
	for m.Len() > 0 {
		m.sweep()
		sweeps++
		require.Less(t, sweeps, 20)
	}
}

func TestMemoryAccessDropsExpired(t *testing.T) {
	clock := &fakeNow{t: expiryStart}
	m := New(WithClock(clock.now), WithSweepInterval(0))
	defer m.Close()
	fill(t, m, 3, time.Second)
	require.Equal(t, algs*3, m.Len())
	clock.add(2 * time.Second)
	for _, a := range algorithms.Algorithms {
		for i := range 3 {
			res, err := m.Do(context.Background(), []rate.Op{{
				Key:   rate.Key{Domain: "expiry", Entries: []rate.Entry{{Key: "k", Value: fmt.Sprint(i)}}},
				Limit: algorithms.Limit{Algorithm: a, Requests: 10, Window: time.Second},
			}})
			require.NoError(t, err)
			require.Equal(t, uint64(10), res[0].Remaining)
		}
	}
	require.Zero(t, m.Len(), "peeks at expired states drop them")
}

// TestMemoryBackgroundSweep: the sweep runs on its own until Close.
func TestMemoryBackgroundSweep(t *testing.T) {
	clock := &fakeNow{t: expiryStart}
	m := New(WithClock(clock.now), WithSweepInterval(time.Millisecond))
	fill(t, m, 50, time.Second)
	clock.add(time.Minute)
	require.Eventually(t, func() bool { return m.Len() == 0 }, 5*time.Second, time.Millisecond)
	m.Close()
	m.Close()

	// After Close, Do still works; expired states go when touched.
	fill(t, m, 1, time.Second)
	require.Equal(t, algs, m.Len())
}

// TestMemoryExpiredStateIsNew: a state past its Expiry under the limit it
// was used with starts over, even when the limit has since changed.
func TestMemoryExpiredStateIsNew(t *testing.T) {
	clock := &fakeNow{t: expiryStart}
	m := New(WithClock(clock.now), WithSweepInterval(0))
	defer m.Close()
	k := rate.Key{Domain: "bucket"}
	small := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Window: time.Second}
	res, err := m.Do(context.Background(), []rate.Op{{Key: k, Limit: small, Hits: 5}})
	require.NoError(t, err)
	require.Equal(t, uint64(5), res[0].Remaining)
	clock.add(time.Second)
	large := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Window: time.Second, Burst: 100}
	res, err = m.Do(context.Background(), []rate.Op{{Key: k, Limit: large}})
	require.NoError(t, err)
	require.Equal(t, uint64(100), res[0].Remaining, "a bucket full under its old limit is a new, full bucket")
}
