package exactness

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

// counted returns k takes of 1 by one caller, one every step ms from from,
// each answering what a fixed window of limit would after it, counting
// already before them.
func counted(k int, from, step float64, limit, already uint64) []Call {
	cs := takes(k, from, step)
	for i := range cs {
		cs[i].Remaining = limit - already - uint64(i) - 1
	}
	return cs
}

func TestCheckRemainingFixedWindow(t *testing.T) {
	limits := lim(algorithms.FixedWindow, 10, time.Second, 0)
	t.Run("exact", func(t *testing.T) {
		calls := append(counted(10, 0, 10, 10, 0), left(deny(Take, 1, 200, 201), 0), left(admit(Check, 0, 210, 211), 0),
			left(admit(Take, 1, 1000.1, 1000.5), 9))
		vs := CheckRemaining(hist(limits, calls...), Tolerance{})
		assert.Empty(t, vs, Report(vs, 5))
	})
	t.Run("below", func(t *testing.T) {
		calls := counted(10, 0, 10, 10, 0)
		calls[4].Remaining = 2
		vs := CheckRemaining(hist(limits, calls...), Tolerance{})
		require.Len(t, vs, 2, Report(vs, 5))
		assert.Equal(t, Remain, vs[0].Check)
		assert.EqualValues(t, 2, vs[0].Got)
		assert.EqualValues(t, 5, vs[0].Low)
		assert.EqualValues(t, 3, vs[0].Excess)
		assert.Equal(t, Rise, vs[1].Check, "then it rose from 2 to 4")
		assert.EqualValues(t, 2, vs[1].Got)
		assert.Len(t, vs[1].Calls, 2)
	})
	t.Run("above", func(t *testing.T) {
		calls := counted(10, 0, 10, 10, 0)
		calls[4].Remaining = 6
		vs := CheckRemaining(hist(limits, calls...), Tolerance{})
		require.Len(t, vs, 1, Report(vs, 5))
		assert.EqualValues(t, 5, vs[0].High)
		assert.Empty(t, CheckRemaining(hist(limits, calls...), Tolerance{Above: 1}))
	})
	t.Run("a call straddling the boundary", func(t *testing.T) {
		calls := append(counted(5, 900, 10, 10, 0), left(admit(Take, 1, 999.9, 1000.2), 9))
		assert.Empty(t, CheckRemaining(hist(limits, calls...), Tolerance{}))
		calls[5].Remaining = 4
		assert.Empty(t, CheckRemaining(hist(limits, calls...), Tolerance{}), "decided before the boundary")
	})
	t.Run("concurrent callers", func(t *testing.T) {
		// Two callers, each answered after the other's call may have
		// counted or not.
		a := left(admit(Take, 1, 0, 5), 8)
		b := by(left(admit(Take, 1, 1, 4), 9), 0, 1)
		assert.Empty(t, CheckRemaining(hist(limits, a, b), Tolerance{}))
		b.Remaining = 7
		vs := CheckRemaining(hist(limits, a, b), Tolerance{})
		require.Len(t, vs, 1, Report(vs, 5))
		assert.EqualValues(t, 8, vs[0].Low)
	})
	t.Run("refunds and charges", func(t *testing.T) {
		calls := append(counted(5, 0, 10, 10, 0), left(admit(Refund, 2, 60, 61), 7), left(admit(Charge, 3, 70, 71), 4),
			left(deny(Charge, 6, 80, 81), 0), left(deny(Check, 0, 90, 91), 0))
		vs := CheckRemaining(hist(limits, calls...), Tolerance{})
		assert.Empty(t, vs, Report(vs, 5))
	})
	t.Run("other replicas", func(t *testing.T) {
		calls := counted(10, 0, 10, 10, 0)
		calls[4].Remaining = 3
		assert.Len(t, CheckRemaining(hist(limits, calls...), Tolerance{Below: 1}), 2)
		assert.Empty(t, CheckRemaining(hist(limits, calls...), Tolerance{Below: 2}))
	})
}

