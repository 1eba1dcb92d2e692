package redisx

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/rate"
	"github.com/ratewarden/ratewarden/internal/testkit/algotest"
	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
)

func TestLimiterSuite(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			client := b.client(t)
			algotest.Run(t, func(t *testing.T, clock *algotest.Clock) rate.Limiter {
				lim, err := NewLimiter(client, testPipelines, WithClock(clock.Now), WithKeyPrefix(testPrefix(t)))
				require.NoError(t, err)
				return lim
			})
		})
	}
}

// TestLimiterExactUnderConcurrency has many goroutines on two Limiters with
// clients of their own, like two replicas of the service, race for one limit
// on Redis's own clock: exactly L hits are admitted, or at most L when the
// limit is split over shards.
func TestLimiterExactUnderConcurrency(t *testing.T) {
	const (
		limit      = 300
		goroutines = 128
		attempts   = 3 * limit
	)
	// Windows long enough that nothing slides out, refills or ends during
	// the test.
	decade := algorithms.MaxWindow
	cases := []struct {
		name   string
		limit  algorithms.Limit
		shards uint32
	}{
		{"fixed_window", algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: limit, Window: decade}, 0},
		{"sliding_window_log", algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: limit, Window: time.Hour}, 0},
		{"sliding_window_counter", algorithms.Limit{Algorithm: algorithms.SlidingWindowCounter, Requests: limit, Window: decade}, 0},
		{"token_bucket", algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: limit, Window: decade}, 0},
		{"fixed_window sharded", algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: limit, Window: decade}, 4},
		{"sliding_window_log sharded", algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: limit, Window: time.Hour}, 4},
		{"token_bucket sharded", algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: limit, Window: decade}, 3},
	}
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			prefix := testPrefix(t)
			var lims [2]*Limiter
			for i := range lims {
				var err error
				lims[i], err = NewLimiter(b.client(t), testPipelines, WithKeyPrefix(prefix))
				require.NoError(t, err)
			}
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					op := rate.Op{
						Key:    rate.Key{Domain: "concurrency", Entries: []rate.Entry{{Key: "case", Value: c.name}}},
						Limit:  c.limit,
						Hits:   1,
						Shards: c.shards,
					}
					var admitted, tried atomic.Int64
					var wg sync.WaitGroup
					errs := make(chan error, goroutines)
					for g := range goroutines {
						wg.Go(func() {
							lim := lims[g%2]
							for tried.Add(1) <= attempts {
								res, err := lim.Do(context.Background(), []rate.Op{op})
								if err != nil {
									errs <- err
									return
								}
								if res[0].Allowed {
									admitted.Add(1)
								}
							}
						})
					}
					wg.Wait()
					close(errs)
					for err := range errs {
						require.NoError(t, err)
					}
					if c.shards > 1 {
						assert.LessOrEqual(t, admitted.Load(), int64(limit))
						assert.Greater(t, admitted.Load(), int64(limit/2), "shards should admit most of the limit")
					} else {
						assert.Equal(t, int64(limit), admitted.Load())
					}
				})
			}
		})
	}
}

