package redisx

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/rate"
	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
)

func TestKeySlot(t *testing.T) {
	// Redis Cluster's specification: CRC16("123456789") is 0x31C3.
	assert.Equal(t, 0x31C3, KeySlot("123456789"))
	assert.Equal(t, KeySlot("user"), KeySlot("{user}:a"), "the tag counts")
	assert.Equal(t, KeySlot("user"), KeySlot("x{user}y{z}"), "the first tag")
	assert.Equal(t, KeySlot("a{}b"), int(crc16("a{}b")%ClusterSlots), "an empty tag: the whole key")
	assert.Equal(t, KeySlot("a{b"), int(crc16("a{b")%ClusterSlots), "no closing brace: the whole key")
	assert.Equal(t, KeySlot("}"), KeySlot("{}}"[2:]))
}

// TestKeySlotIsClusterKeyslot compares KeySlot with CLUSTER KEYSLOT for
// the keys of random limits and random strings with braces.
func TestKeySlotIsClusterKeyslot(t *testing.T) {
	cluster := redistest.SharedCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := rand.New(rand.NewPCG(7, 8))
	enc, err := NewEncoder("rl:", 0)
	require.NoError(t, err)
	for range 200 {
		in := randomKeyInput(r)
		in.limit.Requests += 2
		op := &rate.Op{Key: in.key, Limit: in.limit, Shards: 3}
		sks, err := enc.StateKeys(op, time.Now())
		require.NoError(t, err)
		for _, sk := range sks {
			for _, key := range sk.Keys {
				want, err := cluster.KeySlot(ctx, key)
				require.NoError(t, err)
				require.Equal(t, want, KeySlot(key), "key %q", key)
				require.Equal(t, want, sk.Slot, "key %q", key)
			}
		}
		b := make([]byte, r.IntN(12))
		for i := range b {
			b[i] = "ab{}x"[r.IntN(5)]
		}
		want, err := cluster.KeySlot(ctx, string(b))
		require.NoError(t, err)
		require.Equal(t, want, KeySlot(string(b)), "key %q", b)
	}
}

func TestStateKeys(t *testing.T) {
	enc, err := NewEncoder("rl:", 0)
	require.NoError(t, err)
	k := rate.Key{Domain: "edge", Entries: []rate.Entry{{Key: "api_key", Value: "a"}}}
	at := time.Unix(29_928_630*60+15, 0)

	// A fixed window counted without a script: the count of the window
	// that holds at; with a debt, the whole state.
	fw := &rate.Op{Key: k, Limit: algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 5, Window: time.Minute}}
	sks, err := enc.StateKeys(fw, at)
	require.NoError(t, err)
	assert.Equal(t, []StateKeys{{Shard: Unsharded, Limit: fw.Limit, Keys: []string{"rl:{edge|api_key=a|fixed_window:60}:w29928630"},
		Slot: KeySlot("edge|api_key=a|fixed_window:60")}}, sks)
	fw.Debt = true
	sks, err = enc.StateKeys(fw, at)
	require.NoError(t, err)
	assert.Equal(t, []string{"rl:{edge|api_key=a|fixed_window:60}"}, sks[0].Keys)

	// The log's two keys; and a split limit, whose shards share it out.
	log := &rate.Op{Key: k, Limit: algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: 5, Window: time.Hour}, Shards: 2}
	sks, err = enc.StateKeys(log, at)
	require.NoError(t, err)
	require.Len(t, sks, 2)
	assert.Equal(t, 0, sks[0].Shard)
	assert.Equal(t, []string{"rl:{edge|api_key=a|sliding_window_log:3600#0}", "rl:{edge|api_key=a|sliding_window_log:3600#0}:seq"}, sks[0].Keys)
	assert.Equal(t, []uint64{3, 2}, []uint64{sks[0].Limit.Requests, sks[1].Limit.Requests})
	assert.Equal(t, KeySlot(sks[1].Keys[0]), sks[1].Slot)
	assert.NotEqual(t, sks[0].Slot, sks[1].Slot)

	// More shards than hits: a limit of 1 is not split.
	log.Limit.Requests = 1
	sks, err = enc.StateKeys(log, at)
	require.NoError(t, err)
	require.Len(t, sks, 1)
	assert.Equal(t, Unsharded, sks[0].Shard)

	_, err = enc.StateKeys(&rate.Op{Key: k, Limit: algorithms.Limit{Algorithm: algorithms.TokenBucket}}, at)
	assert.ErrorIs(t, err, algorithms.ErrInvalidLimit)
}

// TestStateKeysAreTheLimitersKeys: after a take of every algorithm, split
// and not, Redis holds the keys StateKeys names for the shard it went to.
func TestStateKeysAreTheLimitersKeys(t *testing.T) {
	client := redistest.Standalone(t).Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	prefix := "statekeys:" + time.Now().Format("150405.000000") + ":"
	lim, err := NewLimiter(client, 2, WithKeyPrefix(prefix), WithRandom(func(n int) int { return n - 1 }))
	require.NoError(t, err)
	defer lim.Close()
	enc, err := NewEncoder(prefix, 0)
	require.NoError(t, err)
	for _, alg := range algorithms.Algorithms {
		for _, shards := range []uint32{1, 3} {
			op := rate.Op{
				Key:    rate.Key{Domain: "d", Entries: []rate.Entry{{Key: "k", Value: alg.String()}}},
				Limit:  algorithms.Limit{Algorithm: alg, Requests: 10, Window: time.Hour},
				Hits:   1,
				Shards: shards,
			}
			res, err := lim.Do(ctx, []rate.Op{op})
			require.NoError(t, err)
			require.True(t, res[0].Allowed)
			sks, err := enc.StateKeys(&op, time.Now())
			require.NoError(t, err)
			taken := sks[len(sks)-1] // the random source picks the last shard
			for _, key := range taken.Keys {
				n, err := client.Exists(ctx, key).Result()
				require.NoError(t, err)
				assert.EqualValues(t, 1, n, "%s with %d shards: key %q", alg, shards, key)
			}
		}
	}
}
