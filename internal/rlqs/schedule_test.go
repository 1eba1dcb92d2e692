package rlqs

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/memory"
	"github.com/ratewarden/ratewarden/internal/rate"
	"github.com/ratewarden/ratewarden/internal/redisx"
	"github.com/ratewarden/ratewarden/internal/testkit/algotest"
	"github.com/ratewarden/ratewarden/internal/testkit/exactness"
	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
	"github.com/ratewarden/ratewarden/internal/testkit/rlstest"
)

var seedFlag = flag.Uint64("rlqs.seed", 0, "the seed of the generated RLQS schedules (0: a fresh one for each test)")

// lowered is limits with every granted rule at half its numbers.
const lowered = `
domain: edge
descriptors:
  - key: fixed
    rate_limit: {unit: minute, requests_per_unit: 300, algorithm: fixed_window}
  - key: log
    rate_limit: {unit: minute, requests_per_unit: 300, algorithm: sliding_window_log}
  - key: counter
    rate_limit: {unit: minute, requests_per_unit: 300, algorithm: sliding_window_counter}
  - key: bucket
    rate_limit: {unit: minute, requests_per_unit: 300, algorithm: token_bucket, burst: 50}
  - key: free
    rate_limit: {unlimited: true}
`

// rlqsSchedule is what three Envoys on two servers do for a few minutes:
// per Envoy, how many requests it asks for in each 100 ms step and what
// befalls it; and the reload and the loss of Redis's state, if any.
type rlqsSchedule struct {
	seed  uint64
	steps int
	// rates[j][i] is Envoy j's requests in step i; -1 when it is gone
	// (neither asks nor reports).
	rates [][]int
	// resets[j] are the steps at which Envoy j's stream is lost (it
	// reconnects at its next report); crashes[j] those at which it goes
	// away with its stream, as a process that ends does.
	resets, crashes [][]int
	reloadAt        int // the step the limit is halved at; 0 for none
	restoreAt       int // the step it is restored at; 0 for none
	flushAt         int // the step Redis loses its state at; 0 for none
}

// newRLQSSchedule draws a schedule of steps 100 ms steps for envoys
// Envoys from seed: phases of idleness, a trickle, a steady demand and
// bursts that stop dead; Envoys that vanish for a while, with their
// stream open (half-open) or closed (crashed); lost streams; a reload that
// halves the limit (and sometimes restores it); and, when flush, Redis
// losing its state.
func newRLQSSchedule(seed uint64, envoys, steps int, flush bool) *rlqsSchedule {
	rng := rand.New(rand.NewPCG(seed, 28))
	s := &rlqsSchedule{seed: seed, steps: steps,
		rates: make([][]int, envoys), resets: make([][]int, envoys), crashes: make([][]int, envoys)}
	for j := range envoys {
		for i := 0; i < steps; {
			n := 10 + rng.IntN(200) // 1–21 s
			var rate int
			switch x := rng.IntN(100); {
			case x < 15:
				rate = 0 // idle
			case x < 30:
				rate = rng.IntN(2) // a trickle
			case x < 80:
				rate = 1 + rng.IntN(5) // steady
			case x < 92:
				rate, n = 10+rng.IntN(20), 5+rng.IntN(25) // a burst that stops dead
			default:
				rate, n = -1, 50+rng.IntN(250) // gone for 5–30 s
				if rng.IntN(2) == 0 {
					s.crashes[j] = append(s.crashes[j], i)
				}
			}
			for ; n > 0 && i < steps; n, i = n-1, i+1 {
				s.rates[j] = append(s.rates[j], rate)
			}
		}
		for range rng.IntN(3) {
			s.resets[j] = append(s.resets[j], rng.IntN(steps))
		}
	}
	if rng.IntN(3) > 0 {
		s.reloadAt = steps/5 + rng.IntN(steps/2)
		if rng.IntN(2) == 0 {
			s.restoreAt = s.reloadAt + 100 + rng.IntN(steps-s.reloadAt-100)
		}
	}
	if flush && rng.IntN(2) == 0 {
		s.flushAt = steps/5 + rng.IntN(steps/2)
	}
	return s
}

