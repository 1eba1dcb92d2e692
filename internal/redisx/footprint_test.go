package redisx

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
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

// TestFootprint measures, on a server of its own, what one limit costs Redis:
// the bytes its keys take (MEMORY USAGE) and the commands its script runs
// per decision (INFO commandstats, without the EVALSHA itself), that a
// denial writes nothing, and that a charge, which is no denial, does; for
// the fixed window, counted without a script, the commands of a decision
// (counterFootprint). docs/redis.md ("Sizing memory") quotes the bytes it
// logs, and the range of the algorithms other than the log is held to it.
func TestFootprint(t *testing.T) {
	srv := redistest.Standalone(t)
	client := srv.Client(t)
	ctx := context.Background()
	lim, err := NewLimiter(client, testPipelines)
	require.NoError(t, err)

	key := rate.Key{Domain: "edge", Entries: []rate.Entry{{Key: "api_key", Value: "k-5f2a9c1e7b3d4a60"}}}
	var rows []string
	// small holds the bytes of a full limit of each algorithm but the log.
	var small []int64
	for _, alg := range algorithms.Algorithms {
		if alg.Spec().Counter {
			row, full := counterFootprint(t, client, lim, key, alg)
			rows, small = append(rows, row), append(small, full)
			continue
		}
		limit := algorithms.Limit{Algorithm: alg, Requests: 100, Window: time.Minute}
		op := rate.Op{Key: key, Limit: limit, Hits: 1}
		// Warm up the script cache and the state, then count what 100
		// decisions (the last of them denied) run inside Redis.
		_, err := lim.Do(ctx, []rate.Op{op})
		require.NoError(t, err)
		require.NoError(t, client.ConfigResetStat(ctx).Err())
		const decisions = 100
		for range decisions {
			_, err := lim.Do(ctx, []rate.Op{op})
			require.NoError(t, err)
		}
		calls := commandCalls(t, client.Info(ctx, "commandstats").Val())
		assert.Equal(t, decisions, calls["evalsha"], "one EVALSHA per decision")
		inside := 0
		for cmd, n := range calls {
			if cmd != "evalsha" && cmd != "config|resetstat" && cmd != "info" {
				inside += n
			}
		}
		// TIME, the read, and the write of what changed; an expiry only
		// when the time the state is done with moved (once, if the run
		// crossed a window boundary). The bucket's and the log's move
		// with every admitted hit.
		most := map[algorithms.Algorithm]int{algorithms.FixedWindow: 3, algorithms.SlidingWindowCounter: 3, algorithms.TokenBucket: 4, algorithms.SlidingWindowLog: 8}[alg]
		assert.LessOrEqual(t, inside, most*decisions+2, "%s: commands inside the script for %d decisions: %v", alg, decisions, calls)

		// The limit is full now: a denial changes nothing, so its script
		// must write nothing (no write replicated, no expiry moved).
		require.NoError(t, client.ConfigResetStat(ctx).Err())
		const denials = 10
		for range denials {
			res, err := lim.Do(ctx, []rate.Op{op})
			require.NoError(t, err)
			require.False(t, res[0].Allowed, "%s: the limit is full", alg)
		}
		denied := 0
		for cmd, n := range commandCalls(t, client.Info(ctx, "commandstats").Val()) {
			switch cmd {
			case "evalsha", "config|resetstat", "info":
			case "time", "hmget", "zremrangebyscore", "zrangebyscore", "zcard", "zrange", "get", "exists":
				denied += n
			default:
				t.Errorf("%s: a denial ran %s %d times", alg, cmd, n)
			}
		}

		keys := keysOf(lim.enc.keys, key, limit, Unsharded)
		bytes := func() int64 {
			var total int64
			for _, k := range keys {
				n, err := client.MemoryUsage(ctx, k).Result()
				if err == nil {
					total += n
				}
			}
			return total
		}
		full := bytes() // 100 hits admitted: the limit is full
		require.Positive(t, full)
		rows = append(rows, fmt.Sprintf("| %s | %d | %d | %.1f | %.1f |", alg, len(keys), full, float64(inside)/decisions, float64(denied)/denials))
		if alg != algorithms.SlidingWindowLog {
			assert.Less(t, full, int64(256), "%s keeps a constant, small state", alg)
			small = append(small, full)
		}

		// A charge is not a denial: past the limit it is recorded all the
		// same, so its script writes.
		require.NoError(t, client.ConfigResetStat(ctx).Err())
		charge := op
		charge.Kind = rate.Charge
		res, err := lim.Do(ctx, []rate.Op{charge})
		require.NoError(t, err)
		require.False(t, res[0].Allowed, "%s: a charge past the limit is over it", alg)
		writes := 0
		for cmd, n := range commandCalls(t, client.Info(ctx, "commandstats").Val()) {
			switch cmd {
			case "hset", "zadd", "incrby", "pexpire":
				writes += n
			}
		}
		assert.Positive(t, writes, "%s: a charge past the limit writes", alg)

		// A check of the limit in debt is denied, and writes nothing.
		require.NoError(t, client.ConfigResetStat(ctx).Err())
		check := op
		check.Hits = 0
		for range denials {
			res, err := lim.Do(ctx, []rate.Op{check})
			require.NoError(t, err)
			require.False(t, res[0].Allowed, "%s: the limit is in debt", alg)
		}
		for cmd, n := range commandCalls(t, client.Info(ctx, "commandstats").Val()) {
			switch cmd {
			case "evalsha", "config|resetstat", "info", "time", "hmget", "zremrangebyscore", "zrangebyscore", "zcard", "zrange", "get", "exists":
			default:
				t.Errorf("%s: a check of a limit in debt ran %s %d times", alg, cmd, n)
			}
		}
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "redis.md"))
	require.NoError(t, err)
	m := regexp.MustCompile(`keeps (\d+) to (\d+) bytes per active limit`).FindSubmatch(doc)
	require.NotNil(t, m, "docs/redis.md quotes no bytes per active limit")
	assert.Equal(t, fmt.Sprintf("%d to %d", slices.Min(small), slices.Max(small)), string(m[1])+" to "+string(m[2]),
		"docs/redis.md's bytes per active limit of the algorithms but the log")
	t.Logf("per limit of 100 a minute, full (Redis %s):\n| algorithm | keys | bytes (MEMORY USAGE) | commands per decision inside the script | per denial, all reads |\n%s",
		client.InfoMap(ctx, "server").Item("Server", "redis_version"), strings.Join(rows, "\n"))
}

