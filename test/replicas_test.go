package test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/ratewarden/ratewarden/internal/metrics"
	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
)

// exactLimits gives every algorithm a limit of 100 per day, so nothing
// refills while a test runs, plus sharded variants.
const exactLimits = `
domain: exact
descriptors:
  - key: fixed_window
    rate_limit: {unit: day, requests_per_unit: 100, algorithm: fixed_window}
  - key: sliding_window_log
    rate_limit: {unit: day, requests_per_unit: 100, algorithm: sliding_window_log}
  - key: sliding_window_counter
    rate_limit: {unit: day, requests_per_unit: 100, algorithm: sliding_window_counter}
  - key: token_bucket
    rate_limit: {unit: day, requests_per_unit: 100, algorithm: token_bucket}
  - key: sharded_log
    rate_limit: {unit: day, requests_per_unit: 100, algorithm: sliding_window_log, shards: 4}
  - key: sharded_bucket
    rate_limit: {unit: day, requests_per_unit: 100, algorithm: token_bucket, shards: 4}
  - key: hot
    rate_limit: {unit: day, requests_per_unit: 1000, algorithm: sliding_window_log, shards: 4}
  - key: leased_fixed_window
    rate_limit: {unit: hour, requests_per_unit: 1000, algorithm: fixed_window}
  - key: leased_sliding_window_log
    rate_limit: {unit: hour, requests_per_unit: 1000, algorithm: sliding_window_log}
  - key: leased_sliding_window_counter
    rate_limit: {unit: hour, requests_per_unit: 1000, algorithm: sliding_window_counter}
  - key: leased_token_bucket
    rate_limit: {unit: hour, requests_per_unit: 1000, algorithm: token_bucket}
`

// replicas starts two server processes sharing one Redis.
func replicas(t *testing.T, redisEnv map[string]string) []*serverProcess {
	dir := writeConfig(t, exactLimits)
	env := map[string]string{
		"RLS_BACKEND":         "redis",
		"RLS_CONFIG_PATH":     dir,
		"RLS_BACKEND_TIMEOUT": "5s", // exactness, not latency, is under test
	}
	for k, v := range redisEnv {
		env[k] = v
	}
	return []*serverProcess{startServer(t, env), startServer(t, env)}
}

