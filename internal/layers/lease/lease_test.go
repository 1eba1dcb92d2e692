package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/memory"
	"github.com/ratewarden/ratewarden/internal/option"
	"github.com/ratewarden/ratewarden/internal/rate"
	"github.com/ratewarden/ratewarden/internal/testkit/algotest"
)

// t0 is a realistic time a little after a minute boundary.
var t0 = time.Date(2026, 11, 21, 10, 0, 0, 250_000_000, time.UTC)

const (
	tau     = 50 * time.Millisecond
	minHits = 8
)

// recorder records the ops that reach the Limiter it wraps, and the calls.
type recorder struct {
	rate.Limiter
	mu    sync.Mutex
	ops   []rate.Op
	calls int
}

func (r *recorder) Do(ctx context.Context, ops []rate.Op) ([]algorithms.Result, error) {
	r.mu.Lock()
	r.ops = append(r.ops, ops...)
	r.calls++
	r.mu.Unlock()
	return r.Limiter.Do(ctx, ops)
}

func (r *recorder) counts() (calls, ops int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls, len(r.ops)
}

// counter is an Observer that sums what it is told, per event.
type counter struct {
	mu   sync.Mutex
	hits map[Event]uint64
	n    map[Event]int
	tags map[string]bool
}

func newCounter() *counter {
	return &counter{hits: map[Event]uint64{}, n: map[Event]int{}, tags: map[string]bool{}}
}

func (c *counter) ObserveLease(op *rate.Op, e Event, hits uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hits[e] += hits
	c.n[e]++
	c.tags[op.Tag] = true
}

func (c *counter) get(e Event) (int, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[e], c.hits[e]
}

// replica is one replica's lease layer in a simulation on a fake clock.
type replica struct {
	*Limiter
	obs *counter
}

func newReplica(t *testing.T, backend rate.Limiter, now func() time.Time) replica {
	t.Helper()
	obs := newCounter()
	l, err := New(backend, Options{Time: tau, MinHits: minHits, Observer: obs, Now: now, manual: true})
	require.NoError(t, err)
	t.Cleanup(l.Close)
	return replica{Limiter: l, obs: obs}
}

// do runs ops, and waits for what it started in the background, so that a
// simulation on a fake clock is deterministic.
func (r replica) do(t *testing.T, ops ...rate.Op) []algorithms.Result {
	t.Helper()
	res, err := r.Do(context.Background(), ops)
	require.NoError(t, err)
	r.pending.Wait()
	return res
}

// tick settles what ended by now, as the sweeper does every quarter of τ
// (the replicas of these tests, on a fake clock, have none).
func (r replica) tick(now time.Time) {
	r.expire(now)
	r.pending.Wait()
}

func take(k string, l algorithms.Limit, hits uint64) rate.Op {
	return rate.Op{Key: rate.Key{Domain: "d", Entries: []rate.Entry{{Key: "k", Value: k}}},
		Limit: l, Hits: hits, Tag: "d.k_" + k}
}

func peek(t *testing.T, l rate.Limiter, op rate.Op) algorithms.Result {
	t.Helper()
	op.Hits = 0
	res, err := l.Do(context.Background(), []rate.Op{op})
	require.NoError(t, err)
	return res[0]
}

// leased are the algorithms the tests lease.
var leased = algorithms.Algorithms

// TestNewRefusesBadOptions: New refuses what Validate refuses, naming the
// field; DefaultOptions are valid.
func TestNewRefusesBadOptions(t *testing.T) {
	mem := memory.New()
	t.Cleanup(mem.Close)
	_, err := New(mem, Options{MinHits: 8})
	assert.ErrorContains(t, err, "Time must be positive")
	assert.Equal(t, "Time", option.Of(err).Field)
	_, err = New(mem, Options{Time: tau, MinHits: 1})
	assert.ErrorContains(t, err, "MinHits must be at least 2")
	assert.Equal(t, "MinHits", option.Of(err).Field)
	l, err := New(mem, DefaultOptions())
	require.NoError(t, err)
	l.Close()
}