// counterFootprint is TestFootprint's row of an algorithm counted without a
// script: a decision is a SET NX PX and an INCRBY, a denial also gives its
// hit back with a second INCRBY, a check is one GET; the window's count is
// one small key. It returns the row and the bytes of the full count.
func counterFootprint(t *testing.T, client *redis.Client, lim *Limiter, key rate.Key, alg algorithms.Algorithm) (row string, bytes int64) {
	ctx := context.Background()
	limit := algorithms.Limit{Algorithm: alg, Requests: 100, Window: time.Hour}
	op := rate.Op{Key: key, Limit: limit, Hits: 1}
	require.NoError(t, client.ConfigResetStat(ctx).Err())
	const decisions = 100
	for range decisions {
		res, err := lim.Do(ctx, []rate.Op{op})
		require.NoError(t, err)
		require.True(t, res[0].Allowed)
	}
	calls := commandCalls(t, client.Info(ctx, "commandstats").Val())
	assert.Equal(t, decisions, calls["set"], "%s: one SET NX PX per decision: %v", alg, calls)
	assert.Equal(t, decisions, calls["incrby"], "%s: one INCRBY per decision: %v", alg, calls)
	assert.Zero(t, calls["evalsha"]+calls["eval"], "%s: no script", alg)

	require.NoError(t, client.ConfigResetStat(ctx).Err())
	const denials = 10
	for range denials {
		res, err := lim.Do(ctx, []rate.Op{op})
		require.NoError(t, err)
		require.False(t, res[0].Allowed, "%s: the limit is full", alg)
	}
	calls = commandCalls(t, client.Info(ctx, "commandstats").Val())
	assert.Equal(t, 2*denials, calls["incrby"], "%s: a denial adds its hit and gives it back: %v", alg, calls)

	require.NoError(t, client.ConfigResetStat(ctx).Err())
	check := op
	check.Hits = 0
	for range denials {
		_, err := lim.Do(ctx, []rate.Op{check})
		require.NoError(t, err)
	}
	calls = commandCalls(t, client.Info(ctx, "commandstats").Val())
	assert.Equal(t, map[string]int{"get": denials, "config|resetstat": 1}, withoutInfo(calls), "%s: a check reads one key", alg)

	keys := limitKeys(t, client, lim.enc.keys, key, limit)
	require.Len(t, keys, 1, "one count key for the window")
	full, err := client.MemoryUsage(ctx, keys[0]).Result()
	require.NoError(t, err)
	assert.Less(t, full, int64(128), "%s keeps a small count", alg)
	return fmt.Sprintf("| %s | %d | %d | %.1f | %.1f |", alg, len(keys), full, 2.0, 3.0), full
}

