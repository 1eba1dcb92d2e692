package exactness

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

func TestCheckAdmittedFixedWindow(t *testing.T) {
	limits := lim(algorithms.FixedWindow, 10, time.Second, 0)
	t.Run("the limit in each window", func(t *testing.T) {
		h := hist(limits, concat(takes(10, 0, 10), takes(10, 1000, 10))...)
		assert.Empty(t, CheckAdmitted(h, Tolerance{}))
	})
	t.Run("one more than the limit", func(t *testing.T) {
		h := hist(limits, takes(11, 100, 10)...)
		vs := CheckAdmitted(h, Tolerance{})
		require.Len(t, vs, 1, Report(vs, 5))
		assert.Equal(t, Admitted, vs[0].Check)
		assert.EqualValues(t, 11, vs[0].Got)
		assert.EqualValues(t, 10, vs[0].High)
		assert.Len(t, vs[0].Calls, 11)
		assert.Equal(t, at(0), vs[0].From)
	})
	t.Run("a call straddling the boundary counts in neither window", func(t *testing.T) {
		calls := concat(takes(10, 0, 10), []Call{admit(Take, 1, 999.9, 1000.1)}, takes(10, 1001, 10))
		assert.Empty(t, CheckAdmitted(hist(limits, calls...), Tolerance{}))
	})
	t.Run("overlapping calls", func(t *testing.T) {
		var calls []Call
		for i := range 10 {
			calls = append(calls, admit(Take, 1, float64(i), 500+float64(i)))
		}
		assert.Empty(t, CheckAdmitted(hist(limits, calls...), Tolerance{}))
		calls = append(calls, admit(Take, 1, 5, 600))
		assert.Len(t, CheckAdmitted(hist(limits, calls...), Tolerance{}), 1)
	})
	t.Run("refunds add to the bound", func(t *testing.T) {
		calls := concat(takes(10, 0, 10), []Call{admit(Refund, 2, 200, 201)}, takes(2, 300, 10))
		assert.Empty(t, CheckAdmitted(hist(limits, calls...), Tolerance{}))
		calls = append(calls, admit(Take, 1, 400, 401))
		vs := CheckAdmitted(hist(limits, calls...), Tolerance{})
		require.Len(t, vs, 1)
		assert.EqualValues(t, 12, vs[0].High)
	})
	t.Run("a refund in another window does not", func(t *testing.T) {
		calls := concat([]Call{admit(Refund, 2, 900, 901)}, takes(12, 1000, 10))
		assert.Len(t, CheckAdmitted(hist(limits, calls...), Tolerance{}), 1)
	})
	t.Run("a charge over the limit is not an admission", func(t *testing.T) {
		calls := concat(takes(10, 0, 10), []Call{deny(Charge, 50, 200, 201), admit(Charge, 0, 300, 301)})
		assert.Empty(t, CheckAdmitted(hist(limits, calls...), Tolerance{}))
		calls = append(calls, admit(Charge, 1, 400, 401))
		assert.Len(t, CheckAdmitted(hist(limits, calls...), Tolerance{}), 1)
	})
	t.Run("a failed call is not counted", func(t *testing.T) {
		c := admit(Take, 1, 200, 201)
		c.Err = assert.AnError
		assert.Empty(t, CheckAdmitted(hist(limits, append(takes(10, 0, 10), c)...), Tolerance{}))
	})
}

func TestCheckAdmittedReload(t *testing.T) {
	limits := lim(algorithms.FixedWindow, 10, time.Second, 0)
	lowered := Reload{Limit: "l", To: Limit{Limit: algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 5, Window: time.Second}},
		Before: at(900), After: at(1100)}
	// The window the reload overlaps keeps the larger limit; the next is
	// held to the lower one.
	calls := concat(takes(10, 0, 10), takes(10, 1000, 10))
	vs := CheckAdmitted(with(hist(limits, calls...), nil, lowered), Tolerance{})
	require.Len(t, vs, 0, Report(vs, 5))
	calls = concat(takes(10, 0, 10), takes(6, 2000, 10))
	vs = CheckAdmitted(with(hist(limits, calls...), nil, lowered), Tolerance{})
	require.Len(t, vs, 1, Report(vs, 5))
	assert.EqualValues(t, 5, vs[0].High)
}

func TestCheckAdmittedLoss(t *testing.T) {
	limits := lim(algorithms.FixedWindow, 10, time.Second, 0)
	loss := []Loss{{Before: at(400), After: at(410)}}
	tol := Tolerance{Hold: 50 * time.Millisecond}
	t.Run("forgetting is allowed", func(t *testing.T) {
		calls := concat(takes(10, 0, 10), takes(10, 460, 10))
		assert.Empty(t, CheckAdmitted(with(hist(limits, calls...), loss), tol))
	})
	t.Run("calls straddling it or its hold count on neither side", func(t *testing.T) {
		calls := concat(takes(10, 0, 10), []Call{admit(Take, 3, 399, 401), admit(Take, 3, 420, 421)}, takes(10, 460, 10))
		assert.Empty(t, CheckAdmitted(with(hist(limits, calls...), loss), tol))
	})
	t.Run("admitting more after it is not", func(t *testing.T) {
		calls := concat(takes(10, 0, 10), takes(11, 460, 10))
		vs := CheckAdmitted(with(hist(limits, calls...), loss), tol)
		require.Len(t, vs, 1, Report(vs, 5))
		assert.EqualValues(t, 11, vs[0].Got)
		assert.Equal(t, at(460), vs[0].Calls[0].Sent)
	})
}

