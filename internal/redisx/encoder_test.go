package redisx

import (
	"crypto/sha1"
	"encoding/hex"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/rate"
	"github.com/ratewarden/ratewarden/lua"
)

// digest returns the SHA-1 digest of algorithm a's script, as EVALSHA names it.
func digest(t *testing.T, a algorithms.Algorithm) string {
	t.Helper()
	src, err := lua.Source(a.Spec().Script)
	require.NoError(t, err)
	sum := sha1.Sum([]byte(src))
	return hex.EncodeToString(sum[:])
}

// TestEncoderCommand pins the commands of ops of every kind to the layout
// that lua.go documents: the script of the limit's algorithm, its keys (the
// log's two), and ARGV[1] to ARGV[10], ARGV[11] for a lease, a shard's share
// of a split limit.
func TestEncoderCommand(t *testing.T) {
	enc, err := NewEncoder("rl:", 0)
	require.NoError(t, err)
	key := rate.Key{Domain: "edge", Entries: []rate.Entry{{Key: "api_key", Value: "a"}}}
	const now = "1790000000000000"
	for _, tc := range []struct {
		name  string
		op    rate.Op
		shard int
		want  []any
	}{
		{
			name: "take",
			op:   rate.Op{Key: key, Limit: algorithms.Limit{Algorithm: algorithms.SlidingWindowCounter, Requests: 100, Window: time.Minute}, Hits: 2},
			// D = 100 · ⌊3650 days / 1 minute⌋.
			shard: Unsharded,
			want: []any{"evalsha", digest(t, algorithms.SlidingWindowCounter), 1, "rl:{edge|api_key=a|sliding_window_counter:60}",
				"take", now, "100", "60000000", "2", "", "", "100", "0", "525600000"},
		},
		{
			name:  "take of more than the limit",
			op:    rate.Op{Key: key, Limit: algorithms.Limit{Algorithm: algorithms.SlidingWindowCounter, Requests: 100, Window: time.Minute}, Hits: 1_000_000},
			shard: Unsharded,
			want: []any{"evalsha", digest(t, algorithms.SlidingWindowCounter), 1, "rl:{edge|api_key=a|sliding_window_counter:60}",
				"take", now, "100", "60000000", "101", "", "", "100", "0", "525600000"},
		},
		{
			name: "refund by receipt to a shard of a log",
			op: rate.Op{Key: key, Limit: algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: 10, Window: time.Hour}, Hits: 1, Shards: 4,
				Kind: rate.Refund, Receipt: algorithms.Receipt{At: 1789999999000000, Seq: 7, Shard: 3}},
			// Shard 3 of 4 holds ⌊10/4⌋ = 2; the log's D is its L.
			shard: 3,
			want: []any{"evalsha", digest(t, algorithms.SlidingWindowLog), 2,
				"rl:{edge|api_key=a|sliding_window_log:3600#3}", "rl:{edge|api_key=a|sliding_window_log:3600#3}:seq",
				"refund", now, "2", "3600000000", "1", "1789999999000000", "7", "2", "0", "2"},
		},
		{
			name: "a lease's take of a log",
			op: rate.Op{Key: key, Limit: algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: 10, Window: time.Hour}, Hits: 4,
				Hold: 50*time.Millisecond + 1500*time.Nanosecond},
			// ARGV[11], the hold in whole µs, only for a lease.
			shard: Unsharded,
			want: []any{"evalsha", digest(t, algorithms.SlidingWindowLog), 2,
				"rl:{edge|api_key=a|sliding_window_log:3600}", "rl:{edge|api_key=a|sliding_window_log:3600}:seq",
				"take", now, "10", "3600000000", "4", "", "", "10", "0", "10", "50001"},
		},
		{
			name: "a settlement of a bucket's leases",
			op: rate.Op{Key: key, Limit: algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Window: time.Second}, Kind: rate.Settle,
				Leases: []algorithms.Lease{{Receipt: algorithms.Receipt{At: 1789999999000000, Epoch: 1789999998000000}, Hold: math.MaxInt64, Size: 8, Reported: 1,
					Served: []algorithms.Served{{At: 1789999999000100, N: 2}}, Close: true}}},
			// ARGV[11] on: the leases, each hold beyond MaxHold cut to it.
			shard: Unsharded,
			want: []any{"evalsha", digest(t, algorithms.TokenBucket), 1, "rl:{edge|api_key=a|token_bucket:1}",
				"settle", now, "10", "1000000", "0", "", "", "10", "0", "3153600000",
				"1", "1789999999000000", "0", "1789999998000000", "315360000000000", "8", "1", "1", "1", "1789999999000100", "0", "2"},
		},
		{
			name: "a refund by a lease's receipt",
			op: rate.Op{Key: key, Limit: algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Window: time.Second}, Hits: 3,
				Kind: rate.Refund, Receipt: algorithms.Receipt{At: 1789999999000000, Epoch: 1789999998000000}},
			// ARGV[11]: the receipt's epoch.
			shard: Unsharded,
			want: []any{"evalsha", digest(t, algorithms.TokenBucket), 1, "rl:{edge|api_key=a|token_bucket:1}",
				"refund", now, "10", "1000000", "3", "1789999999000000", "0", "10", "0", "3153600000", "1789999998000000"},
		},
		{
			name: "a hold below a microsecond is none",
			op: rate.Op{Key: key, Limit: algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Window: time.Second}, Hits: 3,
				Hold: 999 * time.Nanosecond},
			shard: Unsharded,
			want: []any{"evalsha", digest(t, algorithms.TokenBucket), 1, "rl:{edge|api_key=a|token_bucket:1}",
				"take", now, "10", "1000000", "3", "", "", "10", "0", "3153600000"},
		},
		{
			name: "charge with a debt",
			op:   rate.Op{Key: key, Limit: algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Burst: 20, Window: time.Second}, Hits: 1000, Kind: rate.Charge, Debt: true},
			// D = 10 · ⌊3650 days / 1 second⌋.
			shard: Unsharded,
			want: []any{"evalsha", digest(t, algorithms.TokenBucket), 1, "rl:{edge|api_key=a|token_bucket:1}",
				"charge", now, "10", "1000000", "1000", "", "", "20", "0", "3153600000"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := enc.Command(&tc.op, tc.shard, now)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			if len(tc.op.Leases) == 0 {
				assert.LessOrEqual(t, len(got), maxArgv, "a scriptCall holds it without allocating")
			}
		})
	}
}

