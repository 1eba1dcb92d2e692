package redisx

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/rate"
	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
)

// evalCalls returns how many EVAL and EVALSHA calls the masters have served.
func evalCalls(t *testing.T, masters []*redis.Client) (eval, evalsha int) {
	t.Helper()
	for _, m := range masters {
		info, err := m.Info(context.Background(), "commandstats").Result()
		require.NoError(t, err)
		for _, line := range strings.Split(info, "\n") {
			name, stats, ok := strings.Cut(strings.TrimSpace(line), ":")
			if !ok || (name != "cmdstat_eval" && name != "cmdstat_evalsha") {
				continue
			}
			calls, _, _ := strings.Cut(strings.TrimPrefix(stats, "calls="), ",")
			n, err := strconv.Atoi(calls)
			require.NoError(t, err, "stats %q", stats)
			if name == "cmdstat_eval" {
				eval += n
			} else {
				evalsha += n
			}
		}
	}
	return eval, evalsha
}

func flushScripts(t *testing.T, masters []*redis.Client) {
	t.Helper()
	for _, m := range masters {
		require.NoError(t, m.ScriptFlush(context.Background()).Err())
	}
}

// TestScriptsSurviveScriptFlush flushes the script cache of every master
// between calls, as a restart or a failover to a fresh replica would: the
// Limiter loads the scripts again and every decision carries on where it
// stood, for one op and for a pipeline of many spread over the nodes.
func TestScriptsSurviveScriptFlush(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			masters := b.masters(t)
			clock := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
			lim, err := NewLimiter(b.client(t), testPipelines, WithKeyPrefix(testPrefix(t)), WithClock(func() time.Time { return clock }))
			require.NoError(t, err)
			ctx := context.Background()

			var ops []rate.Op
			for _, alg := range algorithms.Algorithms {
				if alg.Spec().Counter {
					continue // no script
				}
				for i := range 8 {
					ops = append(ops, rate.Op{
						Key:   rate.Key{Domain: "noscript", Entries: []rate.Entry{{Key: "i", Value: strconv.Itoa(i)}}},
						Limit: algorithms.Limit{Algorithm: alg, Requests: 10, Window: time.Hour},
						Hits:  1,
					})
				}
			}
			remaining := make([]uint64, len(ops))
			for i := range remaining {
				remaining[i] = 10
			}
			check := func(what string, ops []rate.Op) {
				t.Helper()
				res, err := lim.Do(ctx, ops)
				require.NoError(t, err, what)
				for i, r := range res {
					remaining[i]--
					require.True(t, r.Allowed, "%s: op %d", what, i)
					require.Equal(t, remaining[i], r.Remaining, "%s: op %d", what, i)
				}
			}

			check("first use", ops)
			flushScripts(t, masters)
			check("one op after SCRIPT FLUSH", ops[:1])
			flushScripts(t, masters)
			check("a pipeline after SCRIPT FLUSH", ops)

			// Once loaded again, the scripts run by digest alone.
			eval, evalsha := evalCalls(t, masters)
			check("a pipeline after recovering", ops)
			eval2, evalsha2 := evalCalls(t, masters)
			require.Equal(t, eval, eval2, "no EVAL once the scripts are cached")
			require.Equal(t, evalsha+len(ops), evalsha2)

			// A flush costs one EVAL per op that met NOSCRIPT, and nothing else.
			flushScripts(t, masters)
			check("a pipeline after another SCRIPT FLUSH", ops)
			eval3, evalsha3 := evalCalls(t, masters)
			require.Equal(t, eval2+len(ops), eval3)
			require.Equal(t, evalsha2+len(ops), evalsha3)
		})
	}
}

// TestPrepareLoadsEveryScriptEverywhere flushes every node's script cache,
// runs Prepare, and then sees the first decisions run by digest alone: no
// EVAL, on any master.
func TestPrepareLoadsEveryScriptEverywhere(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			masters := b.masters(t)
			lim, err := NewLimiter(b.client(t), testPipelines, WithKeyPrefix(testPrefix(t)))
			require.NoError(t, err)
			ctx := context.Background()
			flushScripts(t, masters)
			require.NoError(t, lim.Prepare(ctx))
			for _, m := range masters {
				for _, a := range algorithms.Algorithms {
					s := lim.enc.script(a)
					if s == nil {
						continue // counted without a script
					}
					exists, err := m.ScriptExists(ctx, s.sha).Result()
					require.NoError(t, err)
					require.Equal(t, []bool{true}, exists, "%s on %s", s.name, m.Options().Addr)
				}
			}
			eval, _ := evalCalls(t, masters)
			var ops []rate.Op
			for i, alg := range algorithms.Algorithms {
				ops = append(ops, rate.Op{
					Key:   rate.Key{Domain: "prepare", Entries: []rate.Entry{{Key: "i", Value: strconv.Itoa(i)}}},
					Limit: algorithms.Limit{Algorithm: alg, Requests: 10, Window: time.Hour},
					Hits:  1,
				})
			}
			_, err = lim.Do(ctx, ops)
			require.NoError(t, err)
			eval2, _ := evalCalls(t, masters)
			require.Equal(t, eval, eval2, "prepared scripts run without EVAL")
		})
	}
}

// TestRedisThatCannotServeIsUnavailable runs a script against a replica,
// which refuses writes: the error says the backend is unavailable, so the
// service counts it as such and not as a broken request.
func TestRedisThatCannotServeIsUnavailable(t *testing.T) {
	master, replica := redistest.Standalone(t), redistest.Standalone(t)
	ctx := context.Background()
	client := replica.Client(t)
	require.NoError(t, client.ReplicaOf(ctx, "127.0.0.1", strconv.Itoa(master.Port())).Err())
	lim, err := NewLimiter(client, testPipelines)
	require.NoError(t, err)
	_, err = lim.Do(ctx, []rate.Op{{
		Key:   rate.Key{Domain: "d", Entries: []rate.Entry{{Key: "k", Value: "v"}}},
		Limit: algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 1, Window: time.Second},
		Hits:  1,
	}})
	require.Error(t, err)
	require.ErrorIs(t, err, rate.ErrUnavailable)
	require.Contains(t, err.Error(), "READONLY")
}