// String returns the schedule's events and each Envoy's demand, in a few
// lines.
func (s *rlqsSchedule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: reload at step %d, restore at %d, flush at %d\n", s.seed, s.reloadAt, s.restoreAt, s.flushAt)
	for j, rates := range s.rates {
		var asked, gone int
		for _, r := range rates {
			if r < 0 {
				gone++
			} else {
				asked += r
			}
		}
		fmt.Fprintf(&b, "  envoy %d: %d requests, gone %d steps, resets at %v, crashes at %v\n", j, asked, gone, s.resets[j], s.crashes[j])
	}
	return b.String()
}

// rlqsSeed returns -rlqs.seed, or a fresh seed.
func rlqsSeed() uint64 {
	if *seedFlag != 0 {
		return *seedFlag
	}
	return rand.Uint64()
}

// TestGrantsFollowGeneratedSchedules plays generated schedules with three
// Envoys on two servers, over the memory backend and a Redis Cluster, for
// every algorithm, and holds every request the Envoys admitted to the
// limit's own rule with the exactness checker: counting per window (and per
// any window's length for the log, and the bucket's capacity plus its
// refill for the bucket) only the admitted requests inside it, across a
// reload that halves the limit, Envoys that vanish with their grants,
// streams that are lost, and Redis losing its state (after which what was
// granted before may still be served, for the grants' time to live).
func TestGrantsFollowGeneratedSchedules(t *testing.T) {
	backends := []struct {
		name  string
		flush bool
		new   func(t *testing.T, prefix string) (func(*algotest.Clock) rate.Limiter, func())
	}{
		{"memory", false, func(t *testing.T, _ string) (func(*algotest.Clock) rate.Limiter, func()) {
			var mem *memory.Limiter
			return func(clk *algotest.Clock) rate.Limiter {
				if mem == nil { // one store for every replica
					mem = memory.New(memory.WithClock(clk.Now))
					t.Cleanup(mem.Close)
				}
				return mem
			}, nil
		}},
		{"cluster", true, func(t *testing.T, prefix string) (func(*algotest.Clock) rate.Limiter, func()) {
			cluster := redistest.SharedCluster(t)
			flush := func() {
				for _, m := range cluster.Masters(t) {
					require.NoError(t, m.Client(t).FlushAll(context.Background()).Err())
				}
			}
			return func(clk *algotest.Clock) rate.Limiter {
				lim, err := redisx.NewLimiter(cluster.Client(t), 2, redisx.WithKeyPrefix(prefix), redisx.WithClock(clk.Now))
				require.NoError(t, err)
				t.Cleanup(lim.Close)
				return lim
			}, flush
		}},
	}
	for _, b := range backends {
		for _, key := range []string{"fixed", "log", "counter", "bucket"} {
			t.Run(b.name+"/"+key, func(t *testing.T) {
				seed := rlqsSeed()
				s := newRLQSSchedule(seed, 3, 4*600, b.flush)
				backend, flush := b.new(t, fmt.Sprintf("rlqs-%d:", seed))
				f := newReplicas(t, 3, 2, backend)
				violations, admitted := f.play(s, key, flush)
				if len(violations) > 0 {
					t.Errorf("%d intervals admitted past the limit; replay with\n  go test ./internal/rlqs -run '^%s$' -rlqs.seed=%d -v\n%s",
						len(violations), t.Name(), seed, s)
					for _, v := range violations[:min(len(violations), 5)] {
						t.Log(v)
					}
				}
				t.Logf("seed %d: admitted %d; %s", seed, admitted, strings.TrimSpace(s.String()))
			})
		}
	}
}