// TestLimiterKeysExpire checks that every key a script leaves behind
// expires, no later than its state needs, after takes and refunds alike.
func TestLimiterKeysExpire(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			client := b.client(t)
			prefix := testPrefix(t)
			lim, err := NewLimiter(client, testPipelines, WithKeyPrefix(prefix))
			require.NoError(t, err)
			ks, err := newKeySpace(prefix)
			require.NoError(t, err)
			ctx := context.Background()
			for _, alg := range algorithms.Algorithms {
				t.Run(alg.String(), func(t *testing.T) {
					l := algorithms.Limit{Algorithm: alg, Requests: 10, Window: time.Minute}
					for _, shards := range []uint32{0, 3} {
						k := rate.Key{Domain: "ttl", Entries: []rate.Entry{{Key: "shards", Value: string(rune('0' + shards))}}}
						op := func(hits uint64, kind rate.Kind, r algorithms.Receipt) (rate.Op, algorithms.Result) {
							o := rate.Op{Key: k, Limit: l, Hits: hits, Kind: kind, Receipt: r, Shards: shards}
							res, err := lim.Do(ctx, []rate.Op{o})
							require.NoError(t, err)
							return o, res[0]
						}
						// The longest a state lives: two windows for a sliding
						// window counter, one for the others (a token bucket
						// with B = L refills within one).
						lifetime := l.Window + time.Millisecond
						switch {
						case alg == algorithms.SlidingWindowCounter:
							lifetime += l.Window
						case alg.Spec().Counter:
							lifetime += serverClockMargin
						}
						checkTTL := func(what string, mustExist bool) bool {
							found := false
							for shard := range max(int(shards), 1) {
								if shards <= 1 {
									shard = Unsharded
								}
								for _, key := range keysOf(ks, k, l, shard) {
									ttl, err := client.PTTL(ctx, key).Result()
									require.NoError(t, err)
									if ttl == -2 {
										continue // no such key
									}
									found = true
									require.Positive(t, ttl, "%s: key %q has no TTL", what, key)
									require.LessOrEqual(t, ttl, lifetime, "%s: key %q", what, key)
								}
							}
							if mustExist {
								require.True(t, found, "%s: the state should be kept", what)
							}
							return found
						}

						_, r := op(0, rate.Take, algorithms.Receipt{})
						require.True(t, r.Allowed)
						checkTTL("check", false)
						_, r1 := op(3, rate.Take, algorithms.Receipt{})
						require.True(t, r1.Allowed)
						checkTTL("take", true)
						_, r2 := op(2, rate.Take, algorithms.Receipt{})
						require.True(t, r2.Allowed)
						checkTTL("second take", true)
						_, r = op(11, rate.Take, algorithms.Receipt{})
						require.False(t, r.Allowed)
						checkTTL("denied take", true)
						op(3, rate.Refund, r1.Receipt)
						checkTTL("refund with receipt", true)
						op(1, rate.Refund, algorithms.Receipt{})
						checkTTL("refund without receipt", true)
						op(5, rate.Refund, algorithms.Receipt{})
						kept := checkTTL("refund of everything", false)
						// A window's count stays, at 0, until its window ends.
						if shards <= 1 && !alg.Spec().Counter {
							require.False(t, kept, "a state that behaves as a new one is deleted at once")
						}
					}
				})
			}
		})
	}
}

// scriptedRandom returns a WithRandom source that answers values in turn,
// each modulo n.
func scriptedRandom(t *testing.T, values ...int) func(n int) int {
	var mu sync.Mutex
	next := 0
	return func(n int) int {
		mu.Lock()
		defer mu.Unlock()
		require.Less(t, next, len(values), "more random draws than scripted")
		v := values[next] % n
		next++
		return v
	}
}

