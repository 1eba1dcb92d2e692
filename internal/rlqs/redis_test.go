package rlqs

import (
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/rate"
	"github.com/ratewarden/ratewarden/internal/redisx"
	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
)

// TestGrantsOverRedisReplicas plays the rates of
// TestGrantsNeverAddUpPastTheLimit with three Envoys over two replicas of
// the server, each with its own Limiter on one Redis, standalone and a
// cluster: the grants are the scripts' lease takes, and their settlements
// the scripts' (fixed_window_settle.lua for the fixed window).
func TestGrantsOverRedisReplicas(t *testing.T) {
	for _, dep := range []struct {
		name   string
		client func(t *testing.T) redis.UniversalClient
	}{
		{"standalone", func(t *testing.T) redis.UniversalClient { return redistest.SharedStandalone(t).Client(t) }},
		{"cluster", func(t *testing.T) redis.UniversalClient { return redistest.SharedCluster(t).Client(t) }},
	} {
		for _, key := range []string{"fixed", "log"} {
			t.Run(dep.name+"/"+key, func(t *testing.T) {
				prefix := "rlqs-" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
				f := newReplicas(t, 3, 2, func(clk *clock) rate.Limiter {
					lim, err := redisx.NewLimiter(dep.client(t), 2, redisx.WithKeyPrefix(prefix), redisx.WithClock(clk.now))
					require.NoError(t, err)
					t.Cleanup(lim.Close)
					return lim
				})
				playRates(t, f, key)
			})
		}
	}
}
