package redisx

import (
	"context"
	"errors"
	"net"
	"strconv"
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

// pipelineCounter counts the pipelines a client sends.
type pipelineCounter struct{ n atomic.Int64 }

func (*pipelineCounter) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (*pipelineCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (p *pipelineCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		p.n.Add(1)
		return next(ctx, cmds)
	}
}

// TestCoalescingSharesPipelines has 64 callers take from one limit at once:
// exactly the limit is admitted, and the calls travel in fewer pipelines
// than there were calls.
func TestCoalescingSharesPipelines(t *testing.T) {
	client := redistest.SharedStandalone(t).Client(t)
	var pipes pipelineCounter
	client.AddHook(&pipes)
	lim, err := NewLimiter(client, 2, WithKeyPrefix(testPrefix(t)))
	require.NoError(t, err)
	t.Cleanup(lim.Close)

	limit := algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: 500, Window: time.Hour}
	var admitted, calls atomic.Int64
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Go(func() {
			for i := range 20 {
				op := rate.Op{Key: rate.Key{Domain: "co", Entries: []rate.Entry{{Key: "k", Value: "hot"}}}, Limit: limit, Hits: 1}
				other := rate.Op{Key: rate.Key{Domain: "co", Entries: []rate.Entry{{Key: "k", Value: strconv.Itoa(g*100 + i)}}}, Limit: limit, Hits: 1}
				res, err := lim.Do(context.Background(), []rate.Op{op, other})
				require.NoError(t, err)
				calls.Add(1)
				if res[0].Allowed {
					admitted.Add(1)
				}
				require.True(t, res[1].Allowed)
				require.EqualValues(t, 499, res[1].Remaining)
			}
		})
	}
	wg.Wait()
	assert.EqualValues(t, 500, admitted.Load())
	assert.Less(t, pipes.n.Load(), calls.Load(), "1280 Do calls shared pipelines")
	t.Logf("%d Do calls in %d pipelines", calls.Load(), pipes.n.Load())
}

func TestCoalescingCallerLeavesAtItsDeadline(t *testing.T) {
	srv := redistest.Standalone(t)
	lim, err := NewLimiter(srv.Client(t), 1)
	require.NoError(t, err)
	t.Cleanup(lim.Close)
	op := rate.Op{Key: rate.Key{Domain: "d"}, Limit: algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 1, Window: time.Second}, Hits: 1}
	_, err = lim.Do(context.Background(), []rate.Op{op})
	require.NoError(t, err)

	srv.Pause()
	defer srv.Resume()
	for range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		start := time.Now()
		_, err := lim.Do(ctx, []rate.Op{op})
		cancel()
		// The caller's deadline, or the pipeline's read timing out at it.
		var netErr net.Error
		require.True(t, errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr) && netErr.Timeout(), "%v", err)
		assert.Less(t, time.Since(start), 2*time.Second, "the caller does not wait for the stuck pipeline")
	}
}

func TestClosedLimiterRefuses(t *testing.T) {
	lim, err := NewLimiter(redistest.SharedStandalone(t).Client(t), testPipelines)
	require.NoError(t, err)
	lim.Close()
	op := rate.Op{Key: rate.Key{Domain: "d"}, Limit: algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 1, Window: time.Second}, Hits: 1}
	_, err = lim.Do(context.Background(), []rate.Op{op})
	require.ErrorIs(t, err, errClosed)
}
