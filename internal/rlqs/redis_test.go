package rlqs

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/rate"
	"github.com/ratewarden/ratewarden/internal/redisx"
	"github.com/ratewarden/ratewarden/internal/testkit/algotest"
	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
	"github.com/ratewarden/ratewarden/internal/testkit/rlstest"
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
				f := newReplicas(t, 3, 2, func(clk *algotest.Clock) rate.Limiter {
					lim, err := redisx.NewLimiter(dep.client(t), 2, redisx.WithKeyPrefix(prefix), redisx.WithClock(clk.Now))
					require.NoError(t, err)
					t.Cleanup(lim.Close)
					return lim
				})
				playRates(t, f, key)
			})
		}
	}
}

// commandCounter is a go-redis hook that counts the commands a client
// sends, alone or in pipelines, by name.
type commandCounter struct {
	mu    sync.Mutex
	names map[string]int
}

func (c *commandCounter) add(cmds ...redis.Cmder) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cmd := range cmds {
		c.names[cmd.Name()]++
	}
}

func (c *commandCounter) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.names {
		n += v
	}
	return n
}

func (c *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.add(cmd)
		return next(ctx, cmd)
	}
}

func (c *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.add(cmds...)
		return next(ctx, cmds)
	}
}

// TestAHotBucketCostsARedisCommandPerThousandRequests: three Envoys on two
// servers over a Redis Cluster ask for 3 000 requests a second of one
// bucket between them, under a limit that binds (2 500 a second; the most a
// sliding log keeps, 100 000 a minute; a bucket's burst of 20 s of its
// rate), for every algorithm. Every command the servers send Redis is
// counted, the scripts' loading included: at most one per 1 000 requests
// admitted, since a grant is reserved and settled once per report, not
// once per request.
func TestAHotBucketCostsARedisCommandPerThousandRequests(t *testing.T) {
	cluster := redistest.SharedCluster(t)
	for _, c := range []struct {
		alg   string
		limit uint64
		burst string
	}{
		{"fixed_window", 150_000, ""},
		{"sliding_window_log", 100_000, ""},
		{"sliding_window_counter", 150_000, ""},
		{"token_bucket", 150_000, ", burst: 50000"},
	} {
		t.Run(c.alg, func(t *testing.T) {
			counter := &commandCounter{names: map[string]int{}}
			prefix := "rlqs-hot-" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
			f := newReplicas(t, 3, 2, func(clk *algotest.Clock) rate.Limiter {
				client := cluster.Client(t)
				client.AddHook(counter)
				lim, err := redisx.NewLimiter(client, 2, redisx.WithKeyPrefix(prefix), redisx.WithClock(clk.Now))
				require.NoError(t, err)
				t.Cleanup(lim.Close)
				return lim
			})
			f.cfg.Store(rlstest.Limits(t, fmt.Sprintf(`
domain: edge
descriptors:
  - key: hot
    rate_limit: {unit: minute, requests_per_unit: %d, algorithm: %s%s}
`, c.limit, c.alg, c.burst)))
			admitted := f.run(map[string]string{"hot": "acme"}, 3*600, func(int, int) int { return 100 }, nil)
			var total uint64
			for _, n := range admitted {
				total += n
			}
			var reports int
			for _, e := range f.envoys {
				reports += e.Counters().ReportsSent
			}
			per := 1000 * float64(counter.total()) / float64(total)
			t.Logf("admitted per minute %v; %d reports, %d Redis commands %v: %.2f per report, %.2f per 1 000 admitted",
				perMinute(admitted), reports, counter.total(), counter.names, float64(counter.total())/float64(reports), per)
			assert.LessOrEqual(t, per, 1.0)
			for m, n := range perMinute(admitted) {
				if c.alg != "token_bucket" { // which starts with its burst
					assert.LessOrEqual(t, n, c.limit, "minute %d", m)
				}
			}
		})
	}
}
