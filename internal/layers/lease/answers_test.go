package lease

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/memory"
	"github.com/ratewarden/ratewarden/internal/rate"
	"github.com/ratewarden/ratewarden/internal/testkit/algotest"
)

// The tests here hold leases to what they must never change, with one
// replica, against a twin backend without leases on the same clock.

// TestTokenBudgetChargesAndChecks runs a token budget as Envoy Gateway's
// AI Gateway counts it: a check of 0 hits before each request, the
// response's tokens charged when it ends (records, as envoyproxy/ratelimit
// counts them), beside takes of the same limit that make it hot. Charges
// and checks never take or hold a lease, and every answer, check, charge or
// take, is the twin's.
func TestTokenBudgetChargesAndChecks(t *testing.T) {
	for _, alg := range leased {
		t.Run(alg.String(), func(t *testing.T) {
			clock := algotest.NewClock(t0)
			mem := memory.New(memory.WithClock(clock.Now))
			twin := memory.New(memory.WithClock(clock.Now))
			t.Cleanup(mem.Close)
			t.Cleanup(twin.Close)
			rec := &recorder{Limiter: mem}
			r := newReplica(t, rec, clock.Now)
			budget := algorithms.Limit{Algorithm: alg, Requests: 1000, Window: time.Hour}
			same := func(op rate.Op, what string) algorithms.Result {
				t.Helper()
				got := r.do(t, op)[0]
				want, err := twin.Do(context.Background(), []rate.Op{op})
				require.NoError(t, err)
				require.Equal(t, fmt.Sprintf("allowed=%t remaining=%d", want[0].Allowed, want[0].Remaining),
					fmt.Sprintf("allowed=%t remaining=%d", got.Allowed, got.Remaining), what)
				return got
			}
			charge := func(n uint64) rate.Op {
				op := take("budget", budget, n)
				op.Kind = rate.Charge
				return op
			}
			// The budget alone: checks, and charges of 56, 66 and 800.
			for _, n := range []uint64{56, 66, 800} {
				same(take("budget", budget, 0), "a check")
				same(charge(n), fmt.Sprintf("a charge of %d", n))
			}
			got := same(take("budget", budget, 0), "a check after 922 tokens")
			assert.True(t, got.Allowed)
			assert.EqualValues(t, 78, got.Remaining)
			n, _ := r.obs.get(Taken)
			assert.Zero(t, n, "charges and checks took a lease")

			// The same limit made hot by takes, with a check and a charge
			// now and then: the leases are settled first, every answer is
			// the twin's.
			hot := algorithms.Limit{Algorithm: alg, Requests: 100_000, Window: time.Hour}
			hotCharge := func(n uint64) rate.Op {
				op := take("hot", hot, n)
				op.Kind = rate.Charge
				return op
			}
			for i := range 3000 {
				switch {
				case i%97 == 0:
					same(hotCharge(uint64(1+i%50)), fmt.Sprintf("charge %d", i))
				case i%31 == 0:
					same(take("hot", hot, 0), fmt.Sprintf("check %d", i))
				default:
					same(take("hot", hot, 1), fmt.Sprintf("take %d", i))
				}
				clock.Advance(50 * time.Microsecond)
			}
			n, _ = r.obs.get(Taken)
			assert.Positive(t, n, "the hot limit was leased")
			for _, op := range rec.ops {
				if op.Kind == rate.Charge || op.Kind == rate.Take && op.Hits == 0 {
					assert.Zero(t, op.Hold, "a charge or check sent as a lease")
				}
			}
		})
	}
}

