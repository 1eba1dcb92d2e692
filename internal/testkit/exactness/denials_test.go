package exactness

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

func TestCheckDenialsSlidingWindowLog(t *testing.T) {
	limits := lim(algorithms.SlidingWindowLog, 10, time.Second, 0)
	t.Run("a denial at the limit", func(t *testing.T) {
		h := hist(limits, append(takes(10, 0, 10), deny(Take, 1, 200, 201))...)
		assert.Empty(t, CheckDenials(h, Tolerance{}))
	})
	t.Run("a denial with room", func(t *testing.T) {
		h := hist(limits, append(takes(9, 0, 10), deny(Take, 1, 200, 201))...)
		vs := CheckDenials(h, Tolerance{})
		require.Len(t, vs, 1, Report(vs, 5))
		assert.Equal(t, Denial, vs[0].Check)
		assert.EqualValues(t, 1, vs[0].Low, "room for one hit")
		assert.Equal(t, at(200), vs[0].From)
	})
	t.Run("a denial of more than the room", func(t *testing.T) {
		h := hist(limits, append(takes(9, 0, 10), deny(Take, 2, 200, 201))...)
		assert.Empty(t, CheckDenials(h, Tolerance{}))
	})
	t.Run("an admitted call that overlaps the denial may come first", func(t *testing.T) {
		calls := append(takes(9, 0, 10), deny(Take, 1, 200, 201), by(admit(Take, 1, 200.5, 202), 0, 1))
		assert.Empty(t, CheckDenials(hist(limits, calls...), Tolerance{}))
	})
	t.Run("an admitted call sent after the denial came does not", func(t *testing.T) {
		calls := append(takes(9, 0, 10), deny(Take, 1, 200, 201), by(admit(Take, 1, 201.5, 202), 0, 1))
		assert.Len(t, CheckDenials(hist(limits, calls...), Tolerance{}), 1)
	})
	t.Run("nor one of the same caller sent after it", func(t *testing.T) {
		// With slack the next call overlaps the denial, but its caller
		// sent it once the denial came.
		calls := append(takes(9, 0, 10), deny(Take, 1, 200, 201), admit(Take, 1, 201.5, 202))
		assert.Len(t, CheckDenials(hist(limits, calls...), Tolerance{Slack: 2 * time.Millisecond}), 1)
	})
	t.Run("hits leave the window", func(t *testing.T) {
		h := hist(limits, append(takes(10, 0, 10), deny(Take, 1, 1000.6, 1001))...)
		assert.Len(t, CheckDenials(h, Tolerance{}), 1)
		h = hist(limits, append(takes(10, 0, 10), deny(Take, 1, 1000.4, 1001))...)
		assert.Empty(t, CheckDenials(h, Tolerance{}), "the first hit may have been decided at 0.5 ms")
	})
	t.Run("lag keeps admitted hits in the window longer", func(t *testing.T) {
		h := hist(limits, append(takes(10, 0, 10), deny(Take, 1, 1040, 1041))...)
		assert.Len(t, CheckDenials(h, Tolerance{}), 1)
		assert.Empty(t, CheckDenials(h, Tolerance{Lag: 50 * time.Millisecond}))
	})
	t.Run("another replica's leases", func(t *testing.T) {
		h := hist(limits, append(takes(8, 0, 10), deny(Take, 1, 200, 201))...)
		assert.Len(t, CheckDenials(h, Tolerance{Below: 1}), 1)
		assert.Empty(t, CheckDenials(h, Tolerance{Below: 2}))
	})
	t.Run("refunds", func(t *testing.T) {
		refunded := append(takes(10, 0, 10), admit(Refund, 1, 150, 151))
		h := hist(limits, append(refunded, deny(Take, 1, 200, 201))...)
		assert.Len(t, CheckDenials(h, Tolerance{}), 1, "a refund surely decided before the denial")
		h = hist(limits, append(refunded, by(deny(Take, 1, 150.5, 201), 0, 1))...)
		assert.Empty(t, CheckDenials(h, Tolerance{}), "a refund that may have come after it")
	})
}

