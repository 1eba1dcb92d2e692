package denycache

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
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

// countingLimiter counts the ops that reach the Limiter it wraps.
type countingLimiter struct {
	rate.Limiter
	ops atomic.Int64
}

func (c *countingLimiter) Do(ctx context.Context, ops []rate.Op) ([]algorithms.Result, error) {
	c.ops.Add(int64(len(ops)))
	return c.Limiter.Do(ctx, ops)
}

// mustNew returns New's Limiter, failing tb on an error.
func mustNew(tb testing.TB, inner rate.Limiter, opts Options) *Limiter {
	tb.Helper()
	c, err := New(inner, opts)
	require.NoError(tb, err)
	return c
}

func newCached(t *testing.T) (*Limiter, *countingLimiter, *algotest.Clock) {
	clock := algotest.NewClock(t0)
	mem := memory.New(memory.WithClock(clock.Now))
	t.Cleanup(mem.Close)
	inner := &countingLimiter{Limiter: mem}
	return mustNew(t, inner, Options{MaxEntries: 1000, Now: clock.Now}), inner, clock
}

func take(k string, l algorithms.Limit, hits uint64) rate.Op {
	return rate.Op{Key: rate.Key{Domain: "d", Entries: []rate.Entry{{Key: "k", Value: k}}}, Limit: l, Hits: hits}
}

func do(t *testing.T, l rate.Limiter, ops ...rate.Op) []algorithms.Result {
	t.Helper()
	res, err := l.Do(context.Background(), ops)
	require.NoError(t, err)
	return res
}

// TestDenyCacheDecidesAsTheBackend drives random sequences of takes, peeks
// and refunds through a deny cache in front of one in-memory limiter and
// straight into another: every decision, every wait of a denial and every
// remaining count is the same, for every algorithm, while the cache answers
// many of the denials.
func TestDenyCacheDecidesAsTheBackend(t *testing.T) {
	for _, alg := range algorithms.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(alg), 7))
			cache, _, clock := newCached(t)
			bare := memory.New(memory.WithClock(clock.Now))
			t.Cleanup(bare.Close)
			limits := []algorithms.Limit{
				{Algorithm: alg, Requests: 5, Window: time.Second},
				{Algorithm: alg, Requests: 3, Window: time.Second},
				{Algorithm: alg, Requests: 50, Window: time.Minute},
			}
			for step := range 5000 {
				// Each key keeps its limit: a limit whose numbers change is
				// decided by the backend (TestDenyCacheForgets).
				k := rng.IntN(len(limits))
				l, key := limits[k], fmt.Sprint(k)
				op := take(key, l, uint64(rng.IntN(int(l.Requests)+2)))
				switch rng.IntN(8) {
				case 0:
					op.Kind = rate.Refund
					op.Hits = uint64(rng.IntN(3))
				case 1:
					op.Kind = rate.Charge
				}
				got, want := do(t, cache, op)[0], do(t, bare, op)[0]
				what := fmt.Sprintf("step %d: %+v", step, op)
				require.Equal(t, want.Allowed, got.Allowed, what)
				require.Equal(t, want.Remaining, got.Remaining, what)
				if !want.Allowed {
					require.Equal(t, want.ResetAfter, got.ResetAfter, what)
				}
				clock.Advance(time.Duration(rng.IntN(60_000)) * time.Microsecond)
			}
			assert.Positive(t, cache.Hits(), "the cache answered some denials")
			t.Logf("%s: %d of 5000 decisions from the cache", alg, cache.Hits())
		})
	}
}

func TestDenyCacheSparesTheBackendOnAHotKey(t *testing.T) {
	cache, inner, clock := newCached(t)
	l := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 10, Window: time.Minute}
	for range 10 {
		require.True(t, do(t, cache, take("hot", l, 1))[0].Allowed)
	}
	before := inner.ops.Load()
	first := do(t, cache, take("hot", l, 1))[0]
	require.False(t, first.Allowed)
	for range 1000 {
		clock.Advance(maxDenyHold / 1001)
		r := do(t, cache, take("hot", l, 1))[0]
		require.False(t, r.Allowed)
	}
	assert.Equal(t, before+1, inner.ops.Load(), "one denial reached the backend, the next 1000 did not")
	assert.EqualValues(t, 1000, cache.Hits())

	// Other hit counts, peeks among them, are left to the backend: their
	// waits differ.
	do(t, cache, take("hot", l, 3))
	do(t, cache, take("hot", l, 0))
	assert.Equal(t, before+3, inner.ops.Load())

	// At the reset the backend decides again.
	clock.Set(t0.Add(first.ResetAfter))
	assert.True(t, do(t, cache, take("hot", l, 1))[0].Allowed)
}

