package redisx

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/memory"
	"github.com/ratewarden/ratewarden/internal/rate"
	"github.com/ratewarden/ratewarden/internal/testkit/algotest"
	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
)

// TestLogKeepsRuns: a sliding_window_log keeps the hits of one take, or of
// one lease, as one member of its sorted set whatever their number, splits
// a run when a refund gives back part of it, and answers as its Go twin
// all along; a log written one member per hit, with its sequence number
// alone in its second key, is read as it was.
func TestLogKeepsRuns(t *testing.T) {
	client := redistest.SharedStandalone(t).Client(t)
	clock := algotest.NewClock(time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC))
	lim, err := NewLimiter(client, testPipelines, WithKeyPrefix(testPrefix(t)), WithClock(clock.Now))
	require.NoError(t, err)
	t.Cleanup(lim.Close)
	mem := memory.New(memory.WithClock(clock.Now))
	t.Cleanup(mem.Close)
	ctx := context.Background()
	limit := algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: 1000, Window: time.Minute}
	key := rate.Key{Domain: "runs", Entries: []rate.Entry{{Key: "k", Value: "v"}}}
	keys := keysOf(lim.enc.keys, key, limit, Unsharded)
	do := func(op rate.Op) algorithms.Result {
		t.Helper()
		op.Key, op.Limit = key, limit
		want, err := mem.Do(ctx, []rate.Op{op})
		require.NoError(t, err)
		got, err := lim.Do(ctx, []rate.Op{op})
		require.NoError(t, err)
		require.Equal(t, alike(want[0]), alike(got[0]), "%+v", op)
		if op.Hold > 0 {
			sameState(t, op, want[0], got[0], clock.Now(), fmt.Sprintf("%+v", op))
		}
		clock.Advance(time.Millisecond)
		return got[0]
	}
	members := func() int64 {
		t.Helper()
		n, err := client.ZCard(ctx, keys[0]).Result()
		require.NoError(t, err)
		return n
	}
	stored := func() string {
		t.Helper()
		s, err := client.Get(ctx, keys[1]).Result()
		require.NoError(t, err)
		return s
	}

	// A new log numbers its hits from the time it starts at, one member
	// each, the count being their number.
	start := uint64(clock.Now().UnixMicro())
	for range 3 {
		do(rate.Op{Hits: 1})
	}
	assert.Equal(t, strconv.FormatUint(start+3, 10), stored(), "single hits: the sequence number alone")
	lease := do(rate.Op{Hits: 500, Hold: 50 * time.Millisecond})
	assert.EqualValues(t, 4, members(), "three takes of one hit and a lease of 500")
	runs := func(count int) string { return fmt.Sprintf("%d:%d", start+503, count) }
	assert.Equal(t, runs(503), stored())

	// Hits 11 to 60 of the lease go back: its run splits in two.
	r := lease.Receipt
	r.Seq += 10
	do(rate.Op{Hits: 50, Kind: rate.Refund, Receipt: r})
	assert.EqualValues(t, 5, members())
	assert.Equal(t, runs(453), stored())
	// 30 go back without a receipt: the newest logged by now, the three
	// single hits, are all it finds; the lease's, logged at its end, stay.
	do(rate.Op{Hits: 30, Kind: rate.Refund})
	assert.EqualValues(t, 2, members())
	assert.Equal(t, runs(450), stored())
	assert.True(t, do(rate.Op{Hits: 550}).Allowed, "the limit filled")
	assert.False(t, do(rate.Op{Hits: 1}).Allowed)

	// A log written one member per hit, with the sequence number alone, as
	// before runs were kept, is read as it is, and stays so.
	old := rate.Key{Domain: "runs", Entries: []rate.Entry{{Key: "k", Value: "old"}}}
	oldKeys := keysOf(lim.enc.keys, old, limit, Unsharded)
	for seq := 1; seq <= 5; seq++ {
		require.NoError(t, client.ZAdd(ctx, oldKeys[0], redis.Z{Score: float64(clock.Now().UnixMicro()), Member: fmt.Sprintf("%016d", seq)}).Err())
		_, err := mem.Do(ctx, []rate.Op{{Key: old, Limit: limit, Hits: 1}})
		require.NoError(t, err)
	}
	require.NoError(t, client.Set(ctx, oldKeys[1], "5", time.Minute).Err())
	key, keys = old, oldKeys
	res, err := lim.Do(ctx, []rate.Op{{Key: key, Limit: limit, Hits: 1}})
	require.NoError(t, err)
	assert.EqualValues(t, 994, res[0].Remaining)
	assert.EqualValues(t, 6, res[0].Receipt.Seq)
	assert.Equal(t, "6", stored())

	// Keys evicted one without the other: a log without its count is
	// counted, and goes on with sequence numbers after its own; a count
	// without its log is of an empty log, which starts again from the
	// time. The Go twin loses nothing, so the results are checked against
	// what Redis still holds.
	require.NoError(t, client.Del(ctx, keys[1]).Err())
	res, err = lim.Do(ctx, []rate.Op{{Key: key, Limit: limit, Hits: 1}})
	require.NoError(t, err)
	assert.EqualValues(t, 993, res[0].Remaining)
	assert.EqualValues(t, 7, res[0].Receipt.Seq)
	assert.Equal(t, "7:7", stored())
	require.NoError(t, client.Del(ctx, keys[0]).Err())
	res, err = lim.Do(ctx, []rate.Op{{Key: key, Limit: limit, Hits: 2}})
	require.NoError(t, err)
	now := uint64(clock.Now().UnixMicro())
	assert.EqualValues(t, 998, res[0].Remaining)
	assert.EqualValues(t, now+1, res[0].Receipt.Seq)
	assert.Equal(t, fmt.Sprintf("%d:2", now+2), stored())
}