// TestColdLimitsDecideAsTheBackend sends a limit fewer takes than a lease
// would hold (5 a second against 8 in τ): every take reaches the backend
// as it was asked, with no lease, and each answer is the one a backend
// without leases gives.
func TestColdLimitsDecideAsTheBackend(t *testing.T) {
	for _, alg := range algorithms.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			clock := algotest.NewClock(t0)
			mem := memory.New(memory.WithClock(clock.Now))
			twin := memory.New(memory.WithClock(clock.Now))
			t.Cleanup(mem.Close)
			t.Cleanup(twin.Close)
			rec := &recorder{Limiter: mem}
			r := newReplica(t, rec, clock.Now)
			lim := algorithms.Limit{Algorithm: alg, Requests: 20, Window: time.Second}
			for i := range 200 {
				op := take("cold", lim, uint64(1+i%3))
				got := r.do(t, op)
				want, err := twin.Do(context.Background(), []rate.Op{op})
				require.NoError(t, err)
				require.Equal(t, want[0].Allowed, got[0].Allowed, "take %d", i)
				require.Equal(t, want[0].Remaining, got[0].Remaining, "take %d", i)
				require.Equal(t, want[0].ResetAfter, got[0].ResetAfter, "take %d", i)
				clock.Advance(200 * time.Millisecond)
				r.tick(clock.Now())
			}
			for _, op := range rec.ops {
				require.False(t, op.Loosens())
				require.Zero(t, op.Hold)
			}
			calls, ops := rec.counts()
			assert.Equal(t, 200, calls)
			assert.Equal(t, 200, ops)
			n, _ := r.obs.get(Taken)
			assert.Zero(t, n)
		})
	}
}

// TestHotLimitIsServedFromLeases sends one limit far above a lease's worth
// of takes, 20 000 a second on the clock, for a second: all are admitted,
// almost none reaches the backend, and what the backend counted is what was
// served, once the leases are given back.
func TestHotLimitIsServedFromLeases(t *testing.T) {
	for _, alg := range leased {
		t.Run(alg.String(), func(t *testing.T) {
			clock := algotest.NewClock(t0)
			mem := memory.New(memory.WithClock(clock.Now))
			twin := memory.New(memory.WithClock(clock.Now))
			t.Cleanup(mem.Close)
			t.Cleanup(twin.Close)
			rec := &recorder{Limiter: mem}
			r := newReplica(t, rec, clock.Now)
			lim := algorithms.Limit{Algorithm: alg, Requests: 100_000, Window: time.Hour}
			const takes = 20_000
			next := clock.Now().Add(tau)
			for i := range takes {
				res := r.do(t, take("hot", lim, 1))
				require.True(t, res[0].Allowed, "take %d", i)
				_, err := twin.Do(context.Background(), []rate.Op{take("hot", lim, 1)})
				require.NoError(t, err)
				clock.Advance(50 * time.Microsecond)
				if now := clock.Now(); !now.Before(next) {
					r.tick(now)
					next = now.Add(tau)
				}
			}
			calls, _ := rec.counts()
			t.Logf("%d takes, %d backend calls", takes, calls)
			assert.Less(t, calls, takes/100, "backend calls")
			nServed, served := r.obs.get(Served)
			assert.Greater(t, served, uint64(takes*98/100))
			assert.Equal(t, int(served), nServed)
			_, tags := r.obs.hits, r.obs.tags
			assert.Equal(t, map[string]bool{"d.k_hot": true}, tags)

			clock.Advance(tau)
			r.tick(clock.Now())
			nTaken, leasedHits := r.obs.get(Taken)
			_, back := r.obs.get(GivenBack)
			assert.Positive(t, nTaken)
			assert.Equal(t, peek(t, twin, take("hot", lim, 0)).Remaining, peek(t, mem, take("hot", lim, 0)).Remaining,
				"the backend counts what was served once the leases are given back (leased %d, given back %d)", leasedHits, back)
		})
	}
}

// TestLeaseEndsWithItsWindow runs a hot limit across a window's end: no
// take after the end is served from a lease taken before it, and the lease
// is given back into its own window, leaving the new one's count alone.
func TestLeaseEndsWithItsWindow(t *testing.T) {
	for _, alg := range leased {
		if !alg.Spec().Windowed {
			continue
		}
		t.Run(alg.String(), func(t *testing.T) {
			clock := algotest.NewClock(t0.Truncate(time.Minute).Add(time.Minute - 20*time.Millisecond))
			mem := memory.New(memory.WithClock(clock.Now))
			t.Cleanup(mem.Close)
			rec := &recorder{Limiter: mem}
			r := newReplica(t, rec, clock.Now)
			lim := algorithms.Limit{Algorithm: alg, Requests: 1_000_000, Window: time.Minute}
			end := clock.Now().Truncate(time.Minute).Add(time.Minute)
			for clock.Now().Before(end) {
				r.do(t, take("hot", lim, 1))
				clock.Advance(50 * time.Microsecond)
			}
			require.NotEmpty(t, r.entryOf(take("hot", lim, 1)).leases, "a lease is held at the window's end")
			calls, _ := rec.counts()
			r.do(t, take("hot", lim, 1))
			after, _ := rec.counts()
			assert.Greater(t, after, calls, "the first take of the new window goes to the backend")
			r.tick(clock.Now())
			for _, op := range rec.ops {
				for _, ls := range op.Leases {
					if ls.Close && ls.Size > ls.Reported {
						assert.Less(t, ls.Receipt.At, end.UnixMicro(), "a settlement of an old lease names the window it was taken in")
					}
				}
			}
			if alg == algorithms.FixedWindow {
				// The new window counts the one take and the lease that came
				// with it, nothing given back from the old.
				assert.Equal(t, lim.Requests-1-r.held(take("hot", lim, 1)), peek(t, mem, take("hot", lim, 0)).Remaining)
			}
		})
	}
}