// withoutInfo returns calls without the INFO commands that read them.
func withoutInfo(calls map[string]int) map[string]int {
	delete(calls, "info")
	return calls
}

// commandCalls parses INFO commandstats into calls per command.
func commandCalls(t *testing.T, info string) map[string]int {
	t.Helper()
	calls := map[string]int{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		for _, field := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(field, "calls="); ok {
				n, err := strconv.Atoi(v)
				require.NoError(t, err)
				calls[strings.TrimPrefix(name, "cmdstat_")] = n
			}
		}
	}
	return calls
}

// TestLogFootprintAsDocumented measures what a sliding_window_log keeps in
// Redis for as many hits, and with the zset-max-listpack-entries, as each
// row of the table in docs/redis.md says, and holds the table to it: the
// encoding Redis chose, and the bytes of the limit's two keys (MEMORY
// USAGE, every entry counted) within 5%. Up to zset-max-listpack-entries
// entries (128 by default) a sorted set is one listpack; past it, a skip
// list and a hash table, about four times larger per entry.
func TestLogFootprintAsDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "redis.md"))
	require.NoError(t, err)
	const header = "| hits in the log | `zset-max-listpack-entries` | encoding | bytes (`MEMORY USAGE`) | per hit |"
	_, table, found := strings.Cut(string(doc), header+"\n")
	require.True(t, found, "docs/redis.md has no table %q", header)
	type row struct {
		hits, maxEntries, bytes, perHit int64
		encoding                        string
	}
	var rows []row
	for _, line := range strings.Split(table, "\n")[1:] {
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(strings.Trim(line, "| "), "|")
		require.Len(t, cells, 5, line)
		num := func(i int) int64 {
			s := strings.TrimSpace(cells[i])
			s, _, _ = strings.Cut(s, " (")
			n, err := strconv.ParseInt(strings.ReplaceAll(s, " ", ""), 10, 64)
			require.NoError(t, err, "%q in %q", cells[i], line)
			return n
		}
		rows = append(rows, row{hits: num(0), maxEntries: num(1), encoding: strings.TrimSpace(cells[2]), bytes: num(3), perHit: num(4)})
	}
	require.NotEmpty(t, rows)

	srv := redistest.Standalone(t)
	client := srv.Client(t)
	ctx := context.Background()
	lim, err := NewLimiter(client, testPipelines)
	require.NoError(t, err)
	for i, r := range rows {
		require.NoError(t, client.ConfigSet(ctx, "zset-max-listpack-entries", strconv.FormatInt(r.maxEntries, 10)).Err())
		// One api_key value, as in TestFootprint, each row its own.
		key := rate.Key{Domain: "edge", Entries: []rate.Entry{{Key: "api_key", Value: fmt.Sprintf("k-5f2a9c1e7b3d4a6%d", i)}}}
		limit := algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: uint64(r.hits), Window: time.Hour}
		// Requests of one hit each, every one an entry of its own: a take
		// of more hits, or a lease, is one entry whatever its size.
		for left := uint64(r.hits); left > 0; {
			ops := make([]rate.Op, min(left, 100))
			for j := range ops {
				ops[j] = rate.Op{Key: key, Limit: limit, Hits: 1}
			}
			res, err := lim.Do(ctx, ops)
			require.NoError(t, err)
			for _, r := range res {
				require.True(t, r.Allowed)
			}
			left -= uint64(len(ops))
		}
		keys := keysOf(lim.enc.keys, key, limit, Unsharded)
		var bytes int64
		for _, k := range keys {
			n, err := client.MemoryUsage(ctx, k, 0).Result()
			require.NoError(t, err)
			bytes += n
		}
		encoding, err := client.ObjectEncoding(ctx, keys[0]).Result()
		require.NoError(t, err)
		t.Logf("| %d | %d | %s | %d | %.0f |", r.hits, r.maxEntries, encoding, bytes, float64(bytes)/float64(r.hits))
		assert.Equal(t, r.encoding, encoding, "%d hits, zset-max-listpack-entries %d", r.hits, r.maxEntries)
		assert.InEpsilon(t, r.bytes, bytes, 0.05, "%d hits, zset-max-listpack-entries %d: docs/redis.md says %d bytes", r.hits, r.maxEntries, r.bytes)
		assert.InDelta(t, float64(r.bytes)/float64(r.hits), float64(r.perHit), 0.5, "docs/redis.md's bytes per hit of %d hits", r.hits)
	}
}
