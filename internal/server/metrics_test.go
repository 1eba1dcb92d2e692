package server

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/metrics"
	"github.com/ratewarden/ratewarden/internal/testkit/promtext"
	"github.com/ratewarden/ratewarden/internal/testkit/rlstest"
)

const metricsLimits = `
domain: shop
descriptors:
  - key: path
    value: /login
    descriptors:
      - key: remote_address
        rate_limit: {unit: minute, requests_per_unit: 5, algorithm: sliding_window_log, name: logins}
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 50}
  - key: user
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 2, algorithm: sliding_window_log}
  - key: batch
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1, algorithm: token_bucket}
`

// scrapeMetrics GETs /metrics and returns every sample keyed by its series
// as the text format writes it: name{label="value",...}, labels sorted.
func scrapeMetrics(t *testing.T, base string) map[string]float64 {
	t.Helper()
	samples, err := promtext.Scrape(base + "/metrics")
	require.NoError(t, err)
	return samples
}

// parseSamples parses the Prometheus text format into series → value.
func parseSamples(t *testing.T, text string) map[string]float64 {
	t.Helper()
	samples, err := promtext.Parse(text)
	require.NoError(t, err)
	return samples
}

func shopRequest(kv ...string) *rlsv3.RateLimitRequest {
	return rlstest.Request("shop", rlstest.Descriptor(kv...))
}

func ruleSeries(name, descriptor, limit, algorithm, window string) string {
	return fmt.Sprintf(`%s{algorithm=%q,descriptor=%q,domain="shop",limit=%q,window=%q}`,
		name, algorithm, descriptor, limit, window)
}

