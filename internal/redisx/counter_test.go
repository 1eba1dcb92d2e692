package redisx

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/rate"
	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
)

// TestCounterTransientDenials races 128 callers, each taking one hit at a
// time of a fixed window of L = 1 000 until 3 000 takes are done, and
// counts the denials that came while the window still had room: those
// decided before the last admission. A take that reads a count other takes
// pushed past L, before they gave their hits back, is denied although the
// hits are back a round trip later; it is never admitted past L, and later
// takes use the room, so exactly L are admitted. It logs the share of such
// denials.
func TestCounterTransientDenials(t *testing.T) {
	const (
		limit    = 1000
		callers  = 128
		attempts = 3 * limit
	)
	client, lim, op := fixedWindowOn(t, "hot", limit)
	ctx := context.Background()
	var seq, admitted atomic.Int64
	var mu sync.Mutex
	var order []bool // true: admitted, in the order the answers came
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for seq.Add(1) <= attempts {
				res, err := lim.Do(ctx, []rate.Op{op})
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				order = append(order, res[0].Allowed)
				mu.Unlock()
				if res[0].Allowed {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	require.EqualValues(t, limit, admitted.Load(), "exactly L admitted")
	last := 0
	for i, ok := range order {
		if ok {
			last = i
		}
	}
	transient := 0
	for _, ok := range order[:last] {
		if !ok {
			transient++
		}
	}
	t.Logf("%d callers, %d takes of 1 on a limit of %d: %d denials (%.1f%% of the takes) came before the last admission",
		callers, attempts, limit, transient, 100*float64(transient)/attempts)

	// Once every give-back is made, the window holds exactly L.
	keys := limitKeys(t, client, lim.enc.keys, op.Key, op.Limit)
	require.Len(t, keys, 1)
	count, err := client.Get(ctx, keys[0]).Int()
	require.NoError(t, err)
	assert.Equal(t, limit, count)
	ttl, err := client.PTTL(ctx, keys[0]).Result()
	require.NoError(t, err)
	assert.Positive(t, ttl, "the count expires with its window")
	assert.LessOrEqual(t, ttl, algorithms.MaxWindow+serverClockMargin+time.Millisecond)
}

// TestCounterMarksTransientDenials: a take denied on a count that holds
// hits another op is about to give back (above L, or below zero) is marked
// transient, so that no one remembers it; one denied on a count of L is
// not.
func TestCounterMarksTransientDenials(t *testing.T) {
	client, lim, op := fixedWindowOn(t, "marked", 5)
	ctx := context.Background()
	do := func(hits uint64) algorithms.Result {
		t.Helper()
		o := op
		o.Hits = hits
		res, err := lim.Do(ctx, []rate.Op{o})
		require.NoError(t, err)
		return res[0]
	}
	require.True(t, do(5).Allowed)
	keys := limitKeys(t, client, lim.enc.keys, op.Key, op.Limit)
	require.Len(t, keys, 1)

	full := do(1)
	assert.False(t, full.Allowed)
	assert.False(t, full.Transient, "a count of L is the limit reached")

	// Another replica's take of 3 is between its INCRBY and its give-back.
	require.NoError(t, client.IncrBy(ctx, keys[0], 3).Err())
	over := do(1)
	assert.False(t, over.Allowed)
	assert.True(t, over.Transient, "a count above L holds hits about to be given back")
	assert.Equal(t, full.Remaining, over.Remaining)

	// A refund of 7 is between its INCRBY and its give-back of what it took
	// below zero.
	require.NoError(t, client.IncrBy(ctx, keys[0], -10).Err())
	under := do(1)
	assert.False(t, under.Allowed)
	assert.True(t, under.Transient, "a count below zero holds hits about to be given back")

	require.NoError(t, client.IncrBy(ctx, keys[0], 2).Err())
	assert.True(t, do(1).Allowed, "the count back in [0, L]")
}

// fixedWindowOn returns a client of the shared standalone server, a Limiter
// on it, and a take of one hit of a fixed window of limit over MaxWindow,
// of a key named by value.
func fixedWindowOn(t *testing.T, value string, limit uint64) (*redis.Client, *Limiter, rate.Op) {
	t.Helper()
	client := redistest.SharedStandalone(t).Client(t)
	lim, err := NewLimiter(client, testPipelines, WithKeyPrefix(testPrefix(t)))
	require.NoError(t, err)
	t.Cleanup(lim.Close)
	return client, lim, rate.Op{
		Key:   rate.Key{Domain: "transient", Entries: []rate.Entry{{Key: "k", Value: value}}},
		Limit: algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: limit, Window: algorithms.MaxWindow},
		Hits:  1,
	}
}
