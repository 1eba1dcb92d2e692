package admission

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// limits records the limits a gate reports.
type limits struct {
	mu sync.Mutex
	n  []int
}

func (l *limits) report(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n = append(l.n, n)
}

func (l *limits) last() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n[len(l.n)-1]
}

func withDeadlineIn(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestGateShedsWhatCannotFinishInTime(t *testing.T) {
	var lim limits
	g := newGate(1, lim.report)
	assert.Equal(t, []int{1}, lim.n, "a fixed limit is reported at start")
	now := time.Now()
	_, err := g.acquire(withDeadlineIn(t, time.Second), now)
	require.NoError(t, err, "a free slot")
	g.observe(20*time.Millisecond, false, now)

	reason, err := g.acquire(withDeadlineIn(t, 10*time.Millisecond), time.Now())
	assert.ErrorIs(t, err, ErrShed)
	assert.Equal(t, ShedDeadline, reason, "10ms left, the backend takes 20ms and is busy: shed at once")

	// One with time enough waits for the slot.
	got := make(chan error, 1)
	go func() {
		_, err := g.acquire(withDeadlineIn(t, 5*time.Second), time.Now())
		got <- err
	}()
	require.Eventually(t, func() bool { g.mu.Lock(); defer g.mu.Unlock(); return g.queued == 1 }, time.Second, time.Millisecond)
	g.release(time.Now())
	require.NoError(t, <-got)
	g.release(time.Now())
}

// TestGateShedsBeforeTheDeadline has a request wait for a slot that never
// frees: it is shed while the backend's latency still fits before its
// deadline, not at the deadline.
func TestGateShedsBeforeTheDeadline(t *testing.T) {
	var lim limits
	g := newGate(1, lim.report)
	_, err := g.acquire(withDeadlineIn(t, time.Minute), time.Now())
	require.NoError(t, err)
	g.observe(100*time.Millisecond, false, time.Now())

	ctx := withDeadlineIn(t, 500*time.Millisecond)
	reason, err := g.acquire(ctx, time.Now())
	assert.ErrorIs(t, err, ErrShed)
	assert.Equal(t, ShedDeadline, reason)
	assert.NoError(t, ctx.Err(), "shed with time left to answer")
}

func TestGateBoundsItsWaitingList(t *testing.T) {
	var lim limits
	g := newGate(1, lim.report)
	_, err := g.acquire(withDeadlineIn(t, time.Minute), time.Now())
	require.NoError(t, err)
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	for range maxWaiting {
		wg.Go(func() { _, _ = g.acquire(ctx, time.Now()) })
	}
	require.Eventually(t, func() bool { g.mu.Lock(); defer g.mu.Unlock(); return g.queued == maxWaiting }, time.Second, time.Millisecond)
	reason, err := g.acquire(ctx, time.Now())
	assert.ErrorIs(t, err, ErrShed)
	assert.Equal(t, ShedQueue, reason)
	cancel()
	wg.Wait()
	g.mu.Lock()
	assert.Equal(t, 0, g.queued, "waiters whose callers went away leave the list")
	g.mu.Unlock()
}

// TestGateServesTheNewestFirstWhenCongested queues three waiters behind a
// full gate: slots go to the oldest first while the list is fresh, and to
// the newest first once it has not emptied for longer than the backend's
// latency.
func TestGateServesTheNewestFirstWhenCongested(t *testing.T) {
	for _, tc := range []struct {
		name      string
		after     time.Duration // from the first wait to the releases
		wantOrder []int
	}{
		{"fresh: oldest first", 0, []int{0, 1, 2}},
		{"congested: newest first", time.Second, []int{2, 1, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var lim limits
			g := newGate(1, lim.report)
			_, err := g.acquire(withDeadlineIn(t, time.Minute), time.Now())
			require.NoError(t, err)
			g.observe(10*time.Millisecond, false, time.Now())
			var mu sync.Mutex
			var order []int
			var wg sync.WaitGroup
			for i := range 3 {
				wg.Go(func() {
					_, err := g.acquire(withDeadlineIn(t, time.Minute), time.Now())
					if assert.NoError(t, err) {
						mu.Lock()
						order = append(order, i)
						mu.Unlock()
					}
				})
				require.Eventually(t, func() bool { g.mu.Lock(); defer g.mu.Unlock(); return g.queued == i+1 }, time.Second, time.Millisecond)
			}
			g.mu.Lock()
			at := g.busySince.Add(tc.after)
			g.mu.Unlock()
			for i := range 3 {
				g.release(at)
				require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(order) == i+1 }, time.Second, time.Millisecond)
			}
			wg.Wait()
			assert.Equal(t, tc.wantOrder, order)
		})
	}
}

func TestGateAdaptsItsLimit(t *testing.T) {
	var lim limits
	g := newGate(0, lim.report)
	assert.Equal(t, []int{initialInflight}, lim.n)
	now := time.Now()
	for range 10 * initialInflight {
		g.observe(time.Millisecond, false, now)
	}
	grown := lim.last()
	assert.Greater(t, grown, initialInflight, "calls that end in time raise it")

	// Timeouts lower it by a tenth, at most once per recent latency.
	g.observe(10*time.Millisecond, true, now.Add(time.Second))
	g.observe(10*time.Millisecond, true, now.Add(time.Second))
	assert.Equal(t, int(float64(grown)*backoff), lim.last(), "one decrease for a burst of timeouts")
	for i := range 200 {
		g.observe(10*time.Millisecond, true, now.Add(time.Minute+time.Duration(i)*time.Second))
	}
	assert.Equal(t, minInflight, lim.last(), "never below the minimum")
}