// hammer sends total requests for one descriptor from callers goroutines,
// spread over the servers, and returns how many were admitted. Any error
// fails the test.
func hammer(t *testing.T, servers []*serverProcess, key, value string, callers, total int) int {
	t.Helper()
	var admitted, sent, failed atomic.Int64
	var firstErr atomic.Value
	req := &rlsv3.RateLimitRequest{
		Domain:      "exact",
		Descriptors: []*ratelimitv3.RateLimitDescriptor{{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: key, Value: value}}}},
	}
	var wg sync.WaitGroup
	for c := range callers {
		srv := servers[c%len(servers)]
		wg.Go(func() {
			for sent.Add(1) <= int64(total) {
				resp, err := srv.Client.ShouldRateLimit(context.Background(), req)
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
					continue
				}
				if resp.GetOverallCode() == rlsv3.RateLimitResponse_OK {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	require.Zero(t, failed.Load(), "calls failed, the first with %v", firstErr.Load())
	return int(admitted.Load())
}

// drain returns how many takes of the descriptor the servers admit after
// a race that left room of the limit unadmitted: until a round admits
// nothing, it waits for the leases held when the race ended to be given
// back, and the denials remembered meanwhile to be forgotten (at most a
// second), then takes through each server in turn until it is denied. When
// room is 0, one take through each server must be denied at once.
func drain(t *testing.T, servers []*serverProcess, key, value string, room int) int {
	t.Helper()
	req := &rlsv3.RateLimitRequest{
		Domain:      "exact",
		Descriptors: []*ratelimitv3.RateLimitDescriptor{{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: key, Value: value}}}},
	}
	admits := func(srv *serverProcess) bool {
		resp, err := srv.Client.ShouldRateLimit(context.Background(), req)
		require.NoError(t, err)
		return resp.GetOverallCode() == rlsv3.RateLimitResponse_OK
	}
	if room == 0 {
		for _, srv := range servers {
			require.False(t, admits(srv), "a take after the limit was reached")
		}
		return 0
	}
	admitted := 0
	for range 5 {
		time.Sleep(1200 * time.Millisecond)
		n := 0
		for _, srv := range servers {
			for admitted+n <= room && admits(srv) {
				n++
			}
		}
		if n == 0 {
			break
		}
		admitted += n
	}
	return admitted
}

func TestReplicasAdmitExactlyTheLimit(t *testing.T) {
	for _, backend := range []struct {
		name string
		env  func(t *testing.T) map[string]string
	}{
		{"standalone", func(t *testing.T) map[string]string {
			return map[string]string{"RLS_REDIS_ADDRS": redistest.SharedStandalone(t).Addr()}
		}},
		{"cluster", func(t *testing.T) map[string]string {
			return map[string]string{"RLS_REDIS_MODE": "cluster", "RLS_REDIS_ADDRS": strings.Join(redistest.SharedCluster(t).Addrs(), ",")}
		}},
	} {
		t.Run(backend.name, func(t *testing.T) {
			servers := replicas(t, backend.env(t))
			run := fmt.Sprintf("run-%d", rand.Uint64())
			for _, alg := range []string{"fixed_window", "sliding_window_log", "token_bucket", "sliding_window_counter"} {
				t.Run(alg, func(t *testing.T) {
					race := hammer(t, servers, alg, run, 120, 300)
					// Within one window every algorithm, the counter too, admits
					// exactly L, once the leases held when the race ended are
					// back; the day-long window makes crossing a boundary during
					// the test vanishingly unlikely.
					require.LessOrEqual(t, race, 100, "admitted by 2 replicas from 120 callers, limit 100")
					later := drain(t, servers, alg, run, 100-race)
					assert.Equal(t, 100, race+later, "admitted in the race (%d) and after it", race)
				})
			}
			for _, alg := range []string{"sharded_log", "sharded_bucket"} {
				t.Run(alg, func(t *testing.T) {
					got := hammer(t, servers, alg, run, 120, 300)
					assert.LessOrEqual(t, got, 100, "a sharded limit never admits more than its limit")
					assert.GreaterOrEqual(t, got, 90, "a request its shard denies tries another")
					t.Logf("%s: admitted %d of 300 (limit 100, 4 shards)", alg, got)
				})
			}
		})
	}
}

// TestLeasedReplicasAdmitExactlyTheLimit races 128 callers over two
// replicas on a 6-node cluster, with leases on (the default), for 3 000
// calls on a limit of 1 000 an hour of each algorithm: no more than 1 000
// are admitted; once the leases held when the race ended are given back,
// exactly 1 000 have been; and the replicas' own counts show that leases
// served them.
func TestLeasedReplicasAdmitExactlyTheLimit(t *testing.T) {
	cluster := redistest.SharedCluster(t)
	servers := replicas(t, map[string]string{"RLS_REDIS_MODE": "cluster", "RLS_REDIS_ADDRS": strings.Join(cluster.Addrs(), ",")})
	run := fmt.Sprintf("lease-%d", rand.Uint64())
	for _, alg := range []string{"fixed_window", "sliding_window_log", "sliding_window_counter", "token_bucket"} {
		t.Run(alg, func(t *testing.T) {
			if into := time.Since(time.Now().Truncate(time.Hour)); into > time.Hour-20*time.Second {
				// A window that ends during the run admits its limit again.
				t.Logf("waiting %s for the hour to end", time.Hour-into)
				time.Sleep(time.Hour - into)
			}
			key := "leased_" + alg
			race := hammer(t, servers, key, run, 128, 3000)
			require.LessOrEqual(t, race, 1000, "admitted by 2 replicas from 128 callers, limit 1 000")
			later := drain(t, servers, key, run, 1000-race)
			assert.Equal(t, 1000, race+later, "admitted in the race (%d) and after it", race)
			t.Logf("%s: %d admitted in the race, %d after", alg, race, later)
			var leases, served float64
			for _, srv := range servers {
				for series, v := range scrapeMetrics(t, srv) {
					if !strings.Contains(series, `descriptor="exact.`+key+`"`) {
						continue
					}
					switch {
					case strings.HasPrefix(series, metrics.LeaseTaken+"{"):
						leases += v
					case strings.HasPrefix(series, metrics.LeaseHits+"{") && strings.Contains(series, `result="served"`):
						served += v
					}
				}
			}
			t.Logf("%s: %.0f leases, %.0f hits served from them", alg, leases, served)
			assert.Positive(t, leases, "leases were taken")
			assert.Positive(t, served, "hits were served from leases")
		})
	}
}

// TestShardedHotTenant offers twice the limit to a limit split over four
// shards of a 3-master cluster, reports how many requests were denied while
// the whole limit still had room (false denials), and shows the shards on
// different masters.
func TestShardedHotTenant(t *testing.T) {
	cluster := redistest.SharedCluster(t)
	servers := replicas(t, map[string]string{"RLS_REDIS_MODE": "cluster", "RLS_REDIS_ADDRS": strings.Join(cluster.Addrs(), ",")})
	run := fmt.Sprintf("tenant-%d", rand.Uint64())

	const limit = 1000
	admitted := hammer(t, servers, "hot", run, 64, 2*limit)
	assert.LessOrEqual(t, admitted, limit)
	falseDenials := limit - admitted
	t.Logf("offered %d requests (2x the limit %d) over 4 shards: admitted %d, false denials %d (%.2f%% of the limit)",
		2*limit, limit, admitted, falseDenials, 100*float64(falseDenials)/limit)
	assert.LessOrEqual(t, falseDenials, limit/20, "false denials stay under 5%% of the limit")

	// Find the shards' keys and the masters holding them.
	client := cluster.Client(t)
	var mu sync.Mutex // ForEachMaster calls in parallel
	byMaster := map[string][]string{}
	err := client.ForEachMaster(context.Background(), func(ctx context.Context, node *redis.Client) error {
		keys, err := node.Keys(ctx, "*"+run+"*").Result()
		if err != nil {
			return err
		}
		sort.Strings(keys)
		mu.Lock()
		defer mu.Unlock()
		byMaster[node.Options().Addr] = append(byMaster[node.Options().Addr], keys...)
		return nil
	})
	require.NoError(t, err)
	shards := map[string]string{}
	for master, keys := range byMaster {
		for _, k := range keys {
			t.Logf("master %s holds %s", master, k)
			shards[shardOf(k)] = master
		}
	}
	assert.Len(t, shards, 4, "four shards hold state")
	masters := map[string]bool{}
	for _, m := range shards {
		masters[m] = true
	}
	assert.GreaterOrEqual(t, len(masters), 2, "the shards spread over more than one master")
}

// shardOf returns the hash tag of a key: the part that decides its slot.
func shardOf(key string) string {
	i := strings.IndexByte(key, '{')
	j := strings.IndexByte(key[i+1:], '}')
	return key[i+1 : i+1+j]
}

// sameLimits is small, day-long limits of every algorithm, so that a sequence
// of requests has one right answer whatever the timing.
const sameLimits = `
domain: same
descriptors:
  - key: fixed_window
    rate_limit: {unit: day, requests_per_unit: 3, algorithm: fixed_window}
  - key: sliding_window_log
    rate_limit: {unit: day, requests_per_unit: 4, algorithm: sliding_window_log}
  - key: sliding_window_counter
    rate_limit: {unit: day, requests_per_unit: 5, algorithm: sliding_window_counter}
  - key: token_bucket
    rate_limit: {unit: day, requests_per_unit: 6, algorithm: token_bucket, burst: 4}
`

// TestBackendsGiveTheSameAnswers sends the same requests to the real binary
// on memory, Redis, Redis Cluster and Redis behind Sentinel, and compares
// every status.
func TestBackendsGiveTheSameAnswers(t *testing.T) {
	cluster := redistest.SharedCluster(t)
	standalone := redistest.SharedStandalone(t)
	sentinel := redistest.Sentinel(t)
	dir := writeConfig(t, sameLimits)
	run := fmt.Sprintf("run-%d", rand.Uint64())
	redis := map[string]string{"RLS_CONFIG_PATH": dir, "RLS_BACKEND": "redis", "RLS_BACKEND_TIMEOUT": "5s"}
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range redis {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	backends := []struct {
		name string
		srv  *serverProcess
	}{
		{"memory", startServer(t, map[string]string{"RLS_CONFIG_PATH": dir})},
		{"standalone", startServer(t, with(map[string]string{"RLS_REDIS_ADDRS": standalone.Addr()}))},
		{"cluster", startServer(t, with(map[string]string{"RLS_REDIS_MODE": "cluster", "RLS_REDIS_ADDRS": strings.Join(cluster.Addrs(), ",")}))},
		{"sentinel", startServer(t, with(map[string]string{"RLS_REDIS_MODE": "sentinel", "RLS_REDIS_SENTINEL_MASTER": sentinel.MasterName(), "RLS_REDIS_ADDRS": strings.Join(sentinel.SentinelAddrs(), ",")}))},
	}
	desc := func(key string, hits uint64) *ratelimitv3.RateLimitDescriptor {
		d := &ratelimitv3.RateLimitDescriptor{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: key, Value: run}}}
		if hits != 1 {
			d.HitsAddend = wrapperspb.UInt64(hits)
		}
		return d
	}
	all := func(hits uint64) *rlsv3.RateLimitRequest {
		return &rlsv3.RateLimitRequest{Domain: "same", Descriptors: []*ratelimitv3.RateLimitDescriptor{
			desc("fixed_window", hits), desc("sliding_window_log", hits), desc("sliding_window_counter", hits), desc("token_bucket", hits),
		}}
	}
	requests := []*rlsv3.RateLimitRequest{all(1), all(2), all(1), all(1), all(0), all(5)}
	giveBack := all(1)
	for _, d := range giveBack.Descriptors {
		d.IsNegativeHits = true
	}
	requests = append(requests, giveBack, all(1), all(1))

	answers := make([][]string, len(backends))
	for i, b := range backends {
		for _, req := range requests {
			resp, err := b.srv.Client.ShouldRateLimit(context.Background(), req)
			require.NoError(t, err, b.name)
			var line []string
			for _, st := range resp.GetStatuses() {
				line = append(line, fmt.Sprintf("%s/%d", st.GetCode(), st.GetLimitRemaining()))
			}
			answers[i] = append(answers[i], resp.GetOverallCode().String()+": "+strings.Join(line, " "))
		}
	}
	for i := range backends[1:] {
		assert.Equal(t, answers[0], answers[i+1], "%s answers like memory", backends[i+1].name)
	}
	t.Logf("answers:\n%s", strings.Join(answers[0], "\n"))
	// Spot checks of the memory answers against the rules: the second
	// request fills the fixed window (3), so the third is denied and gives
	// back what the others took.
	assert.Equal(t, "OK: OK/2 OK/3 OK/4 OK/3", answers[0][0])
	assert.Equal(t, "OK: OK/0 OK/1 OK/2 OK/1", answers[0][1])
	assert.Equal(t, "OVER_LIMIT: OVER_LIMIT/0 OK/1 OK/2 OK/1", answers[0][2])
}
