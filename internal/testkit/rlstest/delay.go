package rlstest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/rate"
)

// DelayLimiter answers through Inner after Delay, as a backend on a busy
// host does, unless the call's context ends first; it records the deadline
// of every call (the zero Time for a call without one). Set Inner and Delay
// before the first call; a DelayLimiter is safe for concurrent use after
// that.
type DelayLimiter struct {
	Inner rate.Limiter
	Delay time.Duration

	mu        sync.Mutex
	deadlines []time.Time
}

// Do waits Delay, or until ctx ends, and then asks Inner.
func (l *DelayLimiter) Do(ctx context.Context, ops []rate.Op) ([]algorithms.Result, error) {
	d, _ := ctx.Deadline()
	l.mu.Lock()
	l.deadlines = append(l.deadlines, d)
	l.mu.Unlock()
	timer := time.NewTimer(l.Delay)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return l.Inner.Do(ctx, ops)
}

// Deadlines returns the deadline of every call so far, in the order the
// calls came.
func (l *DelayLimiter) Deadlines() []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.deadlines)
}

// LastDeadline returns the deadline of the latest call, and fails tb when
// there was none.
func (l *DelayLimiter) LastDeadline(tb testing.TB) time.Time {
	tb.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	require.NotEmpty(tb, l.deadlines, "the backend was called")
	return l.deadlines[len(l.deadlines)-1]
}
