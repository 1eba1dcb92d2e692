package redisx

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/rate"
)

// TestFixedWindowSettleAfterRedisWindowEnds: the ops of a fixed window
// count in the window of Redis's clock as the Limiter follows it, and a
// settlement's script reads Redis's own TIME. Near a window's end the two
// may disagree: the settlement that ends a lease may run when TIME has
// passed the window's end while a check (in the same pipeline, as the
// lease layer sends it, or after it) still reads that window's count. The lease's unused hits must be given
// back then too, or the check (and every take of the window after it)
// finds them counted though no one was admitted for them.
func TestFixedWindowSettleAfterRedisWindowEnds(t *testing.T) {
	client := backends()[0].client(t)
	lim, err := NewLimiter(client, testPipelines, WithKeyPrefix(testPrefix(t)))
	require.NoError(t, err)
	t.Cleanup(func() { lim.Close() })
	require.NotNil(t, lim.server)
	ctx := context.Background()

	limit := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 100, Window: time.Second}
	key := rate.Key{Domain: "fw-settle-late", Entries: []rate.Entry{{Key: "k", Value: "v"}}}
	// The Limiter's estimate of Redis's clock lags it: it is 400ms before
	// the end of the window before Redis's current one, so that Redis's
	// TIME is past the end of the window the ops count in.
	now, err := client.Time(ctx).Result()
	require.NoError(t, err)
	into := time.Duration(now.UnixNano() % int64(time.Second))
	lim.server.close()
	lim.server = &serverClock{stop: make(chan struct{}), done: make(chan struct{})}
	close(lim.server.done)
	lim.server.offset.Store(int64(-into - 400*time.Millisecond))

	lease := rate.Op{Key: key, Limit: limit, Hits: 20, Hold: time.Second}
	got, err := lim.Do(ctx, []rate.Op{lease})
	require.NoError(t, err)
	require.True(t, got[0].Allowed)
	require.NotZero(t, got[0].Receipt.Epoch)
	require.Equal(t, uint64(80), got[0].Remaining)

	settle := rate.Op{Key: key, Limit: limit, Kind: rate.Settle, Leases: []algorithms.Lease{
		{Receipt: got[0].Receipt, Hold: lease.Hold, Size: 20, Reported: 0, Close: true},
	}}
	_, err = lim.Do(ctx, []rate.Op{settle})
	require.NoError(t, err)
	got, err = lim.Do(ctx, []rate.Op{{Key: key, Limit: limit}})
	require.NoError(t, err)
	require.True(t, got[0].Allowed)
	require.Equal(t, uint64(100), got[0].Remaining, "the lease's unused hits are still counted in the window the check reads")
}

// TestFixedWindowSettleAcrossWindows: a lease taken ahead near a window's
// end may be of the next window while the last lease of the window before
// is still unsettled, and one settlement then ends both. Each lease's
// unused hits go back to the count of the window it was taken in.
func TestFixedWindowSettleAcrossWindows(t *testing.T) {
	client := backends()[0].client(t)
	lim, err := NewLimiter(client, testPipelines, WithKeyPrefix(testPrefix(t)))
	require.NoError(t, err)
	t.Cleanup(func() { lim.Close() })
	require.NotNil(t, lim.server)
	ctx := context.Background()
	lim.server.close()
	lim.server = &serverClock{stop: make(chan struct{}), done: make(chan struct{})}
	close(lim.server.done)

	limit := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 100, Window: time.Second}
	key := rate.Key{Domain: "fw-settle-across", Entries: []rate.Entry{{Key: "k", Value: "v"}}}
	// The windows are seconds ahead of Redis's clock, so that the counts
	// live through the test whatever second it starts in.
	at := func(window int) {
		now, err := client.Time(ctx).Result()
		require.NoError(t, err)
		start := now.Truncate(time.Second).Add(time.Duration(5+window) * time.Second)
		lim.server.offset.Store(int64(start.Add(100 * time.Millisecond).Sub(now)))
	}
	take := func(n uint64) algorithms.Result {
		got, err := lim.Do(ctx, []rate.Op{{Key: key, Limit: limit, Hits: n, Hold: time.Second}})
		require.NoError(t, err)
		require.True(t, got[0].Allowed)
		require.NotZero(t, got[0].Receipt.Epoch)
		return got[0]
	}
	check := func() uint64 {
		got, err := lim.Do(ctx, []rate.Op{{Key: key, Limit: limit}})
		require.NoError(t, err)
		return got[0].Remaining
	}

	at(0)
	a := take(30)
	at(1)
	b := take(20)
	settle := rate.Op{Key: key, Limit: limit, Kind: rate.Settle, Leases: []algorithms.Lease{
		{Receipt: a.Receipt, Hold: time.Second, Size: 30, Reported: 10, Close: true},
		{Receipt: b.Receipt, Hold: time.Second, Size: 20, Served: []algorithms.Served{{At: b.Receipt.At, Seq: 1, N: 5}}, Close: true},
	}}
	_, err = lim.Do(ctx, []rate.Op{settle})
	require.NoError(t, err)
	require.Equal(t, uint64(95), check(), "the second lease's 15 unused hits go back to its own window")
	at(0)
	require.Equal(t, uint64(90), check(), "the first lease's 20 unused hits go back to its own window")
}