func TestDenyCacheForgets(t *testing.T) {
	l := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 2, Window: time.Hour}
	exhaust := func(t *testing.T, c rate.Limiter, key string) {
		t.Helper()
		for range 2 {
			require.True(t, do(t, c, take(key, l, 1))[0].Allowed)
		}
		require.False(t, do(t, c, take(key, l, 1))[0].Allowed)
	}
	t.Run("a refund", func(t *testing.T) {
		cache, _, _ := newCached(t)
		exhaust(t, cache, "r")
		back := take("r", l, 1)
		back.Kind = rate.Refund
		do(t, cache, back)
		assert.True(t, do(t, cache, take("r", l, 1))[0].Allowed)
	})
	t.Run("a changed limit", func(t *testing.T) {
		cache, _, _ := newCached(t)
		l := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 2, Window: time.Hour}
		exhaust(t, cache, "c")
		more := l
		more.Requests = 3
		assert.True(t, do(t, cache, take("c", more, 1))[0].Allowed, "a reload or override that raises the limit is decided by the backend")
	})
	t.Run("a charge", func(t *testing.T) {
		cache, inner, _ := newCached(t)
		exhaust(t, cache, "u")
		before := inner.ops.Load()
		charge := take("u", l, 1)
		charge.Kind = rate.Charge
		res := do(t, cache, charge)[0]
		assert.Equal(t, before+1, inner.ops.Load(), "a charge reaches the backend, denial remembered or not")
		assert.False(t, res.Allowed, "the charge took the limit past it")
		// The debt is recorded: the take waits for two tokens now, an hour
		// at two an hour (less the part of the current slice gone), not
		// half an hour for one.
		again := do(t, cache, take("u", l, 1))[0]
		assert.False(t, again.Allowed)
		assert.Greater(t, again.ResetAfter, 59*time.Minute)
		assert.Equal(t, before+2, inner.ops.Load(), "the charge made the cache forget the denial")
	})
	t.Run("sharded limits are left to the backend", func(t *testing.T) {
		cache, inner, _ := newCached(t)
		op := take("s", l, 1)
		op.Shards = 4
		for range 5 {
			do(t, cache, op)
		}
		assert.EqualValues(t, 5, inner.ops.Load())
		assert.Zero(t, cache.Hits())
	})
}

// TestDenyCacheRepeatsOnlyARemainingThatHolds replays what a
// sliding_window_counter of 300 a second lowered to 150 went through: a
// take of 5 denied with 2 remaining, which the previous window's 300 hits,
// sliding out, raise to 3 five milliseconds later, while the 5 hits fit
// only after ten. The cache does not remember that denial, so the take
// then is answered by the backend with 3 remaining, not 2; a denial of 5
// with 4 remaining holds until its reset, and is answered locally.
func TestDenyCacheRepeatsOnlyARemainingThatHolds(t *testing.T) {
	cache, inner, clock := newCached(t)
	l300 := algorithms.Limit{Algorithm: algorithms.SlidingWindowCounter, Requests: 300, Window: time.Second}
	l150 := l300
	l150.Requests = 150
	start := t0.Truncate(time.Second).Add(time.Second)
	clock.Set(start)
	require.True(t, do(t, cache, take("k", l300, 300))[0].Allowed)
	clock.Set(start.Add(1500 * time.Millisecond))
	do(t, cache, take("k", l150, 0)) // the reload: the cache learns the new numbers

	// At slice s of the next window, 150 − ⌈300·(S−s)/S⌉ remain: 2 at
	// s = 506 700 µs, and room for 5 from s = 516 667 µs.
	at := func(us int) time.Time { return start.Add(time.Second + time.Duration(us)*time.Microsecond) }
	clock.Set(at(506_700))
	first := do(t, cache, take("k", l150, 5))[0]
	require.False(t, first.Allowed)
	require.EqualValues(t, 2, first.Remaining)
	require.Equal(t, 9967*time.Microsecond, first.ResetAfter)

	clock.Set(at(511_700))
	before := inner.ops.Load()
	again := do(t, cache, take("k", l150, 5))[0]
	assert.False(t, again.Allowed)
	assert.EqualValues(t, 3, again.Remaining, "⌈300·488 300/10⁶⌉ = 147 of 150 are used")
	assert.Equal(t, 4967*time.Microsecond, again.ResetAfter)
	assert.Equal(t, before+1, inner.ops.Load(), "the backend answered: the denial with 2 remaining was not remembered")

	clock.Set(at(514_000))
	last := do(t, cache, take("k", l150, 5))[0]
	require.False(t, last.Allowed)
	require.EqualValues(t, 4, last.Remaining)
	clock.Set(at(515_000))
	before = inner.ops.Load()
	repeated := do(t, cache, take("k", l150, 5))[0]
	assert.False(t, repeated.Allowed)
	assert.EqualValues(t, 4, repeated.Remaining)
	assert.Equal(t, 1667*time.Microsecond, repeated.ResetAfter)
	assert.Equal(t, before, inner.ops.Load(), "4 remaining holds until the reset: answered locally")
	assert.EqualValues(t, 1, cache.Hits())

	clock.Set(at(516_667))
	assert.True(t, do(t, cache, take("k", l150, 5))[0].Allowed)
}

