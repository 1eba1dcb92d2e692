package test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/rate"
	"github.com/ratewarden/ratewarden/internal/settings"
	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
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
	// The fixed window is counted with INCRBY (and a SET NX PX that makes
	// its key): a denial adds its hit and gives it back.
	incrby := func() int {
		info := client.Info(ctx, "commandstats").Val()
		for _, line := range strings.Split(info, "\n") {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_incrby:calls="); ok {
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
	before := incrby()
	for range 200 {
		resp, err := srv.Client.ShouldRateLimit(ctx, req)
		require.NoError(t, err)
		require.Equal(t, rlsv3.RateLimitResponse_OVER_LIMIT, resp.GetOverallCode())
		assert.Positive(t, resp.GetStatuses()[0].GetDurationUntilReset().AsDuration())
	}
	assert.Equal(t, 2, incrby()-before, "200 denials cost Redis one decision: its INCRBY and the INCRBY that gives its hit back")
}

// raceLimits lets is_negative_hits give hits back to a limit of one an hour.
const raceLimits = `
domain: race
descriptors:
  - key: k
    allow_negative_hits: true
    rate_limit: {unit: hour, requests_per_unit: 1, algorithm: fixed_window}
`

// TestDenyCacheRacesGiveBacksOnRedis races, 300 times, a take against a
// give-back of the same limit through the real server and Redis, whose
// pipelines may run and answer the two in any order. After each race a take
// is denied only when Redis holds the hit that denies it: the deny cache
// never keeps a denial that the give-back made stale.
func TestDenyCacheRacesGiveBacksOnRedis(t *testing.T) {
	redis := redistest.Standalone(t)
	client := redis.Client(t)
	env := map[string]string{
		"RLS_BACKEND": "redis", "RLS_REDIS_ADDRS": redis.Addr(), "RLS_BACKEND_TIMEOUT": "5s",
		"RLS_CONFIG_PATH": writeConfig(t, raceLimits),
	}
	srv := startServer(t, env)
	set, err := settings.Load(func(name string) (string, bool) { v, ok := env[name]; return v, ok })
	require.NoError(t, err)
	ctx := context.Background()
	request := func(value string, giveBack bool) *rlsv3.RateLimitRequest {
		d := &ratelimitv3.RateLimitDescriptor{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "k", Value: value}}, IsNegativeHits: giveBack}
		return &rlsv3.RateLimitRequest{Domain: "race", Descriptors: []*ratelimitv3.RateLimitDescriptor{d}}
	}
	call := func(req *rlsv3.RateLimitRequest) rlsv3.RateLimitResponse_Code {
		resp, err := srv.Client.ShouldRateLimit(ctx, req)
		require.NoError(t, err)
		return resp.GetOverallCode()
	}
	limit := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 1, Window: time.Hour}

	wrong, denied, races := 0, 0, 300
	for round := range races {
		value := strconv.Itoa(round)
		require.Equal(t, rlsv3.RateLimitResponse_OK, call(request(value, false)))
		var wg sync.WaitGroup
		wg.Go(func() { call(request(value, false)) })
		wg.Go(func() { call(request(value, true)) })
		wg.Wait()
		if call(request(value, false)) == rlsv3.RateLimitResponse_OVER_LIMIT {
			denied++
			// The count of the window, in the key of the hour.
			key := set.KeyPrefix + "{" + rate.Identity(rate.Key{Domain: "race", Entries: []rate.Entry{{Key: "k", Value: value}}}, limit) + "}:w" +
				strconv.FormatInt(limit.WindowIndex(time.Now()), 10)
			if count, _ := client.Get(ctx, key).Int(); count < 1 {
				wrong++
			}
		}
	}
	t.Logf("%d of %d races ended with a denial", denied, races)
	assert.Positive(t, denied, "some races end with the limit full")
	assert.Zero(t, wrong, "denials while Redis held no hit, in %d races", races)
}
