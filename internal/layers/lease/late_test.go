package lease

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/giveback"
	"github.com/ratewarden/ratewarden/internal/memory"
	"github.com/ratewarden/ratewarden/internal/rate"
	"github.com/ratewarden/ratewarden/internal/testkit/algotest"
)

// appliesThenFails applies the first call with a lease's take once armed,
// then fails it, reporting every op as applied with its result: an answer
// that came after its caller gave up.
type appliesThenFails struct {
	rate.Limiter
	outcomes *rate.Outcomes
	armed    atomic.Bool
}

func (f *appliesThenFails) Do(ctx context.Context, ops []rate.Op) ([]algorithms.Result, error) {
	leasing := false
	for i := range ops {
		leasing = leasing || ops[i].Leasing()
	}
	if !leasing || !f.armed.Load() {
		return f.Limiter.Do(ctx, ops)
	}
	f.armed.Store(false)
	got, err := f.Limiter.Do(ctx, ops)
	if err != nil {
		return nil, err
	}
	out := make([]rate.Outcome, len(ops))
	for i, op := range ops {
		out[i] = rate.Outcome{Op: op, Fate: rate.Applied, Result: got[i]}
	}
	f.outcomes.Report(out)
	return nil, errDown
}

// TestALateLeaseIsGivenBackOnce: a lease's take whose call failed while the
// backend granted it (its answer came late) is a lease granted to no one.
// The lease layer ends it with a settlement; the give-back queue, which
// follows the same reports and refunds the admitted takes of failed calls,
// must not refund it too, or its hits go back twice and the limit admits
// that many more.
func TestALateLeaseIsGivenBackOnce(t *testing.T) {
	clock := algotest.NewClock(t0)
	mem := memory.New(memory.WithClock(clock.Now))
	t.Cleanup(mem.Close)
	outcomes := new(rate.Outcomes)
	back := &appliesThenFails{Limiter: mem, outcomes: outcomes}
	q, err := giveback.New(back, giveback.DefaultOptions())
	require.NoError(t, err)
	outcomes.Follow(q.Settle)
	l, err := New(back, Options{Time: tau, MinHits: minHits, Now: clock.Now, manual: true})
	require.NoError(t, err)
	outcomes.Follow(l.Settle)
	r := replica{Limiter: l, obs: newCounter()}
	hot := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 1_000_000, Window: time.Hour}
	back.armed.Store(true)
	var admitted uint64
	for range 2000 {
		res, err := r.Do(context.Background(), []rate.Op{take("hot", hot, 1)})
		if err == nil && res[0].Allowed {
			admitted++
		}
		clock.Advance(50 * time.Microsecond)
	}
	r.pending.Wait()
	l.expire(clock.Now())
	require.False(t, back.armed.Load(), "a lease was taken, and its call failed")
	l.Close()
	time.Sleep(300 * time.Millisecond) // the queue's round, on the wall clock
	assert.Equal(t, hot.Requests-admitted, peek(t, mem, take("hot", hot, 0)).Remaining, "the backend counts what was answered as admitted")
}
