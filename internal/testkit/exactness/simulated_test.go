package exactness

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

// simulation is a history made by a correct server: the Go twin of the
// limit, deciding each call at a random moment within its [Sent, Received].
type simulation struct {
	limit   Limit
	lowered Limit
	calls   []Call
	decided []time.Time
	reload  Reload
	loss    Loss
}

// simulate returns the calls of callers callers, each making calls one at
// a time for span, against a limit of alg, with a reload that lowers it
// and a loss of the state midway. A tenth of the calls are refunds when
// refunds is set.
func simulate(seed uint64, alg algorithms.Algorithm, callers int, span time.Duration, refunds bool) *simulation {
	rng := rand.New(rand.NewPCG(seed, 7))
	l := algorithms.Limit{Algorithm: alg, Requests: 200, Window: time.Second}
	lowered := l
	lowered.Requests = 120
	if alg == algorithms.TokenBucket {
		l.Burst, lowered.Burst = 100, 80
	}
	s := &simulation{limit: Limit{Limit: l}, lowered: Limit{Limit: lowered}}
	s.reload = Reload{Limit: "l", To: s.lowered, Before: t0.Add(span * 2 / 3), After: t0.Add(span*2/3 + 50*time.Millisecond)}
	s.loss = Loss{Before: t0.Add(span / 3), After: t0.Add(span/3 + time.Millisecond)}
	for k := range callers {
		t := t0.Add(time.Duration(rng.IntN(1000)) * time.Microsecond)
		for t.Before(t0.Add(span)) {
			d := time.Duration(50+rng.IntN(1500)) * time.Microsecond
			if rng.IntN(50) == 0 {
				d = time.Duration(rng.IntN(30)) * time.Millisecond
			}
			c := Call{Replica: k % 2, Caller: k, Limit: "l", Sent: t, Received: t.Add(d)}
			switch p := rng.IntN(100); {
			case p < 70:
				c.Kind, c.Hits = Take, uint64(1+rng.IntN(3))
				if rng.IntN(30) == 0 {
					c.Hits = uint64(1 + rng.IntN(100))
				}
			case p < 80:
				c.Kind = Check
			case p < 90 || !refunds:
				c.Kind, c.Hits = Charge, uint64(1+rng.IntN(10))
			default:
				c.Kind, c.Hits = Refund, uint64(1+rng.IntN(2))
			}
			s.calls = append(s.calls, c)
			s.decided = append(s.decided, t.Add(time.Duration(rng.Int64N(int64(d)+1))))
			t = t.Add(d + time.Duration(rng.IntN(3000))*time.Microsecond)
		}
	}
	return s
}

// run answers the calls as a correct server would, then breaks the
// answers with breaks, and returns the history.
func (s *simulation) run(breaks func(c *Call, decided time.Time, st algorithms.State, l Limit)) History {
	order := make([]int, len(s.calls))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return s.decided[order[a]].Before(s.decided[order[b]]) })
	st := algorithms.NewState(s.limit.Algorithm)
	lost := false
	for _, i := range order {
		c, now := &s.calls[i], s.decided[i]
		if !lost && !now.Before(s.loss.After) {
			st, lost = algorithms.NewState(s.limit.Algorithm), true
		}
		// A call sent after the reload's window is decided under the new
		// numbers, and one decided before it under the old; the others,
		// under either (a replica may reload while a call is under way).
		l := s.limit
		switch {
		case !c.Sent.Before(s.reload.After):
			l = s.lowered
		case !now.Before(s.reload.Before) && i%2 == 0:
			l = s.lowered
		}
		var r algorithms.Result
		switch c.Kind {
		case Take, Check:
			r = st.Take(l.Limit, now, c.Hits)
		case Charge:
			if l.Debt {
				r = st.Charge(l.Limit, now, c.Hits)
			} else {
				r = st.Record(l.Limit, now, c.Hits)
			}
		case Refund:
			r = st.Refund(l.Limit, now, c.Hits, algorithms.Receipt{})
		}
		c.Allowed, c.Remaining, c.Reset = r.Allowed, r.Remaining, r.ResetAfter
		if breaks != nil {
			breaks(c, now, st, l)
		}
	}
	rec := NewRecorder(map[string]Limit{"l": s.limit})
	for _, c := range s.calls {
		rec.Add(c)
	}
	rec.Reload("l", s.lowered, s.reload.Before, s.reload.After)
	rec.Loss(s.loss.Before, s.loss.After)
	return rec.History()
}

