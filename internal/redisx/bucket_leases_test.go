package redisx

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/memory"
	"github.com/ratewarden/ratewarden/internal/rate"
	"github.com/ratewarden/ratewarden/internal/testkit/algotest"
)

// bucketGroups is the most groups a bucket keeps (G in token_bucket.lua).
const bucketGroups = 9

// groupsHeld returns how many groups of leases' tokens a bucket's hash
// holds: the pairs of its field g ("epoch:from:h1,u1,…").
func groupsHeld(g string) int {
	_, rest, _ := strings.Cut(g, ":")
	_, rest, _ = strings.Cut(rest, ":")
	if rest == "" {
		return 0
	}
	return (strings.Count(rest, ",") + 1) / 2
}

// TestBucketLeasesMatchMemory drives buckets on Redis and in memory through
// the same busy leasing: leases of several holds every few hundred
// microseconds, more of them live at once than a bucket keeps groups of,
// settled while they last and after, among takes and refunds. The Results
// must be identical at every step, and every group must be taken at times,
// so that leases go into groups that end later than they do.
func TestBucketLeasesMatchMemory(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			client := b.client(t)
			for seed := range uint64(2) {
				t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
					runBucketLeases(t, client, seed, 1500)
				})
			}
		})
	}
}

// leaseTaken is an admitted lease of a differential run.
type leaseTaken struct {
	receipt algorithms.Receipt
	hits    uint64
	hold    time.Duration
	at      time.Time
}

func runBucketLeases(t *testing.T, client redis.UniversalClient, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 21))
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(rng.Int64N(int64(365*24*time.Hour))) / time.Microsecond * time.Microsecond)
	clock := algotest.NewClock(start)
	mem := memory.New(memory.WithClock(clock.Now), memory.WithSweepInterval(0))
	t.Cleanup(mem.Close)
	prefix := testPrefix(t)
	lim, err := NewLimiter(client, testPipelines, WithClock(clock.Now), WithKeyPrefix(prefix))
	require.NoError(t, err)
	ks, err := newKeySpace(prefix)
	require.NoError(t, err)

	limits := []algorithms.Limit{
		{Algorithm: algorithms.TokenBucket, Requests: 100_000, Window: time.Second, Burst: 5_000},
		{Algorithm: algorithms.TokenBucket, Requests: 1_000, Window: time.Second, Burst: 100},
		{Algorithm: algorithms.TokenBucket, Requests: 3_600, Window: time.Hour, Burst: 200},
	}
	keys := make([]rate.Key, len(limits))
	leases := make([][]leaseTaken, len(limits))
	for i := range keys {
		keys[i] = rate.Key{Domain: "leases", Entries: []rate.Entry{{Key: "bucket", Value: strconv.Itoa(i)}}}
	}
	holds := []time.Duration{50 * time.Millisecond, 20 * time.Millisecond, 100 * time.Millisecond}

	ctx := context.Background()
	full := 0
	for step := range steps {
		switch p := rng.IntN(20); {
		case p < 2:
		case p < 17:
			clock.Advance(time.Duration(rng.Int64N(2_000)) * time.Microsecond)
		case p < 19:
			clock.Advance(time.Duration(rng.Int64N(30_000)) * time.Microsecond)
		default:
			clock.Advance(time.Duration(rng.Int64N(300_000)) * time.Microsecond)
		}
		ops := make([]rate.Op, 1+rng.IntN(3))
		owners := make([]int, len(ops))
		for i := range ops {
			j := rng.IntN(len(limits))
			owners[i] = j
			l := limits[j]
			op := rate.Op{Key: keys[j], Limit: l, Hits: 1 + rng.Uint64N(l.Capacity()/50)}
			switch p := rng.IntN(20); {
			case p < 12:
				op.Hold = holds[rng.IntN(len(holds))]
				if rng.IntN(4) == 0 {
					op.Hold = time.Duration(1+rng.Int64N(200_000)) * time.Microsecond
				}
			case p < 17 && len(leases[j]) > 0:
				// A lease is settled, while it lasts or after: what it
				// served at times since it was taken, and the rest back.
				k := rng.IntN(len(leases[j]))
				ls := leases[j][k]
				leases[j] = append(leases[j][:k], leases[j][k+1:]...)
				settled := algorithms.Lease{Receipt: ls.receipt, Hold: ls.hold, Size: ls.hits, Close: true}
				left, at := ls.hits, ls.at.UnixMicro()
				for range rng.IntN(5) {
					n := rng.Uint64N(left + 1)
					at += rng.Int64N(max(clock.Now().UnixMicro()-at, 0) + 1)
					settled.Served = append(settled.Served, algorithms.Served{At: at, N: n})
					left -= n
				}
				op.Kind, op.Leases, op.Hits = rate.Settle, []algorithms.Lease{settled}, 0
			case p < 19:
			default:
				op.Kind = rate.Refund
			}
			ops[i] = op
		}
		want, err := mem.Do(ctx, ops)
		require.NoError(t, err)
		got, err := lim.Do(ctx, ops)
		require.NoError(t, err)
		for i, op := range ops {
			require.Equal(t, alike(want[i]), alike(got[i]), "step %d at %s, op %d of %d: %s", step, clock.Now().Format(time.RFC3339Nano), i, len(ops), describeOp(op))
			require.Equal(t, want[i].Receipt.Epoch, got[i].Receipt.Epoch, "step %d op %d: epoch", step, i)
			if j := owners[i]; op.Hold > 0 && !op.Loosens() && want[i].Allowed {
				sameState(t, op, want[i], got[i], clock.Now(), fmt.Sprintf("step %d op %d: %s", step, i, describeOp(op)))
				leases[j] = append(leases[j], leaseTaken{receipt: want[i].Receipt, hits: op.Hits, hold: op.Hold, at: clock.Now()})
				if len(leases[j]) > 32 {
					leases[j] = leases[j][1:]
				}
			}
		}
		for j := range limits {
			if groupsHeld(client.HGet(ctx, keysOf(ks, keys[j], limits[j], Unsharded)[0], "g").Val()) == bucketGroups {
				full++
			}
		}
	}
	require.Positive(t, full, "no bucket held tokens in all its groups")
	t.Logf("%d times a bucket held tokens in all its groups", full)
}