func TestMetricsAfterKnownRequests(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "shop.yaml"), []byte(metricsLimits), 0o644))
	s := start(t, map[string]string{"RLS_CONFIG_PATH": dir})
	ctx := context.Background()
	call := func(req *rlsv3.RateLimitRequest) rlsv3.RateLimitResponse_Code {
		t.Helper()
		resp, err := s.client.ShouldRateLimit(ctx, req)
		require.NoError(t, err)
		return resp.GetOverallCode()
	}

	// 7 logins on 5 a minute; the 7th over HTTP, which is counted too.
	var codes []rlsv3.RateLimitResponse_Code
	for range 6 {
		codes = append(codes, call(shopRequest("path", "/login", "remote_address", "192.0.2.1")))
	}
	resp, err := http.Post(s.http+"/json", "application/json", strings.NewReader(
		`{"domain":"shop","descriptors":[{"entries":[{"key":"path","value":"/login"},{"key":"remote_address","value":"192.0.2.1"}]}]}`))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	ok, over := rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT
	assert.Equal(t, []rlsv3.RateLimitResponse_Code{ok, ok, ok, ok, ok, over}, codes)

	// 1000 addresses under a rule without detailed_metric.
	for i := range 1000 {
		require.Equal(t, ok, call(shopRequest("remote_address", fmt.Sprintf("198.51.%d.%d", i/256, i%256))))
	}
	// A detailed rule names each value: alice 3 times on 2 a minute, bob once.
	assert.Equal(t, ok, call(shopRequest("user", "alice")))
	assert.Equal(t, ok, call(shopRequest("user", "alice")))
	assert.Equal(t, over, call(shopRequest("user", "alice")))
	assert.Equal(t, ok, call(shopRequest("user", "bob")))
	// Shadow mode: the second batch is over its limit and let through.
	assert.Equal(t, ok, call(shopRequest("batch", "nightly")))
	assert.Equal(t, ok, call(shopRequest("batch", "nightly")))
	// An invalid request.
	_, err = s.client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "shop"})
	require.Error(t, err)

	got := scrapeMetrics(t, s.http)
	const login = "shop.path_/login.remote_address"
	want := map[string]float64{
		// 7 hits; 5 admitted, of which the 4th and 5th leave 4 and 5 of 5
		// used, at or above 0.8; 2 denied.
		ruleSeries(metrics.RuleHits, login, "logins", "sliding_window_log", "1m"):            7,
		ruleSeries(metrics.RuleWithinLimitHits, login, "logins", "sliding_window_log", "1m"): 5,
		ruleSeries(metrics.RuleNearLimitHits, login, "logins", "sliding_window_log", "1m"):   2,
		ruleSeries(metrics.RuleOverLimitHits, login, "logins", "sliding_window_log", "1m"):   2,

		ruleSeries(metrics.RuleHits, "shop.remote_address", "", "sliding_window_counter", "1s"):            1000,
		ruleSeries(metrics.RuleWithinLimitHits, "shop.remote_address", "", "sliding_window_counter", "1s"): 1000,

		ruleSeries(metrics.RuleHits, "shop.user_alice", "", "sliding_window_log", "1m"):            3,
		ruleSeries(metrics.RuleWithinLimitHits, "shop.user_alice", "", "sliding_window_log", "1m"): 2,
		ruleSeries(metrics.RuleNearLimitHits, "shop.user_alice", "", "sliding_window_log", "1m"):   1,
		ruleSeries(metrics.RuleOverLimitHits, "shop.user_alice", "", "sliding_window_log", "1m"):   1,
		ruleSeries(metrics.RuleHits, "shop.user_bob", "", "sliding_window_log", "1m"):              1,

		ruleSeries(metrics.RuleHits, "shop.batch", "", "token_bucket", "1h"):            2,
		ruleSeries(metrics.RuleWithinLimitHits, "shop.batch", "", "token_bucket", "1h"): 1,
		ruleSeries(metrics.RuleNearLimitHits, "shop.batch", "", "token_bucket", "1h"):   1,
		ruleSeries(metrics.RuleOverLimitHits, "shop.batch", "", "token_bucket", "1h"):   1,
		ruleSeries(metrics.RuleShadowModeHits, "shop.batch", "", "token_bucket", "1h"):  1,

		// 7 + 1000 + 4 + 2 valid requests, 3 of them over the limit.
		metrics.Requests + `{code="OK",grpc_code="OK"}`:                   1010,
		metrics.Requests + `{code="OVER_LIMIT",grpc_code="OK"}`:           3,
		metrics.Requests + `{code="UNKNOWN",grpc_code="InvalidArgument"}`: 1,
		metrics.RequestDuration + `_count`:                                1014,
		metrics.BackendDuration + `_count`:                                1013,
		metrics.BackendErrors + `{kind="timeout"}`:                        0,
		metrics.BackendErrors + `{kind="unavailable"}`:                    0,
		metrics.BackendErrors + `{kind="circuit_open"}`:                   0,
		metrics.BackendErrors + `{kind="other"}`:                          0,
		metrics.BreakerState + `{state="closed"}`:                         1,
		metrics.ConfigLastReloadSuccessful:                                1,
		metrics.ConfigLoaded:                                              1,
		metrics.BackendHealth + `{state="ok"}`:                            1,
		metrics.BackendHealth + `{state="refuses_writes"}`:                0,
	}
	for series, v := range want {
		if assert.Contains(t, got, series) {
			assert.Equal(t, v, got[series], series)
		}
	}

	// Exactly the label sets above: 1000 addresses make one, not 1000.
	var hitSeries []string
	for series := range got {
		if strings.HasPrefix(series, metrics.RuleHits+"{") {
			hitSeries = append(hitSeries, series)
		}
	}
	assert.ElementsMatch(t, []string{
		ruleSeries(metrics.RuleHits, login, "logins", "sliding_window_log", "1m"),
		ruleSeries(metrics.RuleHits, "shop.remote_address", "", "sliding_window_counter", "1s"),
		ruleSeries(metrics.RuleHits, "shop.user_alice", "", "sliding_window_log", "1m"),
		ruleSeries(metrics.RuleHits, "shop.user_bob", "", "sliding_window_log", "1m"),
		ruleSeries(metrics.RuleHits, "shop.batch", "", "token_bucket", "1h"),
	}, hitSeries)
	var nearSeries int
	for series := range got {
		if strings.HasPrefix(series, metrics.RuleNearLimitHits+"{") {
			nearSeries++
		}
	}
	assert.Equal(t, 3, nearSeries, "no address came near its limit")
}

func TestMetricsCountConfigReloads(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "shop.yaml"), []byte(metricsLimits), 0o644))
	s := start(t, map[string]string{"RLS_CONFIG_PATH": dir})
	reloaded := func(success, failure, last float64) func() bool {
		return func() bool {
			got := scrapeMetrics(t, s.http)
			return got[metrics.ConfigReloads+`{result="success"}`] == success &&
				got[metrics.ConfigReloads+`{result="failure"}`] == failure &&
				got[metrics.ConfigLastReloadSuccessful] == last
		}
	}
	require.True(t, reloaded(0, 0, 1)(), "no reload yet")

	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("domain: other\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n"), 0o644))
	require.Eventually(t, reloaded(0, 1, 0), 5*time.Second, 20*time.Millisecond, "a failed reload is counted")

	require.NoError(t, os.WriteFile(bad, []byte("domain: other\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 1}\n"), 0o644))
	require.Eventually(t, reloaded(1, 1, 1), 5*time.Second, 20*time.Millisecond, "a successful reload is counted")
}