func TestCheckRemainingTokenBucket(t *testing.T) {
	// A burst of 100 and 1 000 a second: a token a millisecond.
	limits := lim(algorithms.TokenBucket, 1000, time.Second, 100)
	calls := []Call{left(admit(Take, 50, 0, 0.2), 50), left(admit(Take, 1, 10, 10.2), 59), left(admit(Take, 1, 20, 20.2), 68)}
	vs := CheckRemaining(hist(limits, calls...), Tolerance{})
	assert.Empty(t, vs, Report(vs, 5))
	t.Run("stale", func(t *testing.T) {
		// The remaining of the first take, less what was taken since, as a
		// lease answers: below the model's by the refill, then rising.
		stale := append([]Call(nil), calls...)
		stale[1].Remaining, stale[2].Remaining = 49, 68
		vs := CheckRemaining(hist(limits, stale...), Tolerance{Slack: time.Millisecond})
		require.Len(t, vs, 2, Report(vs, 5))
		assert.Equal(t, Remain, vs[0].Check)
		assert.EqualValues(t, 49, vs[0].Got)
		assert.EqualValues(t, 56, vs[0].Low, "50 + 7.8 tokens refilled by 9 ms, less the take")
		assert.Equal(t, Rise, vs[1].Check)
		assert.EqualValues(t, 19, vs[1].Got)
		assert.EqualValues(t, 13, vs[1].High, "10 ms and the slack at a token a millisecond, less the take, and a fraction of a token")
	})
	t.Run("slack", func(t *testing.T) {
		vs := CheckRemaining(hist(limits, calls...), Tolerance{Slack: 5 * time.Millisecond})
		assert.Empty(t, vs, Report(vs, 5))
	})
	t.Run("a reload", func(t *testing.T) {
		lowered := Reload{Limit: "l", To: Limit{Limit: algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 1000, Window: time.Second, Burst: 40}},
			Before: at(5), After: at(8)}
		calls := []Call{left(admit(Take, 50, 0, 0.2), 50), left(admit(Take, 1, 10, 10.2), 39)}
		vs := CheckRemaining(with(hist(limits, calls...), nil, lowered), Tolerance{})
		assert.Empty(t, vs, Report(vs, 5))
	})
}

func TestCheckRemainingSlidingWindowLogLag(t *testing.T) {
	// A log of 100 a second: 50 hits at 0, then one every 10 ms from
	// 505 ms, which leaves no room at 995 ms, and room for 49 once the 50
	// have left the window. A lease answers the remaining of when it was
	// taken, up to the lease time before: 0 until 1 035 ms.
	limits := lim(algorithms.SlidingWindowLog, 100, time.Second, 0)
	calls := []Call{left(admit(Take, 50, 0, 0.2), 50)}
	for k := range 60 {
		s := 505 + 10*float64(k)
		r := uint64(49 - k)
		if k >= 50 {
			r = uint64(99 - k)
		}
		calls = append(calls, left(admit(Take, 1, s, s+0.2), r))
	}
	vs := CheckRemaining(hist(limits, calls...), Tolerance{})
	assert.Empty(t, vs, Report(vs, 5))
	for k := 50; k < 54; k++ {
		calls[1+k].Remaining = 0
	}
	vs = CheckRemaining(hist(limits, calls...), Tolerance{})
	assert.Equal(t, 4, Count(vs, Remain), Report(vs, 5))
	assert.Equal(t, 1, Count(vs, Rise), Report(vs, 5))
	vs = CheckRemaining(hist(limits, calls...), Tolerance{Lag: 50 * time.Millisecond})
	assert.Empty(t, vs, Report(vs, 5))
}

func TestCheckRemainingLoss(t *testing.T) {
	limits := lim(algorithms.FixedWindow, 10, time.Second, 0)
	loss := []Loss{{Before: at(400), After: at(410)}}
	calls := append(counted(5, 0, 10, 10, 0), left(admit(Take, 1, 405, 406), 4), left(admit(Take, 1, 500, 501), 9))
	vs := CheckRemaining(with(hist(limits, calls...), loss), Tolerance{Hold: 50 * time.Millisecond})
	assert.Empty(t, vs, Report(vs, 5))
	calls[6].Remaining = 4
	vs = CheckRemaining(with(hist(limits, calls...), loss), Tolerance{Hold: 50 * time.Millisecond})
	require.Len(t, vs, 1, Report(vs, 5))
	assert.EqualValues(t, 8, vs[0].Low, "the take during the loss may have come after it")
}