func TestCheckDenialsFixedWindow(t *testing.T) {
	limits := lim(algorithms.FixedWindow, 10, time.Second, 0)
	t.Run("a denial that may have been decided before the boundary", func(t *testing.T) {
		h := hist(limits, append(takes(10, 900, 5), deny(Take, 1, 999.9, 1000.2))...)
		assert.Empty(t, CheckDenials(h, Tolerance{}))
	})
	t.Run("a denial after it", func(t *testing.T) {
		h := hist(limits, append(takes(10, 900, 5), deny(Take, 1, 1000.1, 1000.2))...)
		assert.Len(t, CheckDenials(h, Tolerance{}), 1)
	})
	t.Run("a take straddling the boundary counts in the later window", func(t *testing.T) {
		calls := append(takes(9, 900, 5), admit(Take, 1, 999.9, 1000.2), deny(Take, 10, 1000.3, 1000.4))
		assert.Empty(t, CheckDenials(hist(limits, calls...), Tolerance{}))
	})
	t.Run("a reload that lowers the limit", func(t *testing.T) {
		lowered := Reload{Limit: "l", To: Limit{Limit: algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 5, Window: time.Second}},
			Before: at(300), After: at(400)}
		calls := append(takes(6, 0, 10), deny(Take, 1, 350, 351), deny(Take, 1, 500, 501))
		assert.Empty(t, CheckDenials(with(hist(limits, calls...), nil, lowered), Tolerance{}))
		calls = append(takes(6, 1000, 10), deny(Take, 1, 350, 351))
		assert.Len(t, CheckDenials(with(hist(limits, calls...), nil, lowered), Tolerance{}), 1)
	})
	t.Run("a loss", func(t *testing.T) {
		loss := []Loss{{Before: at(400), After: at(410)}}
		calls := append(takes(10, 0, 10), deny(Take, 1, 405, 406), deny(Take, 1, 500, 501))
		vs := CheckDenials(with(hist(limits, calls...), loss), Tolerance{Hold: 50 * time.Millisecond})
		require.Len(t, vs, 1, "the state is forgotten, a denial during it is not judged")
		assert.Equal(t, at(500), vs[0].From)
	})
}

func TestCheckDenialsTokenBucket(t *testing.T) {
	// A burst of 10 and 10 a second: a token every 100 ms.
	limits := lim(algorithms.TokenBucket, 10, time.Second, 10)
	h := hist(limits, append(takes(10, 0, 0.1), deny(Take, 1, 50, 51))...)
	assert.Empty(t, CheckDenials(h, Tolerance{}), "half a token")
	h = hist(limits, append(takes(10, 0, 0.1), deny(Take, 1, 150, 151))...)
	vs := CheckDenials(h, Tolerance{})
	require.Len(t, vs, 1)
	assert.EqualValues(t, 1, vs[0].Low)
	assert.Empty(t, CheckDenials(h, Tolerance{Slack: 60 * time.Millisecond}), "the takes may have come 60 ms later, and the denial 60 ms earlier")
}

func TestCheckDenialsTokenBudget(t *testing.T) {
	// A budget of 1 000 tokens an hour, charged when responses end and
	// checked when requests start: 56 and 66 charged, then 800 while 8
	// checks run.
	limits := map[string]Limit{"l": {Limit: algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 1000, Window: time.Hour}}}
	calls := []Call{left(admit(Charge, 56, 0, 1), 944), left(admit(Charge, 66, 10, 11), 878), left(deny(Charge, 800, 20, 22), 0)}
	for i := range 8 {
		calls = append(calls, by(deny(Check, 0, 20.1, 21.5), 0, i+1))
	}
	vs := CheckDenials(hist(limits, calls...), Tolerance{})
	require.Len(t, vs, 9, Report(vs, 10))
	for _, v := range vs {
		assert.Equal(t, Denial, v.Check)
	}
	// Past the budget, a check is denied, rightly.
	calls = append(calls[:2], admit(Charge, 900, 20, 22), deny(Check, 0, 30, 31))
	assert.Empty(t, CheckDenials(hist(limits, calls...), Tolerance{}))
}