// TestEncoderSlackAndServerTime: the slack is ARGV[9] in milliseconds, and
// an empty now asks the script for Redis TIME.
func TestEncoderSlackAndServerTime(t *testing.T) {
	enc, err := NewEncoder("ratewarden:", clockSlack)
	require.NoError(t, err)
	op := rate.Op{Key: rate.Key{Domain: "d"}, Limit: algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 1, Window: time.Second}, Hits: 1}
	got, err := enc.Command(&op, Unsharded, "")
	require.NoError(t, err)
	assert.Equal(t, "ratewarden:{d|token_bucket:1}", got[3])
	assert.Equal(t, "", got[5], "ARGV[2]")
	assert.Equal(t, "86400000", got[12], "ARGV[9]")
}

// TestEncoderRejects: a prefix that would break the hash tag, a negative
// slack, an op whose limit is invalid, and a settlement of no leases.
func TestEncoderRejects(t *testing.T) {
	_, err := NewEncoder("a{b", 0)
	assert.ErrorContains(t, err, "must not contain")
	_, err = NewEncoder("rl:", -time.Second)
	assert.ErrorContains(t, err, "negative")
	enc, err := NewEncoder("rl:", 0)
	require.NoError(t, err)
	for _, l := range []algorithms.Limit{
		{Requests: 1, Window: time.Second},
		{Algorithm: algorithms.TokenBucket, Requests: 1, Window: 1500 * time.Millisecond},
		{Algorithm: algorithms.SlidingWindowLog, Requests: 1, Burst: 2, Window: time.Second},
	} {
		_, err := enc.Command(&rate.Op{Limit: l, Hits: 1}, Unsharded, "")
		assert.ErrorIs(t, err, algorithms.ErrInvalidLimit, "%+v", l)
	}
	// The fixed window is counted with plain commands, not a script.
	fw := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 1, Window: time.Second}
	_, err = enc.Command(&rate.Op{Limit: fw, Hits: 1}, Unsharded, "")
	assert.ErrorContains(t, err, "fixed_window is counted without a script")
	// A settlement names the window of its leases' count: it has leases.
	_, err = enc.Command(&rate.Op{Limit: fw, Kind: rate.Settle}, Unsharded, "")
	assert.ErrorContains(t, err, "a settlement of no leases")
}

// TestEncoderHasEveryScript: the encoder holds the script of every
// algorithm of the table, with the keys the table gives it, and for an
// algorithm counted without a script, the one that settles its leases.
func TestEncoderHasEveryScript(t *testing.T) {
	enc, err := NewEncoder("rl:", 0)
	require.NoError(t, err)
	for _, a := range algorithms.Algorithms {
		s := enc.script(a)
		if a.Spec().Counter {
			// Counted with plain commands: a script settles its leases.
			require.NotNil(t, s, "%s", a)
			assert.Equal(t, a.Spec().SettleScript, s.name)
			assert.True(t, s.window, "%s: a window's count", a)
			continue
		}
		require.NotNil(t, s, "%s", a)
		assert.Equal(t, a.Spec().Script, s.name)
		assert.Equal(t, digest(t, a), s.sha)
		assert.Equal(t, a.Spec().Keys, s.keys)
	}
}