func TestLimiterShards(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			client := b.client(t)
			prefix := testPrefix(t)
			ctx := context.Background()
			clock := algotest.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
			// L = 10 over 4 shards: 3, 3, 2, 2.
			l := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 10, Window: time.Hour}
			k := rate.Key{Domain: "shards", Entries: []rate.Entry{{Key: "tenant", Value: "hot"}}}
			lim, err := NewLimiter(client, testPipelines, WithClock(clock.Now), WithKeyPrefix(prefix), WithRandom(scriptedRandom(t,
				0,    // take 3: shard 0 admits
				0, 0, // take 1: shard 0 denies, the first other shard (1) admits
				1, 1, // take 3: shard 1 denies, the second other (2) cannot hold 3
				// refund with the receipt of shard 1: no draw
				1, // check: shard 1
				3, // refund without receipt: shard 3
			)))
			require.NoError(t, err)
			do := func(op rate.Op) algorithms.Result {
				op.Key, op.Limit, op.Shards = k, l, 4
				res, err := lim.Do(ctx, []rate.Op{op})
				require.NoError(t, err)
				return res[0]
			}
			now := clock.Now().UnixMicro()
			untilHour := time.Hour - time.Duration(now%3_600_000_000)*time.Microsecond

			r := do(rate.Op{Hits: 3})
			assert.Equal(t, algorithms.Result{Allowed: true, Remaining: 0, ResetAfter: untilHour, Receipt: algorithms.Receipt{At: now, Shard: 0}}, r)

			r = do(rate.Op{Hits: 1})
			assert.Equal(t, algorithms.Result{Allowed: true, Remaining: 2, ResetAfter: untilHour, Receipt: algorithms.Receipt{At: now, Shard: 1}}, r)
			fromShard1 := r.Receipt

			r = do(rate.Op{Hits: 3})
			assert.Equal(t, algorithms.Result{Allowed: false, Remaining: 2, ResetAfter: time.Hour}, r, "shard 2 holds only 2")

			r = do(rate.Op{Hits: 1, Kind: rate.Refund, Receipt: fromShard1})
			assert.Equal(t, algorithms.Result{Allowed: true, Remaining: 3}, r, "the refund goes back to shard 1")
			r = do(rate.Op{Hits: 0})
			assert.Equal(t, algorithms.Result{Allowed: true, Remaining: 3, Receipt: algorithms.Receipt{At: now, Shard: 1}}, r)

			r = do(rate.Op{Hits: 1, Kind: rate.Refund})
			assert.Equal(t, algorithms.Result{Allowed: true, Remaining: 2}, r, "shard 3 is untouched and full")

			// Only shard 0 counts anything now: its 3 of the hour (the
			// others' counts are back at 0, or were only read).
			ks, err := newKeySpace(prefix)
			require.NoError(t, err)
			for shard, want := range []int64{3, 0, 0, 0} {
				count, err := client.Get(ctx, keysAt(ks, k, l, shard, clock.Now())[1]).Int64()
				if err == redis.Nil {
					err = nil
				}
				require.NoError(t, err)
				assert.Equal(t, want, count, "shard %d", shard)
			}
		})
	}
}

// TestLimiterShardsSumToTheLimit drains sharded limits with real randomness:
// every hit the limit allows is admitted by some shard, none beyond.
func TestLimiterShardsSumToTheLimit(t *testing.T) {
	client := backends()[0].client(t)
	lim, err := NewLimiter(client, testPipelines, WithKeyPrefix(testPrefix(t)), WithRandom(rand.New(rand.NewPCG(7, 8)).IntN))
	require.NoError(t, err)
	ctx := context.Background()
	for i, c := range []struct {
		limit  algorithms.Limit
		shards uint32
	}{
		{algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 10, Window: algorithms.MaxWindow}, 4},
		{algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 2, Window: algorithms.MaxWindow}, 4},
		{algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: 7, Window: time.Hour}, 3},
		{algorithms.Limit{Algorithm: algorithms.SlidingWindowCounter, Requests: 9, Window: algorithms.MaxWindow}, 2},
		{algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 100, Burst: 5, Window: algorithms.MaxWindow}, 8},
		{algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 0, Window: time.Second}, 4},
	} {
		op := rate.Op{
			Key:    rate.Key{Domain: "drain", Entries: []rate.Entry{{Key: "case", Value: strconv.Itoa(i)}}},
			Limit:  c.limit,
			Hits:   1,
			Shards: c.shards,
		}
		ops := make([]rate.Op, 200)
		for i := range ops {
			ops[i] = op
		}
		res, err := lim.Do(ctx, ops)
		require.NoError(t, err)
		admitted := 0
		shards := map[uint32]int{}
		for _, r := range res {
			if r.Allowed {
				admitted++
				shards[r.Receipt.Shard]++
			}
		}
		// Every op but the last few that find their two shards empty is
		// admitted while some shard has room; 200 tries drain them all.
		assert.Equal(t, int(c.limit.Capacity()), admitted, "%+v over %d shards", c.limit, c.shards)
		assert.LessOrEqual(t, len(shards), int(c.shards), "%+v", c.limit)
	}
}