func TestCheckDenialsAddFirst(t *testing.T) {
	// A fixed window on Redis adds a take's hits first and gives them back
	// when it is denied: meanwhile a check sees the limit past its end.
	limits := lim(algorithms.FixedWindow, 10, time.Second, 0)
	calls := append(counted(10, 0, 10, 10, 0), left(admit(Refund, 1, 150, 151), 1), by(left(deny(Take, 5, 200, 203), 1), 0, 1), by(left(deny(Check, 0, 201, 202), 0), 0, 2))
	h := hist(limits, calls...)
	assert.Len(t, CheckDenials(h, Tolerance{}), 1)
	assert.Empty(t, CheckDenials(h, Tolerance{AddFirst: true}))
	assert.Len(t, CheckRemaining(h, Tolerance{}), 1)
	assert.Empty(t, CheckRemaining(h, Tolerance{AddFirst: true}))

	// A refund that takes the count below zero denies a take decided
	// meanwhile, with the remaining of the count before it.
	calls = []Call{left(admit(Take, 1, 0, 1), 9), left(admit(Refund, 3, 10, 12), 10), by(left(deny(Take, 1, 11, 11.5), 10), 0, 1)}
	h = hist(limits, calls...)
	assert.Len(t, CheckDenials(h, Tolerance{}), 1)
	assert.Empty(t, CheckDenials(h, Tolerance{AddFirst: true}))
	assert.Empty(t, CheckRemaining(h, Tolerance{AddFirst: true}))
	// Denials that met no refund are judged still.
	calls = append(calls, left(deny(Take, 1, 20, 21), 10))
	assert.Len(t, CheckDenials(hist(limits, calls...), Tolerance{AddFirst: true}), 1)
}

func TestCheckDenialsRepeat(t *testing.T) {
	// A transient denial (it met another denied take's hits) is repeated
	// by the deny cache for a while; a denial of other hits is not.
	limits := lim(algorithms.FixedWindow, 10, time.Second, 0)
	calls := append(counted(8, 0, 10, 10, 0),
		by(left(deny(Take, 5, 100, 102), 2), 0, 1), by(left(deny(Take, 1, 100.5, 101.5), 0), 0, 2),
		by(left(deny(Take, 1, 130, 130.5), 0), 0, 2), by(left(deny(Take, 2, 131, 131.5), 0), 0, 2))
	h := hist(limits, calls...)
	tol := Tolerance{AddFirst: true}
	vs := CheckDenials(h, tol)
	require.Len(t, vs, 2, Report(vs, 5))
	tol.Repeat = 50 * time.Millisecond
	vs = CheckDenials(h, tol)
	require.Len(t, vs, 1, Report(vs, 5))
	assert.EqualValues(t, 2, vs[0].Got)
	// Within a transient's own window, at no moment of the denial's.
	calls = append(counted(10, 0, 10, 10, 0), admit(Refund, 1, 150, 151),
		by(left(deny(Check, 0, 200, 202), 0), 0, 1), by(left(deny(Take, 2, 200.5, 201.5), 1), 0, 2))
	h = hist(limits, calls...)
	assert.Empty(t, CheckDenials(h, Tolerance{AddFirst: true}))
}

func TestCheckDenialsForget(t *testing.T) {
	// A replica's deny cache repeats, after Redis lost its state, a denial
	// it remembers from before.
	limits := lim(algorithms.SlidingWindowLog, 10, time.Second, 0)
	loss := []Loss{{Before: at(400), After: at(401)}}
	calls := append(counted(10, 0, 10, 10, 0), left(deny(Take, 1, 300, 301), 0), left(deny(Take, 1, 500, 501), 0))
	h := with(hist(limits, calls...), loss)
	vs := CheckDenials(h, Tolerance{Hold: 50 * time.Millisecond})
	require.Len(t, vs, 1, Report(vs, 5))
	assert.Equal(t, at(500), vs[0].From)
	assert.Empty(t, CheckDenials(h, Tolerance{Hold: 50 * time.Millisecond, Forget: time.Second}))
	assert.Empty(t, CheckRemaining(h, Tolerance{Forget: time.Second}))
	assert.Len(t, CheckRemaining(h, Tolerance{}), 1)
}