func TestCheckAdmittedSlidingWindowLog(t *testing.T) {
	limits := lim(algorithms.SlidingWindowLog, 10, time.Second, 0)
	t.Run("the limit in any window", func(t *testing.T) {
		h := hist(limits, concat(takes(10, 0, 50), takes(10, 1000, 50), takes(10, 2450, 1))...)
		assert.Empty(t, CheckAdmitted(h, Tolerance{}))
	})
	t.Run("a hit a window after another may be admitted with it", func(t *testing.T) {
		h := hist(limits, concat(takes(10, 0, 1), []Call{admit(Take, 1, 999.8, 1000.1)})...)
		assert.Empty(t, CheckAdmitted(h, Tolerance{}))
	})
	t.Run("one more within a window", func(t *testing.T) {
		h := hist(limits, concat(takes(1, 0, 1), takes(9, 500, 1), takes(1, 998, 1))...)
		vs := CheckAdmitted(h, Tolerance{})
		require.Len(t, vs, 1, Report(vs, 5))
		assert.EqualValues(t, 11, vs[0].Got)
		assert.Equal(t, at(0), vs[0].From)
	})
	t.Run("a window that is not epoch-aligned", func(t *testing.T) {
		h := hist(limits, concat(takes(10, 700, 10), takes(1, 1500, 1))...)
		assert.Len(t, CheckAdmitted(h, Tolerance{}), 1)
	})
}

func TestCheckAdmittedSlidingWindowCounter(t *testing.T) {
	limits := lim(algorithms.SlidingWindowCounter, 10, time.Second, 0)
	t.Run("twice the limit across a boundary", func(t *testing.T) {
		h := hist(limits, concat(takes(10, 900, 5), takes(10, 1001, 5))...)
		assert.Empty(t, CheckAdmitted(h, Tolerance{}))
	})
	t.Run("more than the limit in a window", func(t *testing.T) {
		h := hist(limits, takes(11, 1001, 5)...)
		vs := CheckAdmitted(h, Tolerance{})
		require.NotEmpty(t, vs)
		assert.Contains(t, vs[0].Detail, "one window")
	})
	t.Run("more than twice the limit within a window's length", func(t *testing.T) {
		// Each epoch window holds its limit; with refunds each may hold
		// more, and the 2L bound still holds them.
		calls := concat(takes(10, 900, 5), []Call{admit(Refund, 5, 960, 961)}, takes(5, 962, 5),
			takes(10, 1001, 5))
		vs := CheckAdmitted(hist(limits, calls...), Tolerance{})
		assert.Empty(t, vs, Report(vs, 5))
		calls = append(calls, takes(6, 1100, 1)...)
		vs = CheckAdmitted(hist(limits, calls...), Tolerance{})
		assert.Equal(t, 2, len(vs), Report(vs, 5))
	})
}

func TestCheckAdmittedTokenBucket(t *testing.T) {
	// A burst of 10 and 100 a second: a token every 10 ms.
	limits := lim(algorithms.TokenBucket, 100, time.Second, 10)
	t.Run("the burst, then the refill", func(t *testing.T) {
		h := hist(limits, concat(takes(10, 0, 0.1), takes(10, 100, 0.1), takes(20, 200, 10))...)
		assert.Empty(t, CheckAdmitted(h, Tolerance{}))
	})
	t.Run("one more than the burst and the refill", func(t *testing.T) {
		h := hist(limits, concat(takes(10, 0, 0.1), takes(11, 100, 0.1))...)
		vs := CheckAdmitted(h, Tolerance{})
		require.Len(t, vs, 1, Report(vs, 5))
		assert.EqualValues(t, 21, vs[0].Got)
		assert.EqualValues(t, 20, vs[0].High)
		assert.Equal(t, at(0), vs[0].From)
		assert.Equal(t, at(101.5), vs[0].To)
	})
	t.Run("a slow call is not counted where it was answered", func(t *testing.T) {
		// Decided at -100 ms on a full bucket and answered at 0: by then the
		// bucket was full again, and gave 10 at once.
		calls := concat([]Call{admit(Take, 1, -100, 0)}, takes(10, 0, 0.01))
		assert.Empty(t, CheckAdmitted(hist(limits, calls...), Tolerance{}))
	})
	t.Run("a refund gives a token back", func(t *testing.T) {
		calls := concat(takes(10, 0, 0.1), []Call{admit(Refund, 1, 1, 2)}, takes(1, 3, 0.1))
		assert.Empty(t, CheckAdmitted(hist(limits, calls...), Tolerance{}))
		calls = append(calls, admit(Take, 1, 4, 4.5))
		assert.Len(t, CheckAdmitted(hist(limits, calls...), Tolerance{}), 1)
	})
	t.Run("large hits", func(t *testing.T) {
		calls := []Call{admit(Take, 10, 0, 1), admit(Take, 5, 50, 51), admit(Take, 6, 60, 61)}
		vs := CheckAdmitted(hist(limits, calls...), Tolerance{})
		require.Len(t, vs, 1, Report(vs, 5))
		assert.EqualValues(t, 21, vs[0].Got)
		assert.EqualValues(t, 16, vs[0].High)
	})
}
