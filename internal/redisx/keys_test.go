package redisx

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/rate"
	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
)

func TestNewKeySpaceRejectsBraces(t *testing.T) {
	for _, prefix := range []string{"{", "}", "a{b", "rl:}", "{x}"} {
		_, err := newKeySpace(prefix)
		assert.Error(t, err, "prefix %q", prefix)
	}
	for _, prefix := range []string{"", "rl:", "a#b|c=d:"} {
		_, err := newKeySpace(prefix)
		assert.NoError(t, err, "prefix %q", prefix)
	}
}

func TestKeysLayout(t *testing.T) {
	ks, err := newKeySpace("rl:")
	require.NoError(t, err)
	k := rate.Key{Domain: "edge", Entries: []rate.Entry{{Key: "api_key", Value: "a{b}#1"}}}
	fw := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 5, Window: time.Minute}
	log := algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: 5, Window: time.Hour}

	// A fixed window: the state of a limit that owes, and the count key of
	// the window (minute 29 928 630 since the epoch here).
	at := time.Unix(29_928_630*60+15, 0)
	assert.Equal(t, []string{"rl:{edge|api_key=a%7Bb%7D#1|fixed_window:60}", "rl:{edge|api_key=a%7Bb%7D#1|fixed_window:60}:w29928630"},
		keysAt(ks, k, fw, Unsharded, at))
	assert.Equal(t, []string{"rl:{edge|api_key=a%7Bb%7D#1|fixed_window:60#3}", "rl:{edge|api_key=a%7Bb%7D#1|fixed_window:60#3}:w29928630"},
		keysAt(ks, k, fw, 3, at))
	assert.Equal(t, []string{
		"rl:{edge|api_key=a%7Bb%7D#1|sliding_window_log:3600}",
		"rl:{edge|api_key=a%7Bb%7D#1|sliding_window_log:3600}:seq",
	}, keysOf(ks, k, log, Unsharded))
}

// TestAppendKeys: one key per suffix, whether each suffix starts with the
// one before (so that one string holds every key) or not.
func TestAppendKeys(t *testing.T) {
	ks, err := newKeySpace("rl:")
	require.NoError(t, err)
	for _, tc := range []struct {
		shard    int
		suffixes []string
		want     []any
	}{
		{Unsharded, []string{""}, []any{1, "rl:{id}"}},
		{Unsharded, []string{"", ":seq"}, []any{2, "rl:{id}", "rl:{id}:seq"}},
		{12, []string{"", ":a", ":ab"}, []any{3, "rl:{id#12}", "rl:{id#12}:a", "rl:{id#12}:ab"}},
		{0, []string{":b", "", ":a"}, []any{3, "rl:{id#0}:b", "rl:{id#0}", "rl:{id#0}:a"}},
	} {
		assert.Equal(t, tc.want, ks.appendKeys(nil, "id", tc.shard, tc.suffixes), "%v", tc.suffixes)
	}
}

// keysOf returns the KEYS that the encoder writes for a script call of
// limit l on k in shard, under the prefix of s.
func keysOf(s keySpace, k rate.Key, l algorithms.Limit, shard int) []string {
	return keysAt(s, k, l, shard, time.Now())
}

// keysAt is keysOf at now: a counted limit's count key is the key of the
// window that holds now.
func keysAt(s keySpace, k rate.Key, l algorithms.Limit, shard int, now time.Time) []string {
	suffixes := l.Algorithm.Spec().Keys
	if l.Algorithm.Spec().Counter {
		// The state key (of a limit that owes) and the count key.
		suffixes = append(slices.Clip(suffixes), counterKeySuffix+strconv.FormatInt(l.WindowIndex(now), 10))
	}
	args := s.appendKeys(nil, rate.Identity(k, l), shard, suffixes)
	keys := make([]string, args[0].(int))
	for i := range keys {
		keys[i] = args[1+i].(string)
	}
	return keys
}