func TestDenyCacheStaysBounded(t *testing.T) {
	cache, _, _ := newCached(t)
	l := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 0, Window: time.Hour}
	for i := range 5000 {
		do(t, cache, take(fmt.Sprint(i), l, 1))
	}
	n := 0
	for i := range cache.shards {
		n += len(cache.shards[i].m)
	}
	assert.LessOrEqual(t, n, 1000+denyShards)
}

func TestDenyCacheIsSafeForConcurrentUse(t *testing.T) {
	cache, _, _ := newCached(t)
	l := algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: 100, Window: time.Hour}
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 50 {
				if do(t, cache, take("c", l, 1))[0].Allowed {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	assert.EqualValues(t, 100, admitted.Load())
}

// gatedLimiter calls hooks around its inner Limiter: before is called before
// the inner Limiter decides, after once it has decided and before Do
// returns. A test blocks in them to order concurrent calls as the network
// between a replica and Redis may: a script may run long before its answer
// arrives, and one sent later may run first.
type gatedLimiter struct {
	rate.Limiter
	before, after func(ops []rate.Op)
}

func (g *gatedLimiter) Do(ctx context.Context, ops []rate.Op) ([]algorithms.Result, error) {
	if g.before != nil {
		g.before(ops)
	}
	res, err := g.Limiter.Do(ctx, ops)
	if g.after != nil {
		g.after(ops)
	}
	return res, err
}

// hold blocks the calls that match, one at a time: reached is signalled when
// one arrives, and it goes on when release is.
type hold struct {
	match            func(rate.Op) bool
	reached, release chan struct{}
}

func newHold(match func(rate.Op) bool) *hold {
	return &hold{match: match, reached: make(chan struct{}), release: make(chan struct{})}
}

func (g *hold) hook(ops []rate.Op) {
	for _, op := range ops {
		if g.match(op) {
			g.reached <- struct{}{}
			<-g.release
			return
		}
	}
}

func isRefund(op rate.Op) bool { return op.Loosens() }
func isTake(op rate.Op) bool   { return !op.Loosens() }

// TestDenyCacheKeepsNoDenialAGiveBackCleared races a take that the backend
// denies against a give-back on the same limit, in the two orders in which
// the denial reaches the cache after the give-back went through it: the
// take's answer arrives after the give-back has been answered, and the
// give-back, sent first, runs after the take. Either way the cache must not
// remember the denial, which the give-back made stale: the next take goes to
// the backend, which admits it.
func TestDenyCacheKeepsNoDenialAGiveBackCleared(t *testing.T) {
	l := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 1, Window: time.Hour}
	back := take("k", l, 1)
	back.Kind = rate.Refund
	// newGated returns a cache over a gated memory limiter, sharing one
	// clock, with the limit l of key k used up.
	newGated := func(t *testing.T, l algorithms.Limit) (*Limiter, *gatedLimiter, *algotest.Clock) {
		clock := algotest.NewClock(t0)
		mem := memory.New(memory.WithClock(clock.Now))
		t.Cleanup(mem.Close)
		g := &gatedLimiter{Limiter: mem}
		cache := mustNew(t, g, Options{MaxEntries: 1000, Now: clock.Now})
		require.True(t, do(t, cache, take("k", l, l.Requests))[0].Allowed)
		return cache, g, clock
	}

	t.Run("the denial arrives after the give-back", func(t *testing.T) {
		cache, g, _ := newGated(t, l)
		held := newHold(isTake)
		g.after = held.hook
		denied := make(chan algorithms.Result)
		go func() { denied <- do(t, cache, take("k", l, 1))[0] }()
		<-held.reached // the backend has denied the take
		g.after = nil
		do(t, cache, back)
		held.release <- struct{}{}
		require.False(t, (<-denied).Allowed)

		assert.True(t, do(t, cache, take("k", l, 1))[0].Allowed, "the give-back left room for one hit")
		assert.Zero(t, cache.Hits())
	})

	t.Run("the give-back runs after the take", func(t *testing.T) {
		cache, g, _ := newGated(t, l)
		held := newHold(isRefund)
		g.before = held.hook
		done := make(chan struct{})
		go func() { do(t, cache, back); close(done) }()
		<-held.reached // the give-back is on its way, not yet applied
		require.False(t, do(t, cache, take("k", l, 1))[0].Allowed)
		held.release <- struct{}{}
		<-done
		g.before = nil

		assert.True(t, do(t, cache, take("k", l, 1))[0].Allowed, "the give-back left room for one hit")
		assert.Zero(t, cache.Hits())
	})

	t.Run("a peek under a faster refill runs after the take", func(t *testing.T) {
		// A bucket of 1 an hour, empty at t0, holds half a token at 30
		// minutes; a peek under 3 an hour refills it to one and a half and
		// keeps that, so the first limit then admits a hit.
		slow := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 1, Window: time.Hour}
		fast := slow
		fast.Requests = 3
		cache, g, clock := newGated(t, slow)
		clock.Advance(30 * time.Minute)
		held := newHold(func(op rate.Op) bool { return op.Limit == fast })
		g.before = held.hook
		done := make(chan struct{})
		go func() { do(t, cache, take("k", fast, 0)); close(done) }()
		<-held.reached
		require.False(t, do(t, cache, take("k", slow, 1))[0].Allowed)
		held.release <- struct{}{}
		<-done
		g.before = nil

		assert.True(t, do(t, cache, take("k", slow, 1))[0].Allowed, "the faster refill left a token")
		assert.Zero(t, cache.Hits())
	})
}

