package algorithms_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

// t0 is a realistic instant, 123456µs into its second and 10h into its day.
var t0 = time.Date(2026, 11, 21, 10, 0, 0, 123456000, time.UTC)

// step is one operation on a state and what it must report.
type step struct {
	at     time.Duration // since t0
	n      uint64
	refund bool
	// charge charges n hits instead of taking them.
	charge bool
	// receipt, with refund, is 1 + the index of the step whose receipt is
	// given back; 0 for the zero Receipt.
	receipt int
	// hold makes a take a lease's (State.Lease) and a refund the
	// settlement of a lease of n hits, none served (State.Settle).
	hold time.Duration
	// limit, when set, replaces the case's limit from this step on.
	limit *algorithms.Limit

	allowed   bool
	remaining uint64
	reset     time.Duration
}

type stepCase struct {
	name  string
	limit algorithms.Limit
	steps []step
}

// runSteps applies each case's steps to a new state of its algorithm.
func runSteps(t *testing.T, cases []stepCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, tc.limit.Validate())
			st := algorithms.NewState(tc.limit.Algorithm)
			l := tc.limit
			results := make([]algorithms.Result, len(tc.steps))
			for i, sp := range tc.steps {
				if sp.limit != nil {
					l = *sp.limit
				}
				now := t0.Add(sp.at)
				var res algorithms.Result
				if sp.refund {
					var r algorithms.Receipt
					if sp.receipt > 0 {
						r = results[sp.receipt-1].Receipt
					}
					if sp.hold > 0 {
						// A settlement answers nothing: a check after it tells.
						st.Settle(l, now, []algorithms.Lease{{Receipt: r, Hold: sp.hold, Size: sp.n, Close: true}})
						res = st.Take(l, now, 0)
					} else {
						res = st.Refund(l, now, sp.n, r)
					}
				} else if sp.charge {
					res = st.Charge(l, now, sp.n)
				} else if sp.hold > 0 {
					res = st.Lease(l, now, sp.n, sp.hold)
				} else {
					res = st.Take(l, now, sp.n)
				}
				results[i] = res
				want := fmt.Sprintf("allowed=%t remaining=%d reset=%s", sp.allowed, sp.remaining, sp.reset)
				got := fmt.Sprintf("allowed=%t remaining=%d reset=%s", res.Allowed, res.Remaining, res.ResetAfter)
				require.Equal(t, want, got, "step %d: %+v", i, sp)
				switch {
				case sp.refund && sp.hold > 0:
				case sp.refund || sp.charge || !res.Allowed:
					require.Zero(t, res.Receipt, "step %d: receipt", i)
				case l.Algorithm == algorithms.SlidingWindowLog:
					// A lease's entries, and so its receipt, are at its end.
					require.Equal(t, now.Add(sp.hold).UnixMicro(), res.Receipt.At, "step %d: receipt time", i)
				default:
					require.Equal(t, now.UnixMicro(), res.Receipt.At, "step %d: receipt time", i)
				}
			}
		})
	}
}

// lim returns a pointer to a limit, for step.limit.
func lim(a algorithms.Algorithm, requests uint64, window time.Duration, burst uint64) *algorithms.Limit {
	return &algorithms.Limit{Algorithm: a, Requests: requests, Window: window, Burst: burst}
}

const (
	day  = 24 * time.Hour
	year = 365 * day
)

// untilBoundary is the time from t0 to the end of its window of length w.
func untilBoundary(w time.Duration) time.Duration {
	t, wu := t0.UnixMicro(), w.Microseconds()
	return time.Duration(wu-t%wu) * time.Microsecond
}
