package test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ratewarden/ratewarden/internal/metrics"
	"github.com/ratewarden/ratewarden/internal/redisx"
	"github.com/ratewarden/ratewarden/internal/testkit/promtext"
	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
)

// faultLimits has a small limit to check enforcement and a huge one whose
// every answer is OK, to tell decided answers from failure answers.
const faultLimits = `
domain: faults
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 5, algorithm: sliding_window_log}
  - key: tenant
    rate_limit: {unit: hour, requests_per_unit: 1000000, algorithm: fixed_window}
`

// The settings the fault tests run with: the server's defaults, but for a
// budget that RLS_BACKEND_TIMEOUT_MAX caps at 10ms, below Envoy's 20ms, so
// that how soon the failure mode answers is measured against it while the
// test's callers allow seconds (a hung server then fails the test, rather
// than the caller's deadline hiding it).
const (
	backendTimeout  = 10 * time.Millisecond
	breakerFailures = 20
	breakerCooldown = time.Second
	breakerProbes   = 3
	// breakerGrace is how long after a timeout the breaker judges it: the
	// Redis read timeout, for which the server keeps reading the answers
	// of callers that gave up.
	breakerGrace = redisx.DefaultReadTimeout
	// latencySlack is what the 99th percentile of answers may take beyond
	// the backend timeout on this loaded machine: gRPC, scheduling, the race
	// detector in the client.
	latencySlack = 50 * time.Millisecond
	// maxLatency bounds every answer. A rare answer is held up by the
	// machine, by a few hundred milliseconds when other work loads it; one
	// that waited for Redis past the timeout would take at least go-redis's
	// read timeout, and fails this bound.
	maxLatency = redisx.DefaultReadTimeout
	// faultPhase is how long requests are sent while a fault lasts.
	faultPhase = 1500 * time.Millisecond
)

var failureModes = []string{"error", "allow", "deny"}

// faultServers starts one server per failure mode on the Redis that env
// names, with budgets capped at backendTimeout and the default breaker, each
// with a key prefix of its own.
func faultServers(t *testing.T, env map[string]string) map[string]*serverProcess {
	t.Helper()
	dir := writeConfig(t, faultLimits)
	servers := make(map[string]*serverProcess)
	for _, mode := range failureModes {
		vars := map[string]string{
			"RLS_CONFIG_PATH":         dir,
			"RLS_BACKEND":             "redis",
			"RLS_FAILURE_MODE":        mode,
			"RLS_BACKEND_TIMEOUT_MAX": backendTimeout.String(),
			"RLS_KEY_PREFIX":          fmt.Sprintf("faults-%s-%d:", mode, rand.Uint64()),
		}
		for k, v := range env {
			vars[k] = v
		}
		servers[mode] = startServer(t, vars)
	}
	return servers
}

func faultRequest(key, value string) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: "faults", Descriptors: []*ratelimitv3.RateLimitDescriptor{{
		Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: key, Value: value}},
	}}}
}

// answer is one call's outcome.
type answer struct {
	latency time.Duration
	// decided: the backend decided (the status carries a reset).
	// failure: the failure mode's answer.
	decided, failure bool
	// problem describes an answer that is neither.
	problem string
	// code is the overall code of an answer without a gRPC error.
	code string
}

// ask sends req to srv and classifies the answer for the server's mode.
func ask(srv *serverProcess, mode string, req *rlsv3.RateLimitRequest) answer {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	resp, err := srv.Client.ShouldRateLimit(ctx, req)
	a := answer{latency: time.Since(start)}
	if err != nil {
		if mode == "error" && status.Code(err) == codes.Unavailable {
			a.failure = true
		} else {
			a.problem = fmt.Sprintf("error %v", err)
		}
		return a
	}
	a.code = resp.GetOverallCode().String()
	st := resp.GetStatuses()[0]
	switch {
	case st.GetDurationUntilReset() != nil:
		a.decided = true
	case mode == "allow" && resp.GetOverallCode() == rlsv3.RateLimitResponse_OK && st.GetCurrentLimit() != nil:
		a.failure = true
	case mode == "deny" && resp.GetOverallCode() == rlsv3.RateLimitResponse_OVER_LIMIT &&
		st.GetCode() == rlsv3.RateLimitResponse_OVER_LIMIT && st.GetDurationUntilReset() == nil &&
		len(resp.GetResponseHeadersToAdd()) == 1 && resp.GetResponseHeadersToAdd()[0].GetValue() == "1":
		// No wait is known: the answer asks to retry in a second.
		a.failure = true
	default:
		a.problem = fmt.Sprintf("unexpected answer %v", resp)
	}
	return a
}

