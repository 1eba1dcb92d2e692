package lease

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/memory"
	"github.com/ratewarden/ratewarden/internal/rate"
	"github.com/ratewarden/ratewarden/internal/testkit/algotest"
)

// TestLeaseTimeTradeOff runs, on the clock, two replicas leasing one limit
// at several lease times τ: a hot limit far above its load (10 000 takes a
// second on each replica), where τ sets how often the backend is called,
// and a limit of 1 000 a second offered twice that, where τ sets how much is
// held from others. It logs the table the default (RLS_LEASE_TIME) was
// chosen from, and holds the default to what it must give: fewer than one
// backend op in 50 decisions, and 95% of what a binding limit allows.
func TestLeaseTimeTradeOff(t *testing.T) {
	const defaultTime = 50 * time.Millisecond // RLS_LEASE_TIME's default
	times := []time.Duration{10 * time.Millisecond, 25 * time.Millisecond, defaultTime,
		100 * time.Millisecond, 200 * time.Millisecond}
	var table strings.Builder
	fmt.Fprintf(&table, "\n%-24s %8s %18s %18s\n", "algorithm", "τ", "backend ops/take", "binding admitted")
	for _, alg := range algorithms.Algorithms {
		for _, tau := range times {
			perTake := hotOpsPerTake(t, alg, tau)
			share := bindingShare(t, alg, tau)
			fmt.Fprintf(&table, "%-24s %8s %18.4f %17.1f%%\n", alg, tau, perTake, 100*share)
			if tau == defaultTime {
				assert.Less(t, perTake, 0.02, "%s: backend ops per take at the default", alg)
				assert.GreaterOrEqual(t, share, 0.95, "%s: admitted of what the limit allows at the default", alg)
			}
		}
	}
	t.Log(table.String())
}

// simulation is two replicas with lease time tau over one memory backend
// on a clock, with the backend's ops counted.
type simulation struct {
	clock    *algotest.Clock
	mem      *memory.Limiter
	rec      *recorder
	replicas [2]*Limiter
	next     time.Time
	tau      time.Duration
}

func newSimulation(t *testing.T, tau time.Duration) *simulation {
	t.Helper()
	clock := algotest.NewClock(t0.Truncate(time.Second))
	mem := memory.New(memory.WithClock(clock.Now))
	t.Cleanup(mem.Close)
	s := &simulation{clock: clock, mem: mem, rec: &recorder{Limiter: mem}, next: clock.Now().Add(tau), tau: tau}
	for i := range s.replicas {
		l, err := New(s.rec, Options{Time: tau, MinHits: minHits, Now: clock.Now})
		require.NoError(t, err)
		t.Cleanup(l.Close)
		s.replicas[i] = l
	}
	return s
}

// take sends one take to replica i, waits for what it started, and moves
// the clock on by step, sweeping every τ as the replicas do.
func (s *simulation) take(t *testing.T, i int, op rate.Op, step time.Duration) bool {
	r := replica{Limiter: s.replicas[i]}
	ok := r.do(t, op)[0].Allowed
	s.clock.Advance(step)
	if now := s.clock.Now(); !now.Before(s.next) {
		for _, l := range s.replicas {
			replica{Limiter: l}.tick(now)
		}
		s.next = now.Add(s.tau)
	}
	return ok
}

// hotOpsPerTake returns the backend's ops per take of a limit far above
// 20 000 takes a second over two replicas, for two seconds.
func hotOpsPerTake(t *testing.T, alg algorithms.Algorithm, tau time.Duration) float64 {
	s := newSimulation(t, tau)
	lim := algorithms.Limit{Algorithm: alg, Requests: 100_000, Window: time.Hour}
	const takes = 40_000
	for i := range takes {
		require.True(t, s.take(t, i%2, take("hot", lim, 1), 50*time.Microsecond))
	}
	_, ops := s.rec.counts()
	return float64(ops) / takes
}

// bindingShare returns what two replicas admit of a limit of 1 000 a second
// offered 2 000 a second for 10 seconds, as a share of what the limit allows
// (a bucket starts full, so it allows its burst more).
func bindingShare(t *testing.T, alg algorithms.Algorithm, tau time.Duration) float64 {
	s := newSimulation(t, tau)
	lim := algorithms.Limit{Algorithm: alg, Requests: 1000, Window: time.Second}
	allows := 10 * lim.Requests
	if alg.Spec().Burst {
		allows += lim.Requests
	}
	var admitted uint64
	for i := range 20_000 {
		if s.take(t, i%2, take("bound", lim, 1), 500*time.Microsecond) {
			admitted++
		}
	}
	return float64(admitted) / float64(allows)
}