// play has f's Envoys follow s on the bucket of rule key, recording every
// request, and returns the intervals the checker found past the limit and
// how many requests were admitted. flush, if set, makes the backend lose
// its state.
func (f *fixture) play(s *rlqsSchedule, key string, flush func()) ([]exactness.Violation, uint64) {
	t := f.t
	bucket := map[string]string{key: "acme"}
	limitOf := func(cfg *config.Config) exactness.Limit {
		m, ok := cfg.Match("edge", Entries(bucket))
		require.True(t, ok)
		return exactness.Limit{Limit: m.Rule.Limits[0].Limit}
	}
	full, half := f.cfg.Load(), rlstest.Limits(t, lowered)
	rec := exactness.NewRecorder(map[string]exactness.Limit{key: limitOf(full)})
	// A grant lives at most two report intervals from when its action
	// arrives: what was granted before a reload, or before Redis lost its
	// state, may be served that long after it.
	life := inFlight + 2*DefaultOptions().ReportInterval
	var admitted uint64
	for i := range s.steps {
		// Each step's reports are held while the Envoys make the step's
		// requests, under the actions the reports will replace: every
		// report has requests in flight, as a real one may.
		for j, e := range f.envoys {
			if slices.Contains(s.resets[j], i) || slices.Contains(s.crashes[j], i) {
				e.Disconnect() // its next report, this step's unless it is gone, opens a new stream
			}
		}
		f.clk.Advance(100 * time.Millisecond)
		now := f.clk.Now()
		for _, srv := range f.srvs {
			srv.hold()
		}
		for j, e := range f.envoys {
			if s.rates[j][i] >= 0 {
				e.Tick()
			}
		}
		switch i {
		case s.reloadAt:
			if i > 0 {
				f.cfg.Store(half)
				rec.Reload(key, limitOf(half), now, now.Add(life))
			}
		case s.restoreAt:
			if i > 0 {
				f.cfg.Store(full)
				rec.Reload(key, limitOf(full), now, now.Add(life))
			}
		case s.flushAt:
			if i > 0 && flush != nil {
				flush()
				rec.Loss(now, now)
			}
		}
		for j, e := range f.envoys {
			for range max(s.rates[j][i], 0) {
				ok := e.Request(bucket)
				rec.Add(exactness.Call{Replica: j % len(f.srvs), Caller: j, Limit: key, Kind: exactness.Take, Hits: 1,
					Sent: now, Received: now, Allowed: ok})
				if ok {
					admitted++
				}
			}
		}
		for _, srv := range f.srvs {
			srv.release()
		}
		f.settle()
	}
	return exactness.CheckAdmitted(rec.History(), exactness.Tolerance{Hold: life}), admitted
}

// TestGrantsAdmitNinetyPercentAtTwiceTheLimit: three Envoys on two servers
// over a Redis Cluster ask for twice a limit of 600 a minute between them,
// one for half of it and two for a quarter each, started 1.7 s apart (so
// that they report apart, as Envoys do). Every algorithm admits at
// least 90% of the limit: in every minute (after the first for the
// sliding ones, which start from nothing before it), and for the bucket
// its capacity plus its refill over the run.
func TestGrantsAdmitNinetyPercentAtTwiceTheLimit(t *testing.T) {
	cluster := redistest.SharedCluster(t)
	for _, key := range []string{"fixed", "log", "counter", "bucket"} {
		t.Run(key, func(t *testing.T) {
			prefix := fmt.Sprintf("rlqs-90-%d:", rand.Uint64())
			f := newReplicas(t, 3, 2, func(clk *algotest.Clock) rate.Limiter {
				lim, err := redisx.NewLimiter(cluster.Client(t), 2, redisx.WithKeyPrefix(prefix), redisx.WithClock(clk.Now))
				require.NoError(t, err)
				t.Cleanup(lim.Close)
				return lim
			})
			const minutes = 5
			admitted := f.run(map[string]string{key: "acme"}, minutes*600, func(i, j int) int {
				switch {
				case i < 17*j:
					return 0 // the Envoys start apart, and report apart
				case j == 0:
					return 1 // 10 a second
				}
				return (i + j) % 2 // 5 a second each
			}, nil)
			per := perMinute(admitted)
			var total uint64
			for m, n := range per {
				total += n
				switch {
				case key == "bucket":
				case m == 0 && (key == "log" || key == "counter"):
				default:
					assert.GreaterOrEqual(t, n, uint64(540), "minute %d", m)
				}
			}
			if key == "bucket" {
				assert.GreaterOrEqual(t, total, uint64(0.9*(100+600*minutes)), "the bucket's capacity and refill")
			}
			t.Logf("admitted per minute %v, %d in all", per, total)
		})
	}
}