func (r replica) entryOf(op rate.Op) *entry {
	id := op.Identity()
	s := r.shard(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[id]
}

// TestLeasesShrinkAsTheLimitFills runs one hot limit of 1 000 to its end on
// one replica: every lease is at most a quarter of the room the backend had
// before it, so the leases shrink as the limit fills, the last hits are taken
// one by one, and exactly the limit is admitted.
func TestLeasesShrinkAsTheLimitFills(t *testing.T) {
	for _, alg := range leased {
		t.Run(alg.String(), func(t *testing.T) {
			clock := algotest.NewClock(t0)
			mem := memory.New(memory.WithClock(clock.Now))
			t.Cleanup(mem.Close)
			lim := algorithms.Limit{Algorithm: alg, Requests: 1000, Window: time.Hour}
			type lease struct{ k, room uint64 }
			var leases []lease
			var singles []uint64 // the room before each take sent alone
			spy := &spyLimiter{Limiter: mem, f: func(op rate.Op) {
				if op.Loosens() {
					return
				}
				room := peek(t, mem, op).Remaining
				if op.Hold > 0 {
					leases = append(leases, lease{op.Hits, room})
				} else {
					singles = append(singles, room)
				}
			}}
			r := newReplica(t, spy, clock.Now)
			var admitted uint64
			for range 3000 {
				if r.do(t, take("fill", lim, 1))[0].Allowed {
					admitted++
				}
				clock.Advance(100 * time.Microsecond)
			}
			clock.Advance(tau)
			r.tick(clock.Now())

			assert.Equal(t, lim.Requests, admitted)
			require.NotEmpty(t, leases)
			top := 0
			for i, l := range leases {
				assert.LessOrEqual(t, l.k, l.room/4, "lease %d", i)
				assert.GreaterOrEqual(t, l.k, uint64(minHits), "lease %d", i)
				if l.k > leases[top].k {
					top = i
				}
			}
			for i := top + 1; i < len(leases); i++ {
				assert.LessOrEqual(t, leases[i].k, leases[i-1].k, "lease %d shrinks with the room", i)
			}
			last := leases[len(leases)-1]
			assert.Less(t, last.k, lim.Requests/20, "the last lease is small")
			var alone int
			for _, room := range singles {
				if room > 0 && room < 4*minHits {
					alone++
				}
			}
			assert.GreaterOrEqual(t, alone, 4*minHits-1, "the last hits of the limit are taken one by one")
			t.Logf("leases (k, room before): %v", leases)
		})
	}
}

// TestServedAnswersMeanWhatTheBackendSays runs a hot limit to its end and
// past it on one replica, beside a twin backend without leases: every take
// gets the twin's answer, allowed or not, with its remaining and its reset,
// whether a lease served it or the backend did; but a log's reset after a
// served take, which counts from the end of the hit's slot (slotOf), up to
// a slot more.
func TestServedAnswersMeanWhatTheBackendSays(t *testing.T) {
	for _, alg := range leased {
		t.Run(alg.String(), func(t *testing.T) {
			clock := algotest.NewClock(t0)
			mem := memory.New(memory.WithClock(clock.Now))
			twin := memory.New(memory.WithClock(clock.Now))
			t.Cleanup(mem.Close)
			t.Cleanup(twin.Close)
			r := newReplica(t, mem, clock.Now)
			lim := algorithms.Limit{Algorithm: alg, Requests: 1000, Window: time.Hour}
			for i := range 1500 {
				op := take("hot", lim, 1)
				got := r.do(t, op)
				want, err := twin.Do(context.Background(), []rate.Op{op})
				require.NoError(t, err)
				require.Equal(t, want[0].Allowed, got[0].Allowed, "take %d", i)
				require.Equal(t, want[0].Remaining, got[0].Remaining, "take %d", i)
				if alg == algorithms.SlidingWindowLog && got[0].Allowed {
					// A log logs a served hit at the end of its slot, no
					// more than the slot later than it was served.
					require.GreaterOrEqual(t, got[0].ResetAfter, want[0].ResetAfter, "take %d", i)
					require.Less(t, got[0].ResetAfter, want[0].ResetAfter+slotOf(lim, tau), "take %d", i)
				} else {
					require.Equal(t, want[0].ResetAfter, got[0].ResetAfter, "take %d", i)
				}
				clock.Advance(100 * time.Microsecond)
			}
			n, _ := r.obs.get(Served)
			assert.Greater(t, n, 900, "takes served from leases")
		})
	}
}

// TestRefundsOfServedTakes refunds every fifth take of a hot limit, as the
// service does when another descriptor of the request is denied: a refund of
// a take a lease served takes it back from the lease, so the limit still
// admits exactly its limit net of refunds, the backend ends where a twin
// without leases does, and every answer reports the twin's remaining.
func TestRefundsOfServedTakes(t *testing.T) {
	for _, alg := range leased {
		t.Run(alg.String(), func(t *testing.T) {
			clock := algotest.NewClock(t0)
			mem := memory.New(memory.WithClock(clock.Now))
			twin := memory.New(memory.WithClock(clock.Now))
			t.Cleanup(mem.Close)
			t.Cleanup(twin.Close)
			r := newReplica(t, mem, clock.Now)
			lim := algorithms.Limit{Algorithm: alg, Requests: 1000, Window: time.Hour}
			var admitted, refunded, servedRefunds int
			for i := range 2000 {
				op := take("hot", lim, 1)
				n, _ := r.obs.get(Served)
				got := r.do(t, op)
				m, _ := r.obs.get(Served)
				want, err := twin.Do(context.Background(), []rate.Op{op})
				require.NoError(t, err)
				assert.Equal(t, want[0].Remaining, got[0].Remaining, "take %d", i)
				if got[0].Allowed {
					admitted++
				}
				if i%5 == 4 && got[0].Allowed && want[0].Allowed {
					back := op
					back.Kind, back.Receipt = rate.Refund, got[0].Receipt
					r.do(t, back)
					back.Receipt = want[0].Receipt
					_, err := twin.Do(context.Background(), []rate.Op{back})
					require.NoError(t, err)
					refunded++
					if m > n {
						servedRefunds++
					}
				}
				clock.Advance(100 * time.Microsecond)
			}
			clock.Advance(tau)
			r.tick(clock.Now())
			assert.Equal(t, int(lim.Requests), admitted-refunded)
			assert.Positive(t, servedRefunds, "refunds of takes leases served")
			assert.Equal(t, peek(t, twin, take("hot", lim, 0)).Remaining, peek(t, mem, take("hot", lim, 0)).Remaining)
		})
	}
}

// spyLimiter calls f with each op before passing it on.
type spyLimiter struct {
	rate.Limiter
	mu sync.Mutex
	f  func(rate.Op)
}

func (s *spyLimiter) Do(ctx context.Context, ops []rate.Op) ([]algorithms.Result, error) {
	s.mu.Lock()
	for _, op := range ops {
		s.f(op)
	}
	s.mu.Unlock()
	return s.Limiter.Do(ctx, ops)
}

// TestBindingLimitAcrossReplicas offers a limit of 1 000 a second twice
// that, from two replicas sharing a backend, for 10 seconds on the clock:
// no window admits more than the limit (for the log, no W ending at any
// admission; for the bucket, no span beyond its burst and refill), and the
// run admits at least 95% of what the limit allows.
func TestBindingLimitAcrossReplicas(t *testing.T) {
	for _, alg := range leased {
		t.Run(alg.String(), func(t *testing.T) {
			clock := algotest.NewClock(t0.Truncate(time.Second))
			mem := memory.New(memory.WithClock(clock.Now))
			t.Cleanup(mem.Close)
			replicas := []replica{newReplica(t, mem, clock.Now), newReplica(t, mem, clock.Now)}
			lim := algorithms.Limit{Algorithm: alg, Requests: 1000, Window: time.Second}
			const run = 10 * time.Second
			start := clock.Now()
			var admitted []time.Duration // since start
			next := start.Add(tau)
			for i := 0; clock.Now().Before(start.Add(run)); i++ {
				r := replicas[i%2]
				res := r.do(t, take("bound", lim, 1))
				if res[0].Allowed {
					admitted = append(admitted, clock.Now().Sub(start))
				}
				clock.Advance(500 * time.Microsecond)
				if now := clock.Now(); !now.Before(next) {
					replicas[0].tick(now)
					replicas[1].tick(now)
					next = now.Add(tau)
				}
			}
			allows := lim.Requests * uint64(run/lim.Window)
			switch {
			case alg.Spec().Windowed:
				per := make([]uint64, run/lim.Window)
				for _, at := range admitted {
					per[at/lim.Window]++
				}
				for w, n := range per {
					assert.LessOrEqual(t, n, lim.Requests, "window %d", w)
				}
				t.Logf("admitted per window: %v", per)
			case alg == algorithms.SlidingWindowLog:
				most := mostInAnyWindow(admitted, lim.Window)
				assert.LessOrEqual(t, most, lim.Requests, "the most admitted in any W")
				t.Logf("the most admitted in any W: %d", most)
			default:
				rate := float64(lim.Requests) / lim.Window.Seconds()
				over := mostBeyondRefill(admitted, rate)
				// The bucket refills in slices of a millionth of its window:
				// the refill of a span may pass rate·span by one slice's.
				slice := float64(lim.Requests) / algorithms.SlicesPerWindow
				assert.LessOrEqual(t, over, float64(lim.Requests)+slice, "the most admitted in any span, less its refill")
				allows += lim.Requests // the bucket starts full
				t.Logf("the most admitted in any span less its refill: %.1f", over)
			}
			assert.GreaterOrEqual(t, uint64(len(admitted)), allows*95/100, "of %d allowed", allows)
			n, _ := replicas[0].obs.get(Taken)
			assert.Positive(t, n, "the limit was leased")
		})
	}
}

// mostInAnyWindow returns the most of the times at, in order, that lie in
// one span (t − w, t].
func mostInAnyWindow(at []time.Duration, w time.Duration) uint64 {
	var most uint64
	i := 0
	for j := range at {
		for at[i] <= at[j]-w {
			i++
		}
		most = max(most, uint64(j-i+1))
	}
	return most
}

// mostBeyondRefill returns, over every span [a, b] between two of the times
// at, in order, the most of them that lie in it less rate × (b − a): what a
// bucket refilling at rate holds at most, its burst, when none is too many.
func mostBeyondRefill(at []time.Duration, rate float64) float64 {
	// count(i..j) − rate·(tj − ti) = (j − rate·tj) − (i − rate·ti) + 1.
	most, low := 0.0, 0.0
	for j, t := range at {
		v := float64(j) - rate*t.Seconds()
		if j == 0 || v < low {
			low = v
		}
		most = max(most, v-low+1)
	}
	return most
}

// TestExactAcrossReplicas races 128 callers over two replicas, in real
// time, for 3 000 takes of a limit of 1 000 an hour: never more than 1 000
// are admitted, and once the leases held when the race ended are given
// back, exactly 1 000 have been. Records (charges counted as
// envoyproxy/ratelimit counts, as Envoy Gateway's limits are) take no
// lease, and exactly 1 000 are admitted too.
func TestExactAcrossReplicas(t *testing.T) {
	for _, alg := range leased {
		for _, record := range []bool{false, true} {
			name := alg.String()
			if record {
				name += "/record"
			}
			t.Run(name, func(t *testing.T) { exactAcrossReplicas(t, alg, record) })
		}
	}
}

func exactAcrossReplicas(t *testing.T, alg algorithms.Algorithm, record bool) {
	mem := memory.New()
	t.Cleanup(mem.Close)
	var replicas [2]rate.Limiter
	obs := newCounter()
	for i := range replicas {
		l, err := New(mem, Options{Time: tau, MinHits: minHits, Observer: obs})
		require.NoError(t, err)
		t.Cleanup(l.Close)
		replicas[i] = l
	}
	lim := algorithms.Limit{Algorithm: alg, Requests: 1000, Window: time.Hour}
	op := take("exact", lim, 1)
	if record {
		op.Key.Entries[0].Value = "record"
		op.Kind = rate.Charge
	}
	race, later := raceThenDrain(t, replicas[:], op, 3000, 3*tau)
	n, hits := obs.get(Taken)
	t.Logf("%d leases of %d hits; %d admitted in the race, %d after", n, hits, race, later)
	// Records (charges counted as envoyproxy/ratelimit counts) never take
	// or hold a lease: exactly the limit is admitted, as takes are.
	assert.EqualValues(t, 1000, race+later, "admitted in the race (%d) and after it", race)
	if record {
		assert.Zero(t, n, "records took leases")
	}
}

// raceThenDrain races 128 callers over replicas, in turn, for calls takes
// of op, and returns how many were admitted; then, until a round admits
// nothing, waits for wait (for leases to expire and be given back, and
// remembered denials to be forgotten) and takes op through each replica in
// turn until it is denied, and returns how many those rounds admitted (when
// the race admitted the whole limit, one take through each must be denied). The
// race must not admit more than op's limit: leases may hold, when it ends,
// hits it did not admit; they come back within wait, and are admitted
// after.
func raceThenDrain(t *testing.T, replicas []rate.Limiter, op rate.Op, calls int, wait time.Duration) (race, later int) {
	t.Helper()
	var admitted, sent atomic.Int64
	var wg sync.WaitGroup
	for c := range 128 {
		wg.Go(func() {
			for sent.Add(1) <= int64(calls) {
				res, err := replicas[c%len(replicas)].Do(context.Background(), []rate.Op{op})
				if !assert.NoError(t, err) {
					return
				}
				if res[0].Allowed {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	race = int(admitted.Load())
	require.LessOrEqual(t, uint64(race), op.Limit.Requests, "admitted in the race")
	if uint64(race) == op.Limit.Requests {
		// No lease can hold a hit now: the next take is denied at once.
		for _, r := range replicas {
			res, err := r.Do(context.Background(), []rate.Op{op})
			require.NoError(t, err)
			require.False(t, res[0].Allowed, "a take after the limit was reached")
		}
		return race, 0
	}
	for range 5 {
		time.Sleep(wait)
		n := 0
		for _, r := range replicas {
			for n+race+later <= int(op.Limit.Requests) {
				res, err := r.Do(context.Background(), []rate.Op{op})
				require.NoError(t, err)
				if !res[0].Allowed {
					break
				}
				n++
			}
		}
		if n == 0 {
			break
		}
		later += n
	}
	return race, later
}

func TestOpsNotLeasedPassThrough(t *testing.T) {
	clock := algotest.NewClock(t0)
	mem := memory.New(memory.WithClock(clock.Now))
	t.Cleanup(mem.Close)
	rec := &recorder{Limiter: mem}
	r := newReplica(t, rec, clock.Now)
	lim := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 1_000_000, Window: time.Hour}
	for i := range 1000 {
		ops := []rate.Op{take("c", lim, 1), take("s", lim, 1), take("p", lim, 0), take("r", lim, 1)}
		ops[0].Kind, ops[0].Debt = rate.Charge, true
		ops[1].Shards = 4
		ops[3].Kind = rate.Refund
		r.do(t, ops...)
		_ = i
		clock.Advance(50 * time.Microsecond)
	}
	for _, op := range rec.ops {
		assert.Zero(t, op.Hold, fmt.Sprintf("%+v", op.Key))
	}
	calls, _ := rec.counts()
	assert.Equal(t, 1000, calls)
}

// failing fails every call while fail is set, reporting its ops as not
// applied to outcomes.
type failing struct {
	rate.Limiter
	outcomes *rate.Outcomes
	fail     atomic.Bool
}

var errDown = errors.New("backend down")

func (f *failing) Do(ctx context.Context, ops []rate.Op) ([]algorithms.Result, error) {
	if f.fail.Load() {
		out := make([]rate.Outcome, len(ops))
		for i, op := range ops {
			out[i] = rate.Outcome{Op: op, Fate: rate.NotApplied}
		}
		f.outcomes.Report(out)
		return nil, errDown
	}
	return f.Limiter.Do(ctx, ops)
}

// TestFailedCallGivesBackServedHits makes a request whose one limit is
// served from a lease and whose other limit's call fails: the served take's
// hit is taken back from the lease (its caller was told the call failed),
// so that the backend, once the leases are settled, counts only the takes
// answered as admitted; unless failed takes are kept (the failure mode allow
// admitted it).
func TestFailedCallGivesBackServedHits(t *testing.T) {
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprintf("keep=%v", keep), func(t *testing.T) {
			clock := algotest.NewClock(t0)
			mem := memory.New(memory.WithClock(clock.Now))
			t.Cleanup(mem.Close)
			outcomes := new(rate.Outcomes)
			back := &failing{Limiter: mem, outcomes: outcomes}
			l, err := New(back, Options{Time: tau, MinHits: minHits, Now: clock.Now, KeepFailedTakes: keep, manual: true})
			require.NoError(t, err)
			outcomes.Follow(l.Settle)
			r := replica{Limiter: l, obs: newCounter()}
			hot := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 1_000_000, Window: time.Hour}
			var admitted uint64
			for range 2000 {
				if r.do(t, take("hot", hot, 1))[0].Allowed {
					admitted++
				}
				clock.Advance(50 * time.Microsecond)
			}
			require.NotEmpty(t, r.entryOf(take("hot", hot, 1)).leases)

			back.fail.Store(true)
			cold := take("cold", algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 10, Window: time.Hour}, 1)
			_, err = r.Do(context.Background(), []rate.Op{take("hot", hot, 1), cold})
			require.ErrorIs(t, err, errDown)
			r.pending.Wait()
			l.owedMu.Lock()
			assert.Empty(t, l.owed, "the lease took its hit back: nothing is owed")
			l.owedMu.Unlock()
			back.fail.Store(false)
			l.Close()
			if keep {
				admitted++
			}
			assert.Equal(t, hot.Requests-admitted, peek(t, mem, take("hot", hot, 0)).Remaining,
				"the backend counts what was answered as admitted")
		})
	}
}

// serves reports whether a lease of r can serve op at now.
func (r replica) serves(op rate.Op, now time.Time) bool {
	id := op.Identity()
	s := r.shard(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range s.m[id].leases {
		if h.serves(op.Hits, now) {
			return true
		}
	}
	return false
}

// held returns the hits r's leases of op's limit hold and have not served.
func (r replica) held(op rate.Op) uint64 {
	e := r.entryOf(op)
	if e == nil {
		return 0
	}
	id := op.Identity()
	s := r.shard(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	var n uint64
	for _, h := range e.leases {
		n += h.left
	}
	return n
}

// TestDeadReplicaLosesAtMostItsLeases lets one replica take leases of a
// limit and stop without giving them back, as a killed process does: the
// other replica still admits all but the hits the dead one held, and the
// whole limit again once the window ends.
func TestDeadReplicaLosesAtMostItsLeases(t *testing.T) {
	for _, alg := range leased {
		t.Run(alg.String(), func(t *testing.T) {
			clock := algotest.NewClock(t0.Truncate(time.Minute))
			mem := memory.New(memory.WithClock(clock.Now))
			t.Cleanup(mem.Close)
			lim := algorithms.Limit{Algorithm: alg, Requests: 10_000, Window: time.Minute}
			op := take("shared", lim, 1)
			dead, err := New(mem, Options{Time: tau, MinHits: minHits, Now: clock.Now, manual: true})
			require.NoError(t, err)
			d := replica{Limiter: dead, obs: newCounter()}
			for range 400 {
				d.do(t, op)
				clock.Advance(50 * time.Microsecond)
			}
			lost := d.held(op)
			require.Positive(t, lost, "the replica holds a lease when it dies")
			assert.LessOrEqual(t, lost, 2*lim.Requests/4, "at most two leases of a quarter of the room each")
			// Killed: its leases are never given back, its sweeper stops.
			close(dead.stop)
			<-dead.done

			live := newReplica(t, mem, clock.Now)
			// A bucket refills while the test runs: at most this many.
			var refill uint64
			if !alg.Spec().Windowed && alg != algorithms.SlidingWindowLog {
				refill = lim.Requests*uint64(50*time.Millisecond)/uint64(lim.Window) + 1
			}
			var admitted uint64
			for range 12_000 {
				if live.do(t, op)[0].Allowed {
					admitted++
				}
				clock.Advance(time.Microsecond)
			}
			assert.GreaterOrEqual(t, admitted, lim.Requests-400-lost, "all but what the dead replica used and held")
			assert.LessOrEqual(t, admitted, lim.Requests-400-lost+refill, "no more than what it did not use or hold")

			clock.Set(clock.Now().Truncate(time.Minute).Add(2 * time.Minute))
			live.tick(clock.Now())
			admitted = 0
			for range 12_000 {
				if live.do(t, op)[0].Allowed {
					admitted++
				}
				clock.Advance(time.Microsecond)
			}
			assert.GreaterOrEqual(t, admitted, lim.Requests, "a later window has the whole limit")
			assert.LessOrEqual(t, admitted, lim.Requests+refill, "a later window has the whole limit")
		})
	}
}

// TestDenialsComeFromTheBackend drives a limit past its end from two
// replicas: every denial was the backend's answer to a take of the hits
// asked (no lease denies), with the backend's own wait.
func TestDenialsComeFromTheBackend(t *testing.T) {
	clock := algotest.NewClock(t0.Truncate(time.Second))
	mem := memory.New(memory.WithClock(clock.Now))
	t.Cleanup(mem.Close)
	rec := &recorder{Limiter: mem}
	replicas := []replica{newReplica(t, rec, clock.Now), newReplica(t, rec, clock.Now)}
	lim := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 500, Window: time.Second}
	op := take("d", lim, 1)
	denials := 0
	for i := range 2000 {
		_, before := rec.counts()
		res := replicas[i%2].do(t, op)
		if !res[0].Allowed {
			denials++
			_, after := rec.counts()
			require.Greater(t, after, before, "denial %d reached the backend", denials)
			last := rec.ops[after-1]
			assert.Equal(t, uint64(1), last.Hits)
			assert.Equal(t, clock.Now().Truncate(time.Second).Add(time.Second).Sub(clock.Now()), res[0].ResetAfter)
		}
		clock.Advance(100 * time.Microsecond)
	}
	assert.Equal(t, 1500, denials)
}

// TestBindingVerdicts holds the binding test's checks to cases whose
// answers are known, so that a check that cannot fail is caught.
func TestBindingVerdicts(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		d := make([]time.Duration, len(v))
		for i, x := range v {
			d[i] = time.Duration(x) * time.Millisecond
		}
		return d
	}
	assert.Equal(t, uint64(3), mostInAnyWindow(ms(0, 500, 999, 1000, 1999), time.Second))
	assert.Equal(t, uint64(2), mostInAnyWindow(ms(0, 1000, 2000, 2001), time.Second))
	// 10 at once, then one a second at 1 a second: the burst is 10.
	assert.InDelta(t, 10, mostBeyondRefill(ms(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1000, 2000), 1), 1e-9)
	// 5 at 0, then 5 more at 1 s refilling 1 a second: 9 beyond the refill.
	assert.InDelta(t, 9, mostBeyondRefill(ms(0, 0, 0, 0, 0, 1000, 1000, 1000, 1000, 1000), 1), 1e-9)
}

// gate holds the leases' takes (ops of more than one hit) while it is
// closed, and counts the takes of one hit.
type gate struct {
	rate.Limiter
	closed  atomic.Bool
	open    chan struct{}
	singles atomic.Int64
}

func (g *gate) Do(ctx context.Context, ops []rate.Op) ([]algorithms.Result, error) {
	for _, op := range ops {
		switch {
		case op.Hits == 1 && !op.Loosens():
			g.singles.Add(1)
		case op.Hits > 1 && g.closed.Load():
			<-g.open
		}
	}
	return g.Limiter.Do(ctx, ops)
}

// TestTakesWaitForTheLeaseOnItsWay: a take that comes while the lease of
// its limit is on its way waits for it and is served from it, rather than
// ask the backend for room the lease is about to hold; one whose deadline
// passes first goes to the backend, with its deadline passed.
func TestTakesWaitForTheLeaseOnItsWay(t *testing.T) {
	lim := algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: 100_000, Window: time.Hour}
	op := take("wait", lim, 1)
	// spent returns a replica whose lease of op's limit is spent, and the
	// next on its way, held at the gate until it opens.
	spent := func(t *testing.T) (replica, *gate) {
		clock := algotest.NewClock(t0)
		mem := memory.New(memory.WithClock(clock.Now))
		t.Cleanup(mem.Close)
		g := &gate{Limiter: mem, open: make(chan struct{})}
		r := newReplica(t, g, clock.Now)
		// Before the replica closes, which waits for its lease.
		t.Cleanup(func() { close(g.open) })
		for r.entryOf(op) == nil || len(r.entryOf(op).leases) == 0 {
			r.do(t, op)
			clock.Advance(100 * time.Microsecond)
		}
		g.closed.Store(true)
		for {
			e := r.entryOf(op)
			if e.busy != nil && !r.serves(op, clock.Now()) {
				return r, g
			}
			res, err := r.Do(context.Background(), []rate.Op{op})
			require.NoError(t, err)
			require.True(t, res[0].Allowed)
		}
	}

	t.Run("served", func(t *testing.T) {
		r, g := spent(t)
		singles := g.singles.Load()
		served := make(chan algorithms.Result, 1)
		go func() {
			res, err := r.Do(context.Background(), []rate.Op{op})
			assert.NoError(t, err)
			served <- res[0]
		}()
		select {
		case <-served:
			t.Fatal("a take was answered while the lease was on its way")
		case <-time.After(20 * time.Millisecond):
		}
		g.closed.Store(false)
		g.open <- struct{}{}
		res := <-served
		assert.True(t, res.Allowed)
		assert.Equal(t, singles, g.singles.Load(), "no take of one hit reached the backend")
		_, n := r.obs.get(Served)
		assert.Positive(t, n)
	})
	t.Run("deadline", func(t *testing.T) {
		r, _ := spent(t)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		_, err := r.Do(ctx, []rate.Op{op})
		assert.ErrorIs(t, err, context.DeadlineExceeded)
	})
}
