package redisx

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/rate"
	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
)

// TestKeysLiveNoLongerThanTheLifetime applies random takes and give-backs,
// on Redis's own clock, and reads the time to live of every key after each:
// none exceeds the limit's Lifetime (rounded up to the millisecond, as
// PEXPIRE counts, and serverClockMargin more for a fixed window), so the bound the service puts on a limit override's
// Lifetime bounds how long its keys stay in Redis.
func TestKeysLiveNoLongerThanTheLifetime(t *testing.T) {
	client := redistest.SharedStandalone(t).Client(t)
	ctx := context.Background()
	lim, err := NewLimiter(client, testPipelines, WithKeyPrefix(testPrefix(t)))
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(3, 4))
	for _, a := range algorithms.Algorithms {
		t.Run(a.String(), func(t *testing.T) {
			longest := 0.0
			for seq := range 20 {
				l := algorithms.Limit{Algorithm: a, Requests: 1 + rng.Uint64N(8), Window: []time.Duration{time.Minute, time.Hour, 24 * time.Hour}[rng.IntN(3)]}
				if a == algorithms.TokenBucket && rng.IntN(2) == 0 {
					l.Burst = 1 + rng.Uint64N(30)
				}
				key := rate.Key{Domain: "d", Entries: []rate.Entry{{Key: "k", Value: fmt.Sprint(seq)}}}
				for step := range 20 {
					op := rate.Op{Key: key, Limit: l, Hits: rng.Uint64N(l.Capacity() + 1)}
					if rng.IntN(5) == 0 {
						op.Kind = rate.Refund
					}
					_, err := lim.Do(ctx, []rate.Op{op})
					require.NoError(t, err)
					for _, k := range limitKeys(t, client, lim.enc.keys, key, l) {
						ttl, err := client.PTTL(ctx, k).Result()
						require.NoError(t, err)
						// The keys of ops decided without a script are kept
						// serverClockMargin longer.
						require.LessOrEqual(t, ttl, l.Lifetime()+serverClockMargin+time.Millisecond, "%s after step %d of %+v", k, step, l)
						longest = max(longest, float64(ttl)/float64(l.Lifetime()))
					}
				}
			}
			// Windows are epoch-aligned, so how much of the Lifetime is
			// left depends on the hour of the run; some key must exist.
			assert.Positive(t, longest, "the longest time to live, as a share of the Lifetime")
		})
	}
}

// TestKeysOutliveTheirState applies random takes, charges and give-backs
// on Redis's own clock, over one-second windows, and after each reads the
// state the script stored and the key's time to live: the key lives at
// least until the state would behave as a new one, whether or not the
// script moved its expiry (a write that keeps that time keeps the expiry).
func TestKeysOutliveTheirState(t *testing.T) {
	client := redistest.SharedStandalone(t).Client(t)
	ctx := context.Background()
	lim, err := NewLimiter(client, testPipelines, WithKeyPrefix(testPrefix(t)))
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(5, 6))
	// needed returns when the stored state behaves as a new one, in µs, as
	// a fixed window that may owe (debt.go) and sliding_window_counter.lua
	// compute it.
	needed := map[algorithms.Algorithm]func(h map[string]int64, W int64) int64{
		algorithms.FixedWindow: func(h map[string]int64, W int64) int64 {
			if h["e"] > 0 {
				return h["x"]
			}
			return (h["w"] + 1) * W
		},
		algorithms.SlidingWindowCounter: func(h map[string]int64, W int64) int64 {
			switch {
			case h["e"] > 0:
				return h["x"]
			case h["c"] > 0:
				return (h["w"] + 2) * W
			case h["p"] > 0:
				return (h["w"] + 1) * W
			}
			return h["w"] * W
		},
	}
	for a, need := range needed {
		t.Run(a.String(), func(t *testing.T) {
			l := algorithms.Limit{Algorithm: a, Requests: 5, Window: time.Second}
			key := rate.Key{Domain: "d", Entries: []rate.Entry{{Key: "k", Value: "outlive"}}}
			k := keysOf(lim.enc.keys, key, l, Unsharded)[0]
			kept := 0
			for step := range 60 {
				time.Sleep(time.Duration(rng.IntN(60)) * time.Millisecond)
				// A fixed window keeps its state whole only when it may owe
				// (see counter.go): every op says so.
				op := rate.Op{Key: key, Limit: l, Hits: rng.Uint64N(4), Debt: a.Spec().Counter}
				switch rng.IntN(6) {
				case 0:
					op.Kind = rate.Refund
				case 1:
					op.Kind, op.Debt, op.Hits = rate.Charge, op.Debt || rng.IntN(2) == 0, rng.Uint64N(12)
				}
				ttlBefore, err := client.PTTL(ctx, k).Result()
				require.NoError(t, err)
				_, err = lim.Do(ctx, []rate.Op{op})
				require.NoError(t, err)
				fields, err := client.HGetAll(ctx, k).Result()
				require.NoError(t, err)
				if len(fields) == 0 {
					continue
				}
				h := make(map[string]int64, len(fields))
				for f, v := range fields {
					h[f], err = strconv.ParseInt(v, 10, 64)
					require.NoError(t, err)
				}
				ttl, err := client.PTTL(ctx, k).Result()
				require.NoError(t, err)
				now, err := client.Time(ctx).Result()
				require.NoError(t, err)
				if ttl < ttlBefore {
					kept++
				}
				expires := now.UnixMicro() + ttl.Microseconds()
				require.GreaterOrEqual(t, expires, need(h, l.Window.Microseconds()),
					"step %d (%+v): the key expires before its state %v is done with", step, op, h)
			}
			assert.Positive(t, kept, "some writes keep the expiry")
		})
	}
}
