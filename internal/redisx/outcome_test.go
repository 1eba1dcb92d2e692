package redisx

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/rate"
	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
)

// outcomeLog collects reported outcomes.
type outcomeLog struct {
	mu  sync.Mutex
	out []rate.Outcome
}

// outcomes returns Outcomes that l follows, for a Limiter to report to.
func (l *outcomeLog) outcomes() *rate.Outcomes {
	o := new(rate.Outcomes)
	o.Follow(l.report)
	return o
}

func (l *outcomeLog) report(o []rate.Outcome) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.out = append(l.out, o...)
}

// byValue returns the outcomes reported so far by the value of their op's
// first entry.
func (l *outcomeLog) byValue() map[string][]rate.Outcome {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := map[string][]rate.Outcome{}
	for _, o := range l.out {
		v := o.Op.Key.Entries[0].Value
		m[v] = append(m[v], o)
	}
	return m
}

// TestOutcomesOfCallersThatGaveUp stalls Redis for 300ms while takes with a
// deadline of 20ms wait, on one coalescing worker: the take that was sent
// is waited for past its caller's deadline and reported as applied, with
// the receipt of what it took; the takes that were still queued when their
// callers gave up are never sent and reported as not applied. Either way
// the limits hold exactly what the reports say.
func TestOutcomesOfCallersThatGaveUp(t *testing.T) {
	srv := redistest.Standalone(t)
	client, err := NewClient(Options{Addrs: []string{srv.Addr()}})
	require.NoError(t, err)
	t.Cleanup(func() { client.Close() })
	var log outcomeLog
	lim, err := NewLimiter(client, 1, WithKeyPrefix(testPrefix(t)), WithGrace(DefaultReadTimeout), WithOutcomes(log.outcomes())) // as long as the client reads a reply
	require.NoError(t, err)
	t.Cleanup(lim.Close)
	ctx := context.Background()
	require.NoError(t, lim.Prepare(ctx))

	limit := algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: 10, Window: time.Hour}
	ops := make([]rate.Op, 8)
	for i := range ops {
		ops[i] = rate.Op{Key: rate.Key{Domain: "late", Entries: []rate.Entry{{Key: "k", Value: strconv.Itoa(i)}}}, Limit: limit, Hits: 1}
	}
	consumed(t, lim, ops) // connected

	stalled := make(chan struct{})
	go func() {
		defer close(stalled)
		stall(t, []*redistest.Server{srv}, 300*time.Millisecond)
	}()
	time.Sleep(30 * time.Millisecond)

	var wg sync.WaitGroup
	for i := range ops {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			defer cancel()
			_, err := lim.Do(ctx, ops[i:i+1])
			assert.ErrorIs(t, err, context.DeadlineExceeded)
		})
		// One at a time into the queue, so that the first is sent alone.
		time.Sleep(2 * time.Millisecond)
	}
	wg.Wait()
	<-stalled
	require.Eventually(t, func() bool { return len(log.byValue()) == len(ops) }, 5*time.Second, 10*time.Millisecond,
		"every op of a call that failed is reported")

	held := consumed(t, lim, ops)
	applied := 0
	for i := range ops {
		reported := log.byValue()[strconv.Itoa(i)]
		require.Len(t, reported, 1, "op %d is reported once", i)
		o := reported[0]
		switch o.Fate {
		case rate.Applied:
			applied++
			assert.True(t, o.Result.Allowed, "op %d", i)
			assert.NotZero(t, o.Result.Receipt.Seq, "op %d: the receipt of what it took", i)
			assert.Equal(t, uint64(1), held[i], "op %d ran", i)
		case rate.NotApplied:
			assert.Equal(t, uint64(0), held[i], "op %d never ran", i)
		default:
			t.Errorf("op %d: fate %s", i, o.Fate)
		}
	}
	assert.Positive(t, applied, "the take that was sent is reported applied")
	assert.Less(t, applied, len(ops), "the takes still queued at their deadline are not sent")
}