// TestRemainingAcrossRefillAndExpiry serves a limit of 20 000 a second at
// 10 000 a second for two seconds, so that the bucket refills and the
// windows slide and roll while leases serve: every take's remaining is the
// twin's, but for a log's, which may be lower by the hits of one slot (a
// hit served from a lease is logged at the end of its slot, and leaves the
// window that much later), and never rises between two takes more than the
// twin's does.
func TestRemainingAcrossRefillAndExpiry(t *testing.T) {
	for _, alg := range leased {
		t.Run(alg.String(), func(t *testing.T) {
			clock := algotest.NewClock(t0.Truncate(time.Second).Add(300 * time.Millisecond))
			mem := memory.New(memory.WithClock(clock.Now))
			twin := memory.New(memory.WithClock(clock.Now))
			t.Cleanup(mem.Close)
			t.Cleanup(twin.Close)
			r := newReplica(t, mem, clock.Now)
			lim := algorithms.Limit{Algorithm: alg, Requests: 20_000, Window: time.Second}
			const step = 100 * time.Microsecond
			slack := uint64(slotOf(lim, tau)/step) + 1
			var lastGot, lastWant uint64
			next := clock.Now().Add(tau / 4)
			for i := range 20_000 {
				op := take("hot", lim, 1)
				got := r.do(t, op)[0]
				want, err := twin.Do(context.Background(), []rate.Op{op})
				require.NoError(t, err)
				require.Equal(t, want[0].Allowed, got.Allowed, "take %d", i)
				if alg == algorithms.SlidingWindowLog {
					require.LessOrEqual(t, got.Remaining, want[0].Remaining, "take %d", i)
					require.GreaterOrEqual(t, got.Remaining+slack, want[0].Remaining, "take %d", i)
				} else {
					require.Equal(t, want[0].Remaining, got.Remaining, "take %d", i)
				}
				if i > 0 && got.Remaining > lastGot {
					require.LessOrEqual(t, got.Remaining-lastGot, max(want[0].Remaining, lastWant)-min(want[0].Remaining, lastWant)+slack,
						"take %d: the remaining rose by more than the twin's", i)
				}
				lastGot, lastWant = got.Remaining, want[0].Remaining
				clock.Advance(step)
				if now := clock.Now(); !now.Before(next) {
					r.tick(now)
					next = now.Add(tau / 4)
				}
			}
			n, _ := r.obs.get(Served)
			assert.Greater(t, n, 15_000, "takes served from leases")
		})
	}
}

// swapped is a backend that can lose its state: lose replaces its state
// with an empty one, as a flushed or restarted Redis does.
type swapped struct {
	mu    sync.Mutex
	clock func() time.Time
	cur   *memory.Limiter
}

func (s *swapped) Do(ctx context.Context, ops []rate.Op) ([]algorithms.Result, error) {
	s.mu.Lock()
	cur := s.cur
	s.mu.Unlock()
	return cur.Do(ctx, ops)
}

func (s *swapped) lose(t *testing.T) {
	fresh := memory.New(memory.WithClock(s.clock))
	t.Cleanup(fresh.Close)
	s.mu.Lock()
	s.cur = fresh
	s.mu.Unlock()
}

// TestSettlementsOfALostStateGiveNothingBack: replica A serves a hot limit
// from leases; the backend loses its state; replica B takes the whole
// limit on the new state; then A settles its leases, which the new state
// never took: B is denied as before, A's settlements gave it nothing.
func TestSettlementsOfALostStateGiveNothingBack(t *testing.T) {
	for _, alg := range leased {
		t.Run(alg.String(), func(t *testing.T) {
			clock := algotest.NewClock(t0)
			back := &swapped{clock: clock.Now, cur: memory.New(memory.WithClock(clock.Now))}
			t.Cleanup(back.cur.Close)
			a, b := newReplica(t, back, clock.Now), newReplica(t, back, clock.Now)
			lim := algorithms.Limit{Algorithm: alg, Requests: 1000, Window: time.Hour}
			op := take("lost", lim, 1)
			for range 200 {
				a.do(t, op)
				clock.Advance(50 * time.Microsecond)
			}
			require.Positive(t, a.held(op), "A holds a lease")
			back.lose(t)
			var admitted uint64
			for range 1200 {
				if b.do(t, op)[0].Allowed {
					admitted++
				}
				clock.Advance(time.Microsecond)
			}
			clock.Advance(tau)
			b.tick(clock.Now())
			require.Equal(t, lim.Requests, admitted, "B takes the whole limit on the new state")
			a.tick(clock.Now())
			a.Close()
			for i := range 10 {
				res := b.do(t, op)[0]
				assert.False(t, res.Allowed, "take %d after A's settlements", i)
				assert.Zero(t, res.Remaining)
			}
		})
	}
}