// phaseStats summarises the answers of one server during one phase.
type phaseStats struct {
	answers []answer
}

func (p *phaseStats) count(f func(answer) bool) int {
	n := 0
	for _, a := range p.answers {
		if f(a) {
			n++
		}
	}
	return n
}

// percentile returns the q-th latency percentile (nearest rank).
func (p *phaseStats) percentile(q float64) time.Duration {
	ls := make([]time.Duration, len(p.answers))
	for i, a := range p.answers {
		ls[i] = a.latency
	}
	slices.Sort(ls)
	if len(ls) == 0 {
		return 0
	}
	i := int(q*float64(len(ls))+0.999999) - 1
	return ls[max(0, min(i, len(ls)-1))]
}

func (p *phaseStats) String() string {
	return fmt.Sprintf("%d answers (%d failure-mode, %d decided), latency p50 %v p99 %v max %v, %d at or above the timeout",
		len(p.answers), p.count(func(a answer) bool { return a.failure }), p.count(func(a answer) bool { return a.decided }),
		p.percentile(0.50).Round(time.Microsecond), p.percentile(0.99).Round(time.Microsecond), p.percentile(1).Round(time.Microsecond),
		p.count(func(a answer) bool { return a.latency >= backendTimeout }))
}

// askUntilDone sends requests to every server, one at a time per server, until
// ctx ends; value(i) names the tenant of the i-th request.
func askUntilDone(ctx context.Context, servers map[string]*serverProcess, value func(i int) string) map[string]*phaseStats {
	stats := make(map[string]*phaseStats)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for mode, srv := range servers {
		st := &phaseStats{}
		stats[mode] = st
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				a := ask(srv, mode, faultRequest("tenant", value(i)))
				mu.Lock()
				st.answers = append(st.answers, a)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return stats
}

// checkPhase asserts that every answer came within the timeout plus slack
// and was either decided or the failure mode's answer; with allDown, that
// every one was the failure mode's.
func checkPhase(t *testing.T, name string, stats map[string]*phaseStats, allDown bool) {
	t.Helper()
	for _, mode := range failureModes {
		st := stats[mode]
		t.Logf("%s, mode %s: %s", name, mode, st)
		require.NotEmpty(t, st.answers)
		for i, a := range st.answers {
			assert.Empty(t, a.problem, "%s, mode %s, answer %d", name, mode, i)
			if allDown {
				assert.True(t, a.failure, "%s, mode %s, answer %d: the failure mode's answer", name, mode, i)
			}
		}
		assert.LessOrEqual(t, st.percentile(0.99), backendTimeout+latencySlack, "%s, mode %s: p99 latency", name, mode)
		assert.LessOrEqual(t, st.percentile(1), maxLatency, "%s, mode %s: max latency", name, mode)
		assert.Positive(t, st.count(func(a answer) bool { return a.failure }), "%s, mode %s: the fault was seen", name, mode)
	}
}

// waitHealth waits until every server's readiness, gRPC health and /ready,
// says serving (or not).
func waitHealth(t *testing.T, servers map[string]*serverProcess, serving bool, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for mode, srv := range servers {
		require.Eventually(t, func() bool {
			return srv.Serving(context.Background()) == serving && srv.probe("/ready") == serving
		}, within, 20*time.Millisecond, "mode %s: serving should become %v", mode, serving)
	}
	return time.Since(start)
}

// waitDecided waits until every server decides requests for every tenant
// value(0..n-1) again, and returns how long that took.
func waitDecided(t *testing.T, servers map[string]*serverProcess, n int, value func(i int) string, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for mode, srv := range servers {
		require.Eventually(t, func() bool {
			for i := range n {
				if !ask(srv, mode, faultRequest("tenant", value(i))).decided {
					return false
				}
			}
			return true
		}, within, 20*time.Millisecond, "mode %s: answers should be decided again", mode)
	}
	return time.Since(start)
}

// checkEnforced checks that every server enforces the limit of 5 a minute
// on a user it has never seen. A machine busy enough to hold one Redis
// round trip past the 10 ms timeout gets a failure answer, which says
// nothing about enforcement (and may or may not have counted): then the
// sequence is tried again with another user, up to three times.
func checkEnforced(t *testing.T, servers map[string]*serverProcess) {
	t.Helper()
	for mode, srv := range servers {
		var codes []string
		for attempt := 0; attempt < 3; attempt++ {
			user := fmt.Sprintf("user-%d", rand.Uint64())
			codes = codes[:0]
			for range 6 {
				a := ask(srv, mode, faultRequest("user", user))
				require.Empty(t, a.problem, "mode %s", mode)
				if !a.decided {
					codes = nil
					break
				}
				codes = append(codes, a.code)
			}
			if codes != nil {
				break
			}
		}
		require.NotNil(t, codes, "mode %s: three attempts got a failure answer", mode)
		assert.Equal(t, []string{"OK", "OK", "OK", "OK", "OK", "OVER_LIMIT"}, codes, "mode %s", mode)
	}
}

// scrapeMetrics returns the server's /metrics samples by series.
func scrapeMetrics(t *testing.T, srv *serverProcess) map[string]float64 {
	t.Helper()
	samples, err := promtext.Scrape("http://" + srv.HTTPAddr + "/metrics")
	require.NoError(t, err)
	return samples
}

// backendErrors returns each server's count of failed backend calls of
// one kind, from its /metrics.
func backendErrors(t *testing.T, servers map[string]*serverProcess, kind string) map[string]float64 {
	t.Helper()
	n := make(map[string]float64)
	for mode, srv := range servers {
		n[mode] = scrapeMetrics(t, srv)[metrics.BackendErrors+`{kind="`+kind+`"}`]
	}
	return n
}

// checkBreakerSpared checks, from the servers' own counts, that while the
// backend hung the breaker kept nearly every request from calling it: the
// calls that timed out are those of the first breakerGrace (a timeout is
// judged that much later, when no answer came), at least the failures that
// opened the breaker, and each cool-down's probes; every other answer was
// refused by the open breaker at once. Without the breaker, every answer
// would have waited.
func checkBreakerSpared(t *testing.T, name string, stats map[string]*phaseStats, timeoutsBefore, timeoutsAfter, openBefore, openAfter map[string]float64) {
	t.Helper()
	for _, mode := range failureModes {
		timedOut := int(timeoutsAfter[mode] - timeoutsBefore[mode])
		refused := int(openAfter[mode] - openBefore[mode])
		t.Logf("%s, mode %s: %d backend calls timed out, %d refused by the open breaker", name, mode, timedOut, refused)
		assert.GreaterOrEqual(t, timedOut, breakerFailures, "%s, mode %s: the failures that open the breaker", name, mode)
		assert.LessOrEqual(t, timedOut, int(breakerGrace/backendTimeout)+1+breakerFailures+breakerProbes*(int(faultPhase/breakerCooldown)+1),
			"%s, mode %s: those of one grace, then the probes of each cool-down", name, mode)
		assert.Equal(t, len(stats[mode].answers), timedOut+refused, "%s, mode %s: every answer either timed out or was refused at once", name, mode)
	}
}

func TestFaultsStandalone(t *testing.T) {
	redis := redistest.Standalone(t)
	servers := faultServers(t, map[string]string{"RLS_REDIS_ADDRS": redis.Addr()})
	tenant := func(i int) string { return "t" + strconv.Itoa(i%10) }
	waitHealth(t, servers, true, 5*time.Second)
	waitDecided(t, servers, 10, tenant, 5*time.Second)

	t.Run("stopped", func(t *testing.T) {
		redis.Stop()
		ctx, cancel := context.WithTimeout(context.Background(), faultPhase)
		defer cancel()
		stats := askUntilDone(ctx, servers, tenant)
		checkPhase(t, "stopped", stats, true)
		t.Logf("stopped: health NOT_SERVING after %v", waitHealth(t, servers, false, 5*time.Second).Round(time.Millisecond))

		m := scrapeMetrics(t, servers["error"])
		t.Logf("stopped, mode error: backend errors unavailable %v timeout %v circuit_open %v; breaker opened %v times",
			m[metrics.BackendErrors+`{kind="unavailable"}`], m[metrics.BackendErrors+`{kind="timeout"}`],
			m[metrics.BackendErrors+`{kind="circuit_open"}`], m[metrics.BreakerOpened])
		assert.Positive(t, m[metrics.BackendErrors+`{kind="unavailable"}`])
		assert.Positive(t, m[metrics.BackendErrors+`{kind="circuit_open"}`])
		assert.Positive(t, m[metrics.BreakerOpened])
		assert.Equal(t, 1.0, m[metrics.BreakerState+`{state="open"}`]+m[metrics.BreakerState+`{state="half_open"}`])

		require.NoError(t, redis.Start())
		t.Logf("started again: answers decided after %v, health SERVING after %v",
			waitDecided(t, servers, 10, tenant, 5*time.Second).Round(time.Millisecond),
			waitHealth(t, servers, true, 5*time.Second).Round(time.Millisecond))
		checkEnforced(t, servers)
	})

	t.Run("paused", func(t *testing.T) {
		timeouts, open := backendErrors(t, servers, "timeout"), backendErrors(t, servers, "circuit_open")
		redis.Pause()
		ctx, cancel := context.WithTimeout(context.Background(), faultPhase)
		defer cancel()
		stats := askUntilDone(ctx, servers, tenant)
		checkPhase(t, "paused", stats, true)
		checkBreakerSpared(t, "paused", stats, timeouts, backendErrors(t, servers, "timeout"), open, backendErrors(t, servers, "circuit_open"))
		t.Logf("paused: health NOT_SERVING after %v", waitHealth(t, servers, false, 5*time.Second).Round(time.Millisecond))

		m := scrapeMetrics(t, servers["allow"])
		t.Logf("paused, mode allow: backend errors timeout %v circuit_open %v",
			m[metrics.BackendErrors+`{kind="timeout"}`], m[metrics.BackendErrors+`{kind="circuit_open"}`])
		assert.Positive(t, m[metrics.BackendErrors+`{kind="timeout"}`])

		redis.Resume()
		t.Logf("resumed: answers decided after %v, health SERVING after %v",
			waitDecided(t, servers, 10, tenant, 5*time.Second).Round(time.Millisecond),
			waitHealth(t, servers, true, 5*time.Second).Round(time.Millisecond))
		checkEnforced(t, servers)
	})
}

// TestFaultsClusterFailover kills a master of a 6-node cluster while
// requests for 30 tenants, spread over the three masters, keep coming. With
// Redis's default cluster-require-full-coverage yes, every node refuses all
// commands from the moment the master is marked failed until its replica
// takes over, so every answer is then the failure mode's for a while; with
// it off, only the dead master's tenants are.
func TestFaultsClusterFailover(t *testing.T) {
	for _, fullCoverage := range []string{"yes", "no"} {
		t.Run("cluster-require-full-coverage "+fullCoverage, func(t *testing.T) {
			clusterFailover(t, fullCoverage)
		})
	}
}

func clusterFailover(t *testing.T, fullCoverage string) {
	cluster := redistest.NewCluster(t)
	for _, n := range cluster.Nodes() {
		require.NoError(t, n.Client(t).ConfigSet(context.Background(), "cluster-require-full-coverage", fullCoverage).Err())
	}
	servers := faultServers(t, map[string]string{
		"RLS_REDIS_MODE":  "cluster",
		"RLS_REDIS_ADDRS": strings.Join(cluster.Addrs(), ","),
	})
	tenant := func(i int) string { return "t" + strconv.Itoa(i%30) }
	waitDecided(t, servers, 30, tenant, 10*time.Second)

	ctx, cancel := context.WithCancel(context.Background())
	var stats map[string]*phaseStats
	done := make(chan struct{})
	go func() {
		defer close(done)
		stats = askUntilDone(ctx, servers, tenant)
	}()
	time.Sleep(100 * time.Millisecond) // some answers before the kill
	master := cluster.Masters(t)[0]
	begin := time.Now()
	promoted := cluster.KillMaster(t, master)
	failover := time.Since(begin)
	time.Sleep(200 * time.Millisecond) // and some after
	cancel()
	<-done
	t.Logf("killed master %s; replica %s took over and the cluster was healthy after %v", master, promoted, failover.Round(time.Millisecond))
	checkPhase(t, "master killed", stats, false)
	for _, mode := range failureModes {
		m := scrapeMetrics(t, servers[mode])
		opened := m[metrics.BreakerOpened]
		t.Logf("master killed, mode %s: backend errors unavailable %v timeout %v other %v circuit_open %v; breaker opened %v times", mode,
			m[metrics.BackendErrors+`{kind="unavailable"}`], m[metrics.BackendErrors+`{kind="timeout"}`],
			m[metrics.BackendErrors+`{kind="other"}`], m[metrics.BackendErrors+`{kind="circuit_open"}`], opened)
		st := stats[mode]
		assert.Positive(t, st.count(func(a answer) bool { return a.decided }),
			"mode %s: tenants on the other masters are decided", mode)
		if fullCoverage == "no" {
			// About a third of the tenants live on the dead master; the
			// breaker stays closed for the others.
			assert.Less(t, st.count(func(a answer) bool { return a.failure }), len(st.answers)/2,
				"mode %s: only the dead master's tenants get the failure mode's answer", mode)
		}
	}

	t.Logf("after the failover: answers decided after %v", waitDecided(t, servers, 30, tenant, 15*time.Second).Round(time.Millisecond))
	checkEnforced(t, servers)
}

func TestStartupWhileRedisIsDown(t *testing.T) {
	redis := redistest.Standalone(t)
	redis.Stop()
	servers := faultServers(t, map[string]string{"RLS_REDIS_ADDRS": redis.Addr()})
	tenant := func(i int) string { return "t" + strconv.Itoa(i%10) }

	// It serves at once, unhealthy, with the failure mode's answers; and
	// it is not live until Redis first answers, as envoyproxy/ratelimit
	// opens its HTTP port only after its first PING.
	for mode, srv := range servers {
		assert.False(t, srv.Serving(context.Background()), "mode %s: NOT_SERVING from the start", mode)
		assert.False(t, srv.probe("/ready"), "mode %s: /ready 503", mode)
		code, body := srv.get("/healthcheck")
		assert.Equal(t, http.StatusServiceUnavailable, code, "mode %s: /healthcheck (liveness) 503", mode)
		assert.Contains(t, body, "waiting for the backend's first answer: backend unreachable", "mode %s", mode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	checkPhase(t, "redis not yet started", askUntilDone(ctx, servers, tenant), true)

	require.NoError(t, redis.Start())
	t.Logf("redis started: health SERVING after %v, answers decided after %v",
		waitHealth(t, servers, true, 5*time.Second).Round(time.Millisecond),
		waitDecided(t, servers, 10, tenant, 5*time.Second).Round(time.Millisecond))
	for mode, srv := range servers {
		assert.True(t, srv.probe("/healthcheck"), "mode %s: live once Redis has answered", mode)
	}
	checkEnforced(t, servers)

	// Live from then on, through a Redis outage.
	redis.Stop()
	waitHealth(t, servers, false, 5*time.Second)
	for mode, srv := range servers {
		assert.True(t, srv.probe("/healthcheck"), "mode %s: live while Redis is down again", mode)
	}
}
