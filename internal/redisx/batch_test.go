package redisx

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/rate"
	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
)

// bigCall returns n takes of a fixed window, each on a key of its own.
func bigCall(name string, n int) []rate.Op {
	limit := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 10, Window: time.Hour}
	ops := make([]rate.Op, n)
	for i := range ops {
		ops[i] = rate.Op{Key: rate.Key{Domain: name, Entries: []rate.Entry{{Key: "k", Value: strconv.Itoa(i)}}}, Limit: limit, Hits: 1}
	}
	return ops
}

// sentHook records the domains whose calls open a pipeline: the value of
// the first command's key up to its first '|'.
type sentHook struct {
	pipelineCounter
	mu   sync.Mutex
	seen map[string]bool
}

func (h *sentHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, arg := range cmds[0].Args() {
			if _, rest, ok := strings.Cut(fmt.Sprint(arg), "{"); ok {
				domain, _, _ := strings.Cut(rest, "|")
				h.mu.Lock()
				h.seen[domain] = true
				h.mu.Unlock()
				break
			}
		}
		return next(ctx, cmds)
	}
}

func (h *sentHook) sent(domain string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seen[domain]
}

// TestBigCallsDoNotHoldOthers: while two calls of 20 000 ops each are under
// way on the two pipelines the Limiter keeps, another caller's calls of one
// op are answered, one after the other, before either big call is: a big
// call travels in batches of at most maxBatch ops, one at a time, and the
// calls queued meanwhile go out beside its next batch, not behind all of
// it.
func TestBigCallsDoNotHoldOthers(t *testing.T) {
	client := redistest.Standalone(t).Client(t)
	hook := &sentHook{seen: map[string]bool{}}
	client.AddHook(hook)
	lim, err := NewLimiter(client, 2)
	require.NoError(t, err)
	t.Cleanup(lim.Close)
	ctx := context.Background()
	require.NoError(t, lim.Prepare(ctx))
	small := bigCall("small", 1)
	_, err = lim.Do(ctx, small)
	require.NoError(t, err)

	const bigOps, smallCalls = 20_000, 20
	var wg sync.WaitGroup
	bigDone := make(chan time.Time, 2)
	for i := range 2 {
		wg.Go(func() {
			res, err := lim.Do(ctx, bigCall("big"+strconv.Itoa(i), bigOps))
			bigDone <- time.Now()
			assert.NoError(t, err)
			assert.Len(t, res, bigOps)
		})
	}
	require.Eventually(t, func() bool { return hook.sent("big0") && hook.sent("big1") }, 10*time.Second, time.Millisecond,
		"both big calls are under way")
	start := time.Now()
	var slowest time.Duration
	for range smallCalls {
		began := time.Now()
		_, err := lim.Do(ctx, small)
		require.NoError(t, err)
		slowest = max(slowest, time.Since(began))
	}
	smallDone := time.Now()
	wg.Wait()
	first := <-bigDone
	if other := <-bigDone; other.Before(first) {
		first = other
	}
	t.Logf("%d calls of one op in %v (the slowest %v); the first big call of %d ops answered %v after they began",
		smallCalls, smallDone.Sub(start), slowest, bigOps, first.Sub(start))
	assert.True(t, smallDone.Before(first), "the small calls were held behind a big one")
}

// cancelAfter cancels a context once the client it hooks has sent n
// pipelines.
type cancelAfter struct {
	pipelineCounter
	n      int64
	cancel context.CancelFunc
}

func (c *cancelAfter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if c.pipelineCounter.n.Add(1) == c.n {
			c.cancel()
		}
		return next(ctx, cmds)
	}
}

// TestBigCallFailsWithinBounds: a call of 20 000 ops whose caller gives up
// while its third batch is under way has counted those three batches and no
// more: they are reported as applied, with results, so that they can be
// given back, the batches it never sent as not applied, and nothing is left
// uncertain.
func TestBigCallFailsWithinBounds(t *testing.T) {
	client := redistest.Standalone(t).Client(t)
	var log outcomeLog
	lim, err := NewLimiter(client, 2, WithOutcomes(log.outcomes()))
	require.NoError(t, err)
	t.Cleanup(lim.Close)
	require.NoError(t, lim.Prepare(context.Background()))

	const n, batches = 20_000, 3
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client.AddHook(&cancelAfter{n: batches, cancel: cancel})
	_, err = lim.Do(ctx, bigCall("big", n))
	require.ErrorIs(t, err, context.Canceled)

	fates := map[rate.Fate]int{}
	require.Eventually(t, func() bool {
		clear(fates)
		for _, outs := range log.byValue() {
			for _, o := range outs {
				fates[o.Fate]++
			}
		}
		return fates[rate.Applied]+fates[rate.NotApplied]+fates[rate.Unknown] == n
	}, 5*time.Second, 10*time.Millisecond, "every op's outcome is reported: %v", fates)
	assert.Equal(t, map[rate.Fate]int{rate.Applied: batches * maxBatch, rate.NotApplied: n - batches*maxBatch}, fates)
	keys, err := client.Keys(context.Background(), "*big*").Result()
	require.NoError(t, err)
	assert.Len(t, keys, batches*maxBatch, "what Redis holds is what was reported applied")
}