// TestLogSettlementCostsFewCommands: a lease that served its hits in many
// runs is settled with one read of its members, one ZREM and one ZADD,
// whatever the runs, so that a hot log costs Redis few commands per
// decision.
func TestLogSettlementCostsFewCommands(t *testing.T) {
	client := redistest.Standalone(t).Client(t)
	ctx := context.Background()
	lim, err := NewLimiter(client, testPipelines, WithKeyPrefix(testPrefix(t)))
	require.NoError(t, err)
	t.Cleanup(lim.Close)
	limit := algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: 100_000, Window: time.Second}
	key := rate.Key{Domain: "runs", Entries: []rate.Entry{{Key: "k", Value: "settle"}}}
	res, err := lim.Do(ctx, []rate.Op{{Key: key, Limit: limit, Hits: 1000, Hold: time.Second}})
	require.NoError(t, err)
	require.True(t, res[0].Allowed)
	r := res[0].Receipt
	start := r.At - time.Second.Microseconds()
	ls := algorithms.Lease{Receipt: r, Hold: time.Second, Size: 1000, Close: true}
	for i := range 50 {
		ls.Served = append(ls.Served, algorithms.Served{At: start + int64(i)*1000, Seq: r.Seq + uint64(i)*10, N: 10})
	}
	calls := func() map[string]int64 {
		stats, err := client.Info(ctx, "commandstats").Result()
		require.NoError(t, err)
		out := map[string]int64{}
		for _, line := range strings.Split(stats, "\n") {
			name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":calls=")
			if !ok {
				continue
			}
			n, _, _ := strings.Cut(rest, ",")
			out[name], _ = strconv.ParseInt(n, 10, 64)
		}
		return out
	}
	before := calls()
	res, err = lim.Do(ctx, []rate.Op{{Key: key, Limit: limit, Kind: rate.Settle, Leases: []algorithms.Lease{ls}}})
	require.NoError(t, err)
	require.True(t, res[0].Allowed)
	after := calls()
	var all int64
	for name, n := range after {
		// INFO is the test's; TIME the Limiter's clock, which reads
		// Redis's in the background whatever it decides.
		if name != "info" && name != "time" {
			all += n - before[name]
		}
	}
	assert.LessOrEqual(t, after["zadd"]-before["zadd"], int64(1), "ZADDs of a settlement of 50 runs")
	assert.LessOrEqual(t, after["zrem"]-before["zrem"], int64(1), "ZREMs of a settlement of 50 runs")
	assert.LessOrEqual(t, all, int64(12), "commands of a settlement of 50 runs, its EVALSHA with them: %v", after)
	peek, err := lim.Do(ctx, []rate.Op{{Key: key, Limit: limit}})
	require.NoError(t, err)
	assert.EqualValues(t, limit.Requests-500, peek[0].Remaining, "the 500 served hits stay, the other 500 go")
}
