package rate_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/rate"
)

// identityInput is one input of Identity, in a form where distinct inputs
// print distinctly.
type identityInput struct {
	key   rate.Key
	limit algorithms.Limit
}

func (in identityInput) String() string {
	return fmt.Sprintf("%q %q %s %d", in.key.Domain, in.key.Entries, in.limit.Algorithm, in.limit.Window/time.Second)
}

// randomPart draws a string from an alphabet heavy in the encoding's
// separators and escapes, so that a careless encoding would collide.
func randomPart(rng *rand.Rand) string {
	const alphabet = "ab|=:%{}#0\x00\x1f\x7f"
	var b strings.Builder
	n := rng.IntN(5)
	if rng.IntN(25) == 0 {
		n = rate.MaxIdentityPart - 2 + rng.IntN(5) // around the digest threshold
	}
	for range n {
		b.WriteByte(alphabet[rng.IntN(len(alphabet))])
	}
	return b.String()
}

func randomIdentityInput(rng *rand.Rand) identityInput {
	in := identityInput{
		key: rate.Key{Domain: randomPart(rng)},
		limit: algorithms.Limit{
			Algorithm: algorithms.Algorithms[rng.IntN(len(algorithms.Algorithms))],
			Window:    []time.Duration{time.Second, 10 * time.Second, time.Minute}[rng.IntN(3)],
			Requests:  rng.Uint64N(100),
		},
	}
	for range rng.IntN(4) {
		in.key.Entries = append(in.key.Entries, rate.Entry{Key: randomPart(rng), Value: randomPart(rng)})
	}
	return in
}

// TestIdentityInjective: distinct domains, entries, algorithms or windows
// never share an identity, and no identity holds a brace.
func TestIdentityInjective(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 12))
	seen := make(map[string]string) // identity → input
	for range 100_000 {
		in := randomIdentityInput(rng)
		id := rate.Identity(in.key, in.limit)
		require.NotContains(t, id, "{", "identity of %s", in)
		require.NotContains(t, id, "}", "identity of %s", in)
		if other, ok := seen[id]; ok {
			require.Equal(t, other, in.String(), "two inputs share the identity %q", id)
		}
		seen[id] = in.String()
	}
	require.Greater(t, len(seen), 50_000, "the inputs should be mostly distinct")
}

func TestIdentity(t *testing.T) {
	long := strings.Repeat("x", rate.MaxIdentityPart+1)
	fw := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 5, Window: time.Minute}
	e := func(kv ...string) []rate.Entry {
		var es []rate.Entry
		for i := 0; i < len(kv); i += 2 {
			es = append(es, rate.Entry{Key: kv[i], Value: kv[i+1]})
		}
		return es
	}
	// Pairs a naive join would confuse.
	distinct := []rate.Key{
		{Domain: "d", Entries: e("k", "v")},
		{Domain: "d|k=v"},
		{Domain: "d", Entries: e("k", "v|k2=v2")},
		{Domain: "d", Entries: e("k", "v", "k2", "v2")},
		{Domain: "d", Entries: e("k2", "v2", "k", "v")},
		{Domain: "d", Entries: e("k=v", "")},
		{Domain: "d", Entries: e("k", "")},
		{Domain: "d", Entries: e("", "")},
		{Domain: "d"},
		{Domain: "d", Entries: e("k", "%7C")},
		{Domain: "d", Entries: e("k", "|")},
		{Domain: "d", Entries: e("k", long)},
		{Domain: "d", Entries: e("k", long+"y")},
		{Domain: "d", Entries: e("k", "%#"+strings.Repeat("0", 64))},
		{Domain: "d", Entries: e("k", "v:60")},
	}
	ids := make(map[string]int)
	for i, k := range distinct {
		id := rate.Identity(k, fw)
		j, dup := ids[id]
		require.False(t, dup, "keys %d and %d share %q", i, j, id)
		ids[id] = i
	}

	k := distinct[0]
	require.Equal(t, "d|k=v|fixed_window:60", rate.Identity(k, fw))
	require.Equal(t, "a%7Bb%7D%25%7C%3D%3A%00|fixed_window:60", rate.Identity(rate.Key{Domain: "a{b}%|=:\x00"}, fw))
	require.Equal(t, rate.Identity(k, fw), rate.Identity(k, algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 7, Window: time.Minute}), "the limit's numbers are not part of the identity")
	require.NotEqual(t, rate.Identity(k, fw), rate.Identity(k, algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: 5, Window: time.Minute}))
	require.NotEqual(t, rate.Identity(k, fw), rate.Identity(k, algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 5, Window: time.Hour}))
	require.Less(t, len(rate.Identity(rate.Key{Domain: long, Entries: e(long, long)}, fw)), 3*70+30, "long parts are digested")
}

// TestIdentityOfACalendarLimit: a calendar month and 30 days count apart.
func TestIdentityOfACalendarLimit(t *testing.T) {
	month := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 10, Window: 30 * 24 * time.Hour, Calendar: true}
	plain := month
	plain.Calendar = false
	k := rate.Key{Domain: "d", Entries: []rate.Entry{{Key: "k", Value: "v"}}}
	require.NotEqual(t, rate.Identity(k, plain), rate.Identity(k, month), "a calendar month and 30 days count apart")
	require.Equal(t, "d|k=v|fixed_window:2592000:calendar", rate.Identity(k, month))
}
