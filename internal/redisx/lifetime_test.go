package redisx

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/redistest"
)

// TestKeysLiveNoLongerThanTheLifetime applies random takes and give-backs,
// on Redis's own clock, and reads the time to live of every key after each:
// none exceeds the limit's Lifetime (rounded up to the millisecond, as
// PEXPIRE counts), so the bound the service puts on a limit override's
// Lifetime bounds how long its keys stay in Redis.
func TestKeysLiveNoLongerThanTheLifetime(t *testing.T) {
	client := redistest.SharedStandalone(t).Client(t)
	ctx := context.Background()
	lim, err := NewLimiter(client, WithKeyPrefix(testPrefix(t)))
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
				key := algorithms.Key{Domain: "d", Entries: []algorithms.Entry{{Key: "k", Value: fmt.Sprint(seq)}}}
				for step := range 20 {
					op := algorithms.Op{Key: key, Limit: l, Hits: rng.Uint64N(l.Capacity() + 1), Refund: rng.IntN(5) == 0}
					_, err := lim.Do(ctx, []algorithms.Op{op})
					require.NoError(t, err)
					for _, k := range lim.keys.keys(key, l, unsharded) {
						ttl, err := client.PTTL(ctx, k).Result()
						require.NoError(t, err)
						require.LessOrEqual(t, ttl, l.Lifetime()+time.Millisecond, "%s after step %d of %+v", k, step, l)
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