// TestDenyCacheRaceOfTakesAndGiveBacks races, 300 times, a take against a
// give-back of the same limit through the cache, over a backend that delays
// each call by a random few microseconds before and after it decides. After
// each race, a take that the cache answers must be one the backend would
// deny: the count of wrong denials is 0.
func TestDenyCacheRaceOfTakesAndGiveBacks(t *testing.T) {
	mem := memory.New(memory.WithClock(algotest.NewClock(t0).Now))
	t.Cleanup(mem.Close)
	var rngMu sync.Mutex
	rng := rand.New(rand.NewPCG(1, 2))
	jitter := func([]rate.Op) {
		rngMu.Lock()
		d := time.Duration(rng.IntN(200)) * time.Microsecond
		rngMu.Unlock()
		time.Sleep(d)
	}
	cache := mustNew(t, &gatedLimiter{Limiter: mem, before: jitter, after: jitter}, Options{MaxEntries: 1000, Now: algotest.NewClock(t0).Now})
	l := algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: 1, Window: time.Hour}

	wrong, races := 0, 300
	for round := range races {
		key := fmt.Sprint(round)
		require.True(t, do(t, cache, take(key, l, 1))[0].Allowed)
		back := take(key, l, 1)
		back.Kind = rate.Refund
		var wg sync.WaitGroup
		wg.Go(func() { do(t, cache, take(key, l, 1)) })
		wg.Go(func() { do(t, cache, back) })
		wg.Wait()

		before := cache.Hits()
		if r := do(t, cache, take(key, l, 1))[0]; !r.Allowed && cache.Hits() > before {
			// Answered from memory: would the backend have denied too?
			if do(t, mem, take(key, l, 1))[0].Allowed {
				wrong++
			}
		}
		// Once the races are over, the cache answers again.
		do(t, cache, take(key, l, 1))
	}
	assert.Zero(t, wrong, "takes the cache denied that the backend would admit, in %d races", races)
	assert.Positive(t, cache.Hits(), "the cache still answers denials")
}