// limitKeys returns the keys Redis holds of limit l of k, unsharded: those of
// its script, or the count keys of a counted limit and its state key.
func limitKeys(t *testing.T, client *redis.Client, s keySpace, k rate.Key, l algorithms.Limit) []string {
	t.Helper()
	state := keysOf(s, k, l, Unsharded)[0]
	var glob strings.Builder
	for _, r := range state {
		if strings.ContainsRune(`*?[]\`, r) {
			glob.WriteByte('\\')
		}
		glob.WriteRune(r)
	}
	keys, err := client.Keys(context.Background(), glob.String()+"*").Result()
	require.NoError(t, err)
	return keys
}

// keyInput is everything a key is built from.
type keyInput struct {
	prefix string
	key    rate.Key
	limit  algorithms.Limit
	shard  int
}

// randomKeyInput draws inputs rich in the characters that could blur the
// encoding: braces, the identity's separators, '#', '%', and long values.
func randomKeyInput(r *rand.Rand) keyInput {
	const alphabet = "ab{}|=:#%0123456789\x00\n"
	str := func() string {
		var n int
		switch r.IntN(8) {
		case 0:
			n = 0
		case 1:
			n = rate.MaxIdentityPart - 2 + r.IntN(5)
		default:
			n = 1 + r.IntN(5)
		}
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		return string(b)
	}
	in := keyInput{
		prefix: strings.NewReplacer("{", "", "}", "").Replace(str()),
		key:    rate.Key{Domain: str()},
		limit: algorithms.Limit{
			Algorithm: algorithms.Algorithms[r.IntN(len(algorithms.Algorithms))],
			Requests:  r.Uint64N(3),
			Window:    time.Duration(1+r.IntN(3)) * time.Second,
		},
		shard: Unsharded,
	}
	if r.IntN(2) == 0 {
		in.shard = r.IntN(12)
	}
	for range r.IntN(3) {
		in.key.Entries = append(in.key.Entries, rate.Entry{Key: str(), Value: str()})
	}
	return in
}

// canonical returns a string equal for two inputs exactly when they must
// share keys: the limit's numbers other than algorithm and window are not
// part of a key.
func (in keyInput) canonical() string {
	return fmt.Sprintf("%q %q %d %d %d", in.prefix, in.key, in.limit.Algorithm, in.limit.Window, in.shard)
}

func TestKeysInjective(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	owner := map[string]string{} // key → canonical input
	for range 20_000 {
		in := randomKeyInput(r)
		ks, err := newKeySpace(in.prefix)
		require.NoError(t, err)
		want := in.canonical()
		for _, key := range keysOf(ks, in.key, in.limit, in.shard) {
			if got, ok := owner[key]; ok {
				require.Equal(t, got, want, "two inputs share key %q", key)
			}
			owner[key] = want
		}
	}
	require.Greater(t, len(owner), 16_000, "the inputs should rarely repeat")
}

func TestKeysHashTag(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 10_000 {
		in := randomKeyInput(r)
		ks, err := newKeySpace(in.prefix)
		require.NoError(t, err)
		tag := "{" + rate.Identity(in.key, in.limit)
		if in.shard != Unsharded {
			tag += "#" + strconv.Itoa(in.shard)
		}
		tag += "}"
		for _, key := range keysOf(ks, in.key, in.limit, in.shard) {
			// Redis hashes the text between the first '{' and the first '}'
			// after it.
			open := strings.IndexByte(key, '{')
			end := strings.IndexByte(key[open+1:], '}')
			require.Positive(t, end, "key %q has an empty or unterminated tag", key)
			require.Equal(t, tag, key[open:open+end+2], "key %q", key)
		}
	}
}

func TestKeysShareOneClusterSlot(t *testing.T) {
	cluster := redistest.SharedCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := rand.New(rand.NewPCG(5, 6))
	slots := map[int]bool{}
	for range 200 {
		in := randomKeyInput(r)
		in.limit.Algorithm = algorithms.SlidingWindowLog // the one with two keys
		ks, err := newKeySpace(in.prefix)
		require.NoError(t, err)
		keys := keysOf(ks, in.key, in.limit, in.shard)
		require.Len(t, keys, 2)
		first, err := cluster.KeySlot(ctx, keys[0])
		require.NoError(t, err)
		second, err := cluster.KeySlot(ctx, keys[1])
		require.NoError(t, err)
		require.Equal(t, first, second, "keys %q", keys)
		slots[first] = true
	}
	require.Greater(t, len(slots), 100, "limits should spread over many slots")

	// The shards of one limit spread over slots.
	ks, err := newKeySpace("rl:")
	require.NoError(t, err)
	k := rate.Key{Domain: "d", Entries: []rate.Entry{{Key: "tenant", Value: "hot"}}}
	l := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 1000, Window: time.Second}
	shardSlots := map[int]bool{}
	for shard := range 16 {
		slot, err := cluster.KeySlot(ctx, keysOf(ks, k, l, shard)[0])
		require.NoError(t, err)
		shardSlots[slot] = true
	}
	require.Greater(t, len(shardSlots), 8, "shards should land in different slots")
}