func TestShardLimitsSumToTheLimit(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for range 3000 {
		l := algorithms.Limit{Algorithm: algorithms.TokenBucket, Window: time.Second}
		switch rng.IntN(3) {
		case 0:
			l.Requests = rng.Uint64N(20)
		case 1:
			l.Requests = rng.Uint64N(algorithms.MaxRequests + 1)
		default:
			l.Requests = algorithms.MaxRequests - rng.Uint64N(3)
		}
		if l.Requests > 0 && rng.IntN(2) == 0 {
			l.Burst = 1 + rng.Uint64N(algorithms.MaxRequests)
		}
		if rng.IntN(2) == 0 {
			l.Algorithm, l.Burst = algorithms.FixedWindow, 0
		}
		if l.Validate() != nil {
			continue
		}
		op := rate.Op{Limit: l, Shards: uint32(rng.IntN(40))}
		n := shardCount(&op)
		require.GreaterOrEqual(t, n, 1)
		require.LessOrEqual(t, n, max(int(op.Shards), 1))
		if n == 1 {
			require.Equal(t, l, shardLimit(l, n, Unsharded))
			continue
		}
		var requests, burst uint64
		for i := range n {
			s := shardLimit(l, n, i)
			require.Positive(t, s.Requests, "%+v shard %d of %d", l, i, n)
			require.Positive(t, s.Capacity(), "%+v shard %d of %d", l, i, n)
			// Rounding may leave a shard's bucket slower to refill than the
			// whole one, but never more than about twice, which keeps its
			// waits far below 2^53 µs: B_i/L_i ≤ (B/n+1)/⌊L/n⌋ ≤ 2·B/L + 2.
			require.LessOrEqual(t, float64(s.Capacity())/float64(s.Requests), 2*float64(l.Capacity())/float64(l.Requests)+2, "%+v shard %d of %d", l, i, n)
			requests += s.Requests
			burst += s.Capacity()
		}
		require.Equal(t, l.Requests, requests, "%+v over %d", l, n)
		require.Equal(t, l.Capacity(), burst, "%+v over %d", l, n)
	}
}

func TestNewLimiterRejects(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = client.Close() })
	_, err := NewLimiter(client, testPipelines, WithKeyPrefix("a{b"))
	assert.Error(t, err)
	_, err = NewLimiter(nil, testPipelines)
	assert.Error(t, err)
	_, err = NewLimiter(client, testPipelines, WithRandom(nil))
	assert.Error(t, err)
	_, err = NewLimiter(client, 0)
	assert.ErrorContains(t, err, "at least 1 pipeline")
}

func TestLimiterErrors(t *testing.T) {
	ctx := context.Background()
	valid := algorithms.Limit{Algorithm: algorithms.SlidingWindowCounter, Requests: 1, Window: time.Second}
	op := rate.Op{Key: rate.Key{Domain: "errors"}, Limit: valid, Hits: 1}

	t.Run("invalid limit", func(t *testing.T) {
		unreachable := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
		t.Cleanup(func() { _ = unreachable.Close() })
		lim, err := NewLimiter(unreachable, testPipelines)
		require.NoError(t, err)
		bad := op
		bad.Limit.Window = 1500 * time.Millisecond
		_, err = lim.Do(ctx, []rate.Op{op, bad})
		require.ErrorIs(t, err, algorithms.ErrInvalidLimit)
	})

	t.Run("unreachable", func(t *testing.T) {
		unreachable := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
		t.Cleanup(func() { _ = unreachable.Close() })
		lim, err := NewLimiter(unreachable, testPipelines)
		require.NoError(t, err)
		_, err = lim.Do(ctx, []rate.Op{op})
		require.Error(t, err)
		require.NotErrorIs(t, err, algorithms.ErrInvalidLimit)
	})

	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			client := b.client(t)
			prefix := testPrefix(t)
			lim, err := NewLimiter(client, testPipelines, WithKeyPrefix(prefix))
			require.NoError(t, err)

			done, cancel := context.WithCancel(ctx)
			cancel()
			_, err = lim.Do(done, []rate.Op{op})
			require.ErrorIs(t, err, context.Canceled)

			// A key of the wrong type makes the script fail: an error, not a
			// decision.
			ks, err := newKeySpace(prefix)
			require.NoError(t, err)
			key := keysOf(ks, op.Key, op.Limit, Unsharded)[0]
			require.NoError(t, client.Set(ctx, key, "not a hash", time.Minute).Err())
			_, err = lim.Do(ctx, []rate.Op{op})
			var redisErr redis.Error
			require.ErrorAs(t, err, &redisErr)
			require.Contains(t, err.Error(), "WRONGTYPE")

			res, err := lim.Do(ctx, nil)
			require.NoError(t, err)
			require.Empty(t, res)
		})
	}
}

