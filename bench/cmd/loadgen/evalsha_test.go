package main

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/rate"
	"github.com/ratewarden/ratewarden/internal/redisx"
	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
)

// TestEvalshaCallsAreTheLimiters: an evalsha run calls an algorithm's
// script as the Redis limiter does, on the state the server keeps for the
// same descriptor of `loadgen limits`: after one call, the limiter finds the
// hit taken. On a cluster, the log's two keys share a slot.
func TestEvalshaCallsAreTheLimiters(t *testing.T) {
	ctx := context.Background()
	for _, b := range []struct {
		name   string
		client func(t *testing.T) redis.UniversalClient
	}{
		{"standalone", func(t *testing.T) redis.UniversalClient { return redistest.Standalone(t).Client(t) }},
		{"cluster", func(t *testing.T) redis.UniversalClient { return redistest.NewCluster(t).Client(t) }},
	} {
		t.Run(b.name, func(t *testing.T) {
			client := b.client(t)
			prefix, err := serverKeyPrefix()
			require.NoError(t, err)
			lim, err := redisx.NewLimiter(client, 2, redisx.WithKeyPrefix(prefix))
			require.NoError(t, err)
			t.Cleanup(lim.Close)
			for _, alg := range algorithms.Algorithms {
				const runID, keys = "evalsha-test", 3
				commands, err := evalshaCommands(ctx, client, alg.String(), runID, keys)
				require.NoError(t, err)
				require.Len(t, commands, keys)
				var reply any
				for _, cmd := range commands[1] {
					reply, err = client.Do(ctx, cmd...).Result()
					require.NoError(t, err, "%s", alg)
				}
				require.True(t, admitted(reply), "%s: %v", alg, reply)

				value := newKeySpace(liveValuePrefix, runID, keys, false).live[1]
				check := rate.Op{
					Key:   rate.Key{Domain: defaultDomain, Entries: []rate.Entry{{Key: alg.String(), Value: value}}},
					Limit: algorithms.Limit{Algorithm: alg, Requests: liveLimit(alg), Window: 24 * time.Hour},
				}
				res, err := lim.Do(ctx, []rate.Op{check})
				require.NoError(t, err)
				require.Equal(t, liveLimit(alg)-1, res[0].Remaining, "%s: the limiter sees the hit of the evalsha call", alg)
			}
		})
	}
}
