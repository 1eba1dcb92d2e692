// Package algotest is the one behavioural test suite that every rate limit
// backend runs: the in-memory limiter and each Redis deployment. It drives a
// backend through Do alone, on a fake clock, and checks what the
// documentation of package algorithms promises for each of the four
// algorithms, to the microsecond.
package algotest

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/rate"
)

// startTime is where every behaviour's clock starts: a realistic instant,
// 123456µs into its second, not a window boundary.
func startTime() time.Time { return time.Date(2026, 11, 21, 10, 0, 0, 123456000, time.UTC) }

// Run runs the suite: for each algorithm (one t.Run each) and each behaviour
// (one t.Run each), it makes a Clock reading 2026-11-21T10:00:00.123456Z and
// an rate.Limiter from newLimiter, which must take its time from that clock, and
// drives it through Do.
//
// Every behaviour uses keys of its own, named after the test and the run, so
// that one shared Redis serves the whole suite, run after run.
func Run(t *testing.T, newLimiter func(t *testing.T, clock *Clock) rate.Limiter) {
	runID := strconv.FormatInt(time.Now().UnixNano(), 36)
	for _, alg := range algorithms.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			for _, b := range behaviours() {
				if b.only != 0 && b.only != alg {
					continue
				}
				t.Run(b.name, func(t *testing.T) {
					clock := NewClock(startTime())
					s := &suite{
						t:      t,
						clock:  clock,
						lim:    newLimiter(t, clock),
						alg:    alg,
						domain: "algotest/" + runID + "/" + t.Name(),
					}
					b.run(s)
				})
			}
		})
	}
}

// behaviour is one property the suite checks, on every algorithm or on one.
type behaviour struct {
	name string
	only algorithms.Algorithm // 0 for every algorithm
	run  func(s *suite)
}

func behaviours() []behaviour {
	return append(append(commonBehaviours(), definingBehaviours()...), chargeBehaviours()...)
}

// suite is one behaviour's view of the backend under test.
type suite struct {
	t      *testing.T
	clock  *Clock
	lim    rate.Limiter
	alg    algorithms.Algorithm
	domain string
	keys   int
	// owing holds the keys whose limits a charge with debt has touched:
	// every op on them says so (Op.Debt), as every op of a rule that
	// charges with debt does, since a backend may keep such states apart.
	owing map[string]bool
}

// key returns a key no other call returns.
func (s *suite) key() rate.Key {
	s.keys++
	return rate.Key{Domain: s.domain, Entries: []rate.Entry{{Key: "key", Value: strconv.Itoa(s.keys)}}}
}

// limit returns a limit of the algorithm under test.
func (s *suite) limit(requests uint64, window time.Duration) algorithms.Limit {
	return algorithms.Limit{Algorithm: s.alg, Requests: requests, Window: window}
}

func (s *suite) do(ops ...rate.Op) []algorithms.Result {
	s.t.Helper()
	for i := range ops {
		id := ops[i].Identity()
		if ops[i].Kind == rate.Charge && ops[i].Debt {
			if s.owing == nil {
				s.owing = make(map[string]bool)
			}
			s.owing[id] = true
		}
		ops[i].Debt = ops[i].Debt || s.owing[id]
	}
	res, err := s.lim.Do(context.Background(), ops)
	require.NoError(s.t, err)
	require.Len(s.t, res, len(ops))
	return res
}

// take asks for n hits and checks the receipt of an admitted Take: the time
// of the decision, and no sequence number outside a sliding window log.
func (s *suite) take(k rate.Key, l algorithms.Limit, n uint64) algorithms.Result {
	s.t.Helper()
	res := s.do(rate.Op{Key: k, Limit: l, Hits: n})[0]
	if res.Allowed {
		require.Equal(s.t, s.clock.Now().UnixMicro(), res.Receipt.At, "receipt time %s", s.at())
		if l.Algorithm != algorithms.SlidingWindowLog {
			require.Zero(s.t, res.Receipt.Seq, "receipt sequence number %s", s.at())
		}
	}
	return res
}

// lease asks for n hits for a lease held for hold (Op.Hold) and checks the
// receipt of an admitted one: the time of the decision, or for a sliding
// window log the lease's end, where its hits are logged.
func (s *suite) lease(k rate.Key, l algorithms.Limit, n uint64, hold time.Duration) algorithms.Result {
	s.t.Helper()
	res := s.do(rate.Op{Key: k, Limit: l, Hits: n, Hold: hold})[0]
	if res.Allowed {
		at := s.clock.Now()
		if l.Algorithm == algorithms.SlidingWindowLog {
			at = at.Add(hold)
		}
		require.Equal(s.t, at.UnixMicro(), res.Receipt.At, "lease's receipt time %s", s.at())
	}
	return res
}

// settle settles the lease of size hits with receipt r and hold: served
// lists what it served since it was taken, and close ends it. A
// settlement's answer says only that it was applied.
func (s *suite) settle(k rate.Key, l algorithms.Limit, r algorithms.Receipt, hold time.Duration, size uint64, served []algorithms.Served, close bool) {
	s.t.Helper()
	res := s.do(rate.Op{Key: k, Limit: l, Kind: rate.Settle,
		Leases: []algorithms.Lease{{Receipt: r, Hold: hold, Size: size, Served: served, Close: close}}})[0]
	require.True(s.t, res.Allowed, "a settlement %s", s.at())
}

func (s *suite) peek(k rate.Key, l algorithms.Limit) algorithms.Result {
	s.t.Helper()
	return s.take(k, l, 0)
}

func (s *suite) refund(k rate.Key, l algorithms.Limit, n uint64, r algorithms.Receipt) algorithms.Result {
	s.t.Helper()
	return s.do(rate.Op{Key: k, Limit: l, Hits: n, Kind: rate.Refund, Receipt: r})[0]
}

// at describes the clock for failure messages.
func (s *suite) at() string {
	now := s.clock.Now()
	return fmt.Sprintf("at %s (start%+v)", now.Format("15:04:05.000000"), now.Sub(startTime()))
}

// admitted requires res to admit with the given remaining and reset.
func (s *suite) admitted(res algorithms.Result, remaining uint64, reset time.Duration, what string) {
	s.t.Helper()
	s.outcome(res, true, remaining, reset, what)
}

// denied requires res to deny with the given remaining and reset.
func (s *suite) denied(res algorithms.Result, remaining uint64, reset time.Duration, what string) {
	s.t.Helper()
	s.outcome(res, false, remaining, reset, what)
}

func (s *suite) outcome(res algorithms.Result, allowed bool, remaining uint64, reset time.Duration, what string) {
	s.t.Helper()
	got := fmt.Sprintf("allowed=%t remaining=%d reset=%s", res.Allowed, res.Remaining, res.ResetAfter)
	want := fmt.Sprintf("allowed=%t remaining=%d reset=%s", allowed, remaining, reset)
	require.Equal(s.t, want, got, "%s %s", what, s.at())
}

// windowStart returns the start of the epoch-aligned window of length w
// holding t.
func windowStart(t time.Time, w time.Duration) time.Time {
	us, wu := t.UnixMicro(), w.Microseconds()
	return time.UnixMicro(us - us%wu).UTC()
}

// us is a number of microseconds as a Duration.
func us(n int64) time.Duration { return time.Duration(n) * time.Microsecond }
