package algorithms_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/rate"
)

// TestTable: every algorithm has a whole row in the table of algorithms,
// and what the row says holds: its name parses back to it, it has a state,
// a script and keys that start with the state's, a lifetime and a debt, and
// Validate takes a burst, calendar windows and more than MaxLogRequests
// exactly where the row says so. The zero Algorithm and the one past the
// table have no row.
func TestTable(t *testing.T) {
	require.NotEmpty(t, algorithms.Algorithms)
	for i, a := range algorithms.Algorithms {
		spec := a.Spec()
		t.Run(spec.Name, func(t *testing.T) {
			require.Equal(t, algorithms.Algorithm(i+1), a, "the algorithms are the rows of the table, in order")
			require.True(t, a.Valid())
			require.Equal(t, spec.Name, a.String())
			back, err := algorithms.ParseAlgorithm(spec.Name)
			require.NoError(t, err)
			require.Equal(t, a, back)
			require.NotNil(t, algorithms.NewState(a))
			if spec.Counter {
				require.Empty(t, spec.Script, "an algorithm counted with plain commands has no script")
			} else {
				require.True(t, strings.HasSuffix(spec.Script, ".lua"), "script %q", spec.Script)
			}
			require.NotEmpty(t, spec.Keys)
			require.Equal(t, "", spec.Keys[0], "the first key is the state's")
			seen := map[string]bool{}
			for _, k := range spec.Keys {
				require.False(t, seen[k], "key suffix %q twice", k)
				seen[k] = true
			}

			l := algorithms.Limit{Algorithm: a, Requests: 10, Window: time.Minute}
			require.NoError(t, l.Validate())
			require.Positive(t, l.Lifetime())
			require.Positive(t, l.MaxDebt())
			burst := l
			burst.Burst = 20
			assert.Equal(t, spec.Burst, burst.Validate() == nil, "a burst: %v", burst.Validate())
			assert.Equal(t, map[bool]uint64{true: 20, false: 10}[spec.Burst], burst.Capacity())
			calendar := l
			calendar.Window, calendar.Calendar = 24*time.Hour, true
			assert.Equal(t, spec.Calendar, calendar.Validate() == nil, "calendar windows: %v", calendar.Validate())
			large := l
			large.Requests = algorithms.MaxLogRequests + 1
			assert.Equal(t, !spec.EntryPerHit, large.Validate() == nil, "%d requests: %v", large.Requests, large.Validate())
		})
	}
	for _, a := range []algorithms.Algorithm{0, algorithms.Algorithm(len(algorithms.Algorithms) + 1)} {
		require.False(t, a.Valid(), "%d", a)
		require.Equal(t, algorithms.Spec{}, a.Spec(), "%d", a)
		require.Nil(t, algorithms.NewState(a), "%d", a)
		l := algorithms.Limit{Algorithm: a, Requests: 10, Window: time.Minute}
		require.ErrorIs(t, l.Validate(), algorithms.ErrInvalidLimit)
		require.Zero(t, l.Lifetime())
		require.Zero(t, l.MaxDebt())
	}
}

// TestTableExactRefund: a refund by receipt sent twice gives back no more
// than sent once exactly for the algorithms whose row says so, and
// Op.IdempotentRefund says the same.
func TestTableExactRefund(t *testing.T) {
	for _, a := range algorithms.Algorithms {
		t.Run(a.String(), func(t *testing.T) {
			l := algorithms.Limit{Algorithm: a, Requests: 10, Window: time.Minute}
			st := algorithms.NewState(a)
			now := time.Date(2026, 11, 21, 10, 0, 0, 123456000, time.UTC)
			require.True(t, st.Take(l, now, 5).Allowed)
			taken := st.Take(l, now, 3)
			require.True(t, taken.Allowed)
			once := st.Refund(l, now, 3, taken.Receipt)
			twice := st.Refund(l, now, 3, taken.Receipt)
			assert.Equal(t, uint64(5), once.Remaining)
			assert.Equal(t, a.Spec().ExactRefund, twice.Remaining == once.Remaining,
				"remaining %d after one refund, %d after two", once.Remaining, twice.Remaining)
			op := rate.Op{Limit: l, Hits: 3, Kind: rate.Refund, Receipt: taken.Receipt}
			assert.Equal(t, a.Spec().ExactRefund, op.IdempotentRefund())
			op.Receipt = algorithms.Receipt{}
			assert.False(t, op.IdempotentRefund(), "a refund without a receipt gives back the newest hits, whoever took them")
		})
	}
}

// TestNames lists algorithms for messages, in the order of the table.
func TestNames(t *testing.T) {
	assert.Equal(t, "fixed_window, sliding_window_log, sliding_window_counter or token_bucket", algorithms.Names(nil))
	assert.Equal(t, "token_bucket", algorithms.Names(func(s algorithms.Spec) bool { return s.Burst }))
	assert.Equal(t, "fixed_window or sliding_window_log", algorithms.Names(func(s algorithms.Spec) bool { return s.Name != "token_bucket" && s.Name != "sliding_window_counter" }))
	assert.Equal(t, "", algorithms.Names(func(algorithms.Spec) bool { return false }))
}

// TestAlgorithmText: the names the limits files and the settings use read
// and write back the same, and an unknown one is refused with the names.
func TestAlgorithmText(t *testing.T) {
	for _, a := range algorithms.Algorithms {
		text, err := a.MarshalText()
		require.NoError(t, err)
		var back algorithms.Algorithm
		require.NoError(t, back.UnmarshalText(text))
		assert.Equal(t, a, back)
	}
	var a algorithms.Algorithm
	assert.ErrorContains(t, a.UnmarshalText([]byte("leaky")), "want fixed_window, sliding_window_log, sliding_window_counter or token_bucket")
	_, err := algorithms.Algorithm(9).MarshalText()
	assert.Error(t, err)
}