func TestDecodeReply(t *testing.T) {
	good := []int64{1, 7, 1500, 1790000000000000, 3, 11}
	r, err := decodeReply(good)
	require.NoError(t, err)
	assert.Equal(t, reply{allowed: true, remaining: 7, reset: 1500, at: 1790000000000000, seq: 3, epoch: 11, state: []int64{}}, r)

	with := func(i int, v int64) []int64 {
		c := slices.Clone(good)
		c[i] = v
		return c
	}
	for name, v := range map[string][]int64{
		"nil":             nil,
		"short":           good[:5],
		"allowed 2":       with(0, 2),
		"negative remain": with(1, -1),
		"negative reset":  with(2, -1),
		"negative seq":    with(4, -1),
	} {
		_, err := decodeReply(v)
		assert.Error(t, err, name)
	}
	// Only an admitted lease's take tells a state, and it must be one.
	long, err := decodeReply(append(slices.Clone(good), 0))
	require.NoError(t, err)
	_, err = long.result(&rate.Op{Hits: 1, Limit: algorithms.Limit{Algorithm: algorithms.TokenBucket}}, Unsharded)
	assert.Error(t, err, "a take's answer with a state")
	_, err = long.result(&rate.Op{Hits: 1, Hold: time.Second, Limit: algorithms.Limit{Algorithm: algorithms.TokenBucket}}, Unsharded)
	assert.Error(t, err, "a lease's answer with a state that is none")
}

// TestScriptReplyOfTheWrongType runs scripts whose replies are not arrays of
// integers, read as the scripts' own replies are: each is an error.
func TestScriptReplyOfTheWrongType(t *testing.T) {
	client := redistest.SharedStandalone(t).Client(t)
	lim, err := NewLimiter(client, testPipelines, WithKeyPrefix(testPrefix(t)))
	require.NoError(t, err)
	t.Cleanup(lim.Close)
	op := rate.Op{Key: rate.Key{Domain: "d"}, Limit: algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 5, Window: time.Minute}, Hits: 1}
	for name, src := range map[string]string{
		"not an array": "return 'OK'",
		"string value": "return {1, 'x', 1500, 1790000000000000, 3}",
		"status value": "return {1, 7, 1500, redis.status_reply('1.5'), 3}",
		"short":        "return {1, 7, 1500, 1790000000000000, 0}",
	} {
		bad := &script{name: "bad", src: src, sha: strings.Repeat("0", 40)}
		bad.shaArg = bad.sha
		call := lim.call(new(scriptCall), &op, Unsharded, "", 0)
		call.script, call.argv[1] = bad, bad.shaArg
		err := lim.run(context.Background(), []*scriptCall{call}, nil, new(rate.Outcomes))
		if err == nil {
			_, err = call.result()
		}
		assert.Error(t, err, name)
	}
}

func TestResultCapsTheReset(t *testing.T) {
	op := rate.Op{Hits: 1}
	r, err := reply{allowed: true, reset: 1<<63 - 1}.result(&op, Unsharded)
	require.NoError(t, err)
	assert.Equal(t, time.Duration(maxResetMicros)*time.Microsecond, r.ResetAfter)
}
