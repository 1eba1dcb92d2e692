package test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/redistest"
)

// TestDenyCacheSparesRedis exhausts a limit through the real server on a
// Redis of its own, then sends 200 more requests: all are denied, and only
// the first of them reaches Redis.
func TestDenyCacheSparesRedis(t *testing.T) {
	redis := redistest.Standalone(t)
	client := redis.Client(t)
	srv := startServer(t, map[string]string{
		"RLS_BACKEND": "redis", "RLS_REDIS_ADDRS": redis.Addr(), "RLS_BACKEND_TIMEOUT": "5s",
		"RLS_CONFIG_PATH": writeConfig(t, exactLimits),
	})
	req := &rlsv3.RateLimitRequest{Domain: "exact", Descriptors: []*ratelimitv3.RateLimitDescriptor{
		{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "fixed_window", Value: "hot"}}},
	}}
	ctx := context.Background()
	evalsha := func() int {
		info := client.Info(ctx, "commandstats").Val()
		for _, line := range strings.Split(info, "\n") {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:calls="); ok {
				n, err := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
				require.NoError(t, err)
				return n
			}
		}
		return 0
	}
	for i := range 100 {
		resp, err := srv.Client.ShouldRateLimit(ctx, req)
		require.NoError(t, err)
		require.Equal(t, rlsv3.RateLimitResponse_OK, resp.GetOverallCode(), "call %d", i)
	}
	before := evalsha()
	for range 200 {
		resp, err := srv.Client.ShouldRateLimit(ctx, req)
		require.NoError(t, err)
		require.Equal(t, rlsv3.RateLimitResponse_OVER_LIMIT, resp.GetOverallCode())
		assert.Positive(t, resp.GetStatuses()[0].GetDurationUntilReset().AsDuration())
	}
	assert.Equal(t, 1, evalsha()-before, "200 denials cost Redis one script run")
}