func TestChecksQuietOnCorrectServers(t *testing.T) {
	tolerances := []Tolerance{{}, {Slack: 200 * time.Microsecond}, {Slack: time.Millisecond, Lag: 3 * time.Millisecond, Hold: 2 * time.Millisecond}}
	for _, alg := range algorithms.Algorithms {
		for seed := range uint64(3) {
			t.Run(fmt.Sprintf("%s/%d", alg, seed), func(t *testing.T) {
				t.Parallel() // a simulation on a fake clock: nothing to starve
				s := simulate(seed, alg, 2+2*int(seed), 2*time.Second, seed != 1)
				if seed == 2 {
					s.limit.Debt, s.lowered.Debt = true, true
					s.reload.To = s.lowered
				}
				h := s.run(nil)
				tol := tolerances[seed]
				begin := time.Now()
				vs := append(CheckAdmitted(h, tol), CheckDenials(h, tol)...)
				vs = append(vs, CheckRemaining(h, tol)...)
				t.Logf("%d calls checked in %s", len(h.Calls), time.Since(begin).Round(time.Millisecond))
				assert.Empty(t, vs, Report(vs, 3))
			})
		}
	}
}

func TestChecksFireOnBrokenServers(t *testing.T) {
	for _, alg := range algorithms.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			t.Parallel() // a simulation on a fake clock: nothing to starve
			// Admit the denials of the first 50 ms of each second: hits past
			// the limit. Refunds would give as many back. (A bucket that is
			// not full when an interval starts hides what it admitted past
			// its level: check 1 is a lower bound.)
			s := simulate(1, alg, 6, 3*time.Second, false)
			h := s.run(func(c *Call, now time.Time, st algorithms.State, l Limit) {
				if c.Kind == Take && !c.Allowed && c.Hits <= 3 && now.Sub(now.Truncate(time.Second)) < 50*time.Millisecond {
					st.Record(l.Limit, now, c.Hits)
					c.Allowed = true
				}
			})
			assert.NotEmpty(t, CheckAdmitted(h, Tolerance{}), "hits past the limit")

			// Deny a take the twin admits, now and then.
			s = simulate(2, alg, 6, 3*time.Second, true)
			n := 0
			h = s.run(func(c *Call, now time.Time, st algorithms.State, l Limit) {
				if c.Kind == Take && c.Allowed && c.Remaining > 20 {
					if n++; n%50 == 0 {
						st.Refund(l.Limit, now, c.Hits, algorithms.Receipt{})
						c.Allowed = false
					}
				}
			})
			vs := CheckDenials(h, Tolerance{})
			require.NotEmpty(t, vs, "false denials")
			assert.Empty(t, CheckAdmitted(h, Tolerance{}))

			// Answer the remaining of 10 calls before.
			s = simulate(3, alg, 1, 2*time.Second, true)
			var last []uint64
			h = s.run(func(c *Call, _ time.Time, _ algorithms.State, _ Limit) {
				last = append(last, c.Remaining)
				if len(last) > 10 {
					c.Remaining = last[len(last)-11]
				}
			})
			vs = CheckRemaining(h, Tolerance{})
			assert.NotEmpty(t, vs, "stale remaining")
			assert.Empty(t, CheckDenials(h, Tolerance{}))
		})
	}
}