// BenchmarkDenyCache measures what the cache adds to an op that goes to the
// backend (an admitted take on an in-memory limiter) and what an op it
// answers costs.
func BenchmarkDenyCache(b *testing.B) {
	mem := memory.New()
	b.Cleanup(mem.Close)
	cache := mustNew(b, mem, Options{MaxEntries: 1000})
	ctx := context.Background()
	b.Run("admitted", func(b *testing.B) {
		ops := []rate.Op{take("open", algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: math.MaxUint32, Window: time.Second}, 1)}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := cache.Do(ctx, ops); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached_denial", func(b *testing.B) {
		ops := []rate.Op{take("shut", algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 0, Window: time.Hour}, 1)}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := cache.Do(ctx, ops); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestDenyCacheAsksAgainAfterAGiveBack has a denial remembered while hits
// that were later given back (through another replica, here straight to
// the backend) still counted: within maxDenyHold the backend is asked
// again, and admits into the room.
func TestDenyCacheAsksAgainAfterAGiveBack(t *testing.T) {
	cache, inner, clock := newCached(t)
	l := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 2, Window: time.Hour}
	var receipts []algorithms.Receipt
	for range 2 {
		r := do(t, cache, take("k", l, 1))[0]
		require.True(t, r.Allowed)
		receipts = append(receipts, r.Receipt)
	}
	require.False(t, do(t, cache, take("k", l, 1))[0].Allowed)
	refund := take("k", l, 1)
	refund.Kind, refund.Receipt = rate.Refund, receipts[1]
	do(t, inner, refund) // not through this cache

	clock.Advance(maxDenyHold - time.Millisecond)
	assert.False(t, do(t, cache, take("k", l, 1))[0].Allowed, "still answered from the cache")
	clock.Advance(time.Millisecond)
	assert.True(t, do(t, cache, take("k", l, 1))[0].Allowed, "the backend is asked again, and admits")
}

// transientLimiter denies every take as transient: the count it met held
// hits another op was about to give back.
type transientLimiter struct{ calls atomic.Int64 }

func (l *transientLimiter) Do(_ context.Context, ops []rate.Op) ([]algorithms.Result, error) {
	l.calls.Add(1)
	res := make([]algorithms.Result, len(ops))
	for i := range res {
		res[i] = algorithms.Result{ResetAfter: time.Hour, Transient: true}
	}
	return res, nil
}

// TestDenyCacheHoldsTransientDenialsBriefly: a denial the backend marks as
// transient is answered locally for transientHold at most, not for
// maxDenyHold, and then the backend is asked again, which may admit the
// take once the hits another op pushed past the limit are back.
func TestDenyCacheHoldsTransientDenialsBriefly(t *testing.T) {
	clock := algotest.NewClock(t0)
	inner := &transientLimiter{}
	cache := mustNew(t, inner, Options{MaxEntries: 10, Now: clock.Now})
	op := take("transient", algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 5, Window: time.Minute}, 1)
	for range 3 {
		assert.False(t, do(t, cache, op)[0].Allowed)
	}
	assert.EqualValues(t, 1, inner.calls.Load(), "the denial was answered locally")
	clock.Advance(transientHold)
	assert.False(t, do(t, cache, op)[0].Allowed)
	assert.EqualValues(t, 2, inner.calls.Load(), "the backend was asked again after transientHold")
	assert.EqualValues(t, 2, cache.Hits())
}

// TestNewRefusesBadOptions: a cache that remembers nothing is refused,
// naming MaxEntries; DefaultOptions are valid.
func TestNewRefusesBadOptions(t *testing.T) {
	mem := memory.New()
	t.Cleanup(mem.Close)
	_, err := New(mem, Options{})
	require.Error(t, err)
	assert.Equal(t, "MaxEntries", option.Of(err).Field)
	_, err = New(mem, DefaultOptions())
	assert.NoError(t, err)
}
