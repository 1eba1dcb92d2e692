package server

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/addrfile"
	"github.com/ratewarden/ratewarden/internal/metrics"
)

// TestRatelimitMetricsOnTheirOwnPort scrapes envoyproxy/ratelimit's names
// from a listener of their own, as PROMETHEUS_ADDR gives them, and from
// /metrics of the HTTP port.
func TestRatelimitMetricsOnTheirOwnPort(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "shop.yaml"), []byte(metricsLimits), 0o644))
	s := start(t, map[string]string{
		"RLS_CONFIG_PATH":   dir,
		"RLS_METRICS_NAMES": "both",
		"RLS_METRICS_ADDR":  "127.0.0.1:0",
		"RLS_METRICS_PATH":  "/prom",
	})
	ctx := context.Background()
	for range 6 {
		_, err := s.client.ShouldRateLimit(ctx, shopRequest("path", "/login", "remote_address", "192.0.2.1"))
		require.NoError(t, err)
	}
	for _, u := range []string{"alice", "alice", "alice"} {
		_, err := s.client.ShouldRateLimit(ctx, shopRequest("user", u))
		require.NoError(t, err)
	}
	_, err := s.client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "shop"})
	require.Error(t, err)

	metricsBase := "http://" + s.srv.MetricsAddr().String()
	resp, err := http.Get(metricsBase + "/metrics")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "the metrics listener serves RLS_METRICS_PATH only")

	resp, err = http.Get(metricsBase + "/prom")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	text := string(body)

	for _, got := range []map[string]float64{parseSamples(t, text), scrapeMetrics(t, s.http)} {
		login := `{domain="shop",key1="path_/login",key2="remote_address"}`
		for series, want := range map[string]float64{
			metrics.RatelimitTotalHits + login:                                   6,
			metrics.RatelimitWithinLimit + login:                                 5,
			metrics.RatelimitOverLimit + login:                                   1,
			metrics.RatelimitNearLimit + login:                                   2,
			metrics.RatelimitTotalHits + `{domain="shop",key1="user_alice"}`:     3,
			metrics.RatelimitOverLimit + `{domain="shop",key1="user_alice"}`:     1,
			metrics.RatelimitTotalRequests + `{grpc_method="ShouldRateLimit"}`:   10,
			metrics.RatelimitShouldRateLimitError + `{err_type="service_error"}`: 1,
			metrics.RatelimitShouldRateLimitError + `{err_type="redis_error"}`:   0,
			metrics.RatelimitConfigLoadSuccess:                                   1,
			metrics.RatelimitConfigLoadError:                                     0,
			metrics.RuleHits + `{algorithm="sliding_window_log",descriptor="shop.path_/login.remote_address",domain="shop",limit="logins",window="1m"}`: 6,
		} {
			v, ok := got[series]
			if assert.True(t, ok, "%s is exported", series) {
				assert.Equal(t, want, v, series)
			}
		}
	}
	assert.Contains(t, text, "# TYPE "+metrics.RatelimitTotalHits+" counter")
}

func TestDebugListener(t *testing.T) {
	s := start(t, map[string]string{"RLS_DEBUG_ADDR": "127.0.0.1:0"})
	base := "http://" + s.srv.DebugAddr().String()
	for path, want := range map[string]string{
		"/":                    "/debug/pprof/: the Go profiles",
		"/rlconfig":            "edge",
		"/metrics":             metrics.ConfigReloads,
		"/debug/pprof/":        "goroutine",
		"/debug/pprof/cmdline": "",
	} {
		resp, err := http.Get(base + path)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, resp.StatusCode, path)
		assert.Contains(t, string(body), want, path)
	}
	resp, err := http.Post(base+"/json", "application/json", strings.NewReader(`{}`))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "the debug port takes no quota")
}

func TestNoDebugListenerUnlessAskedFor(t *testing.T) {
	assert.Nil(t, start(t, nil).srv.DebugAddr())
}

// TestAddrFileNamesEveryListener starts every listener on port 0 and reads
// their addresses from RLS_ADDR_FILE, then checks that each one answers.
func TestAddrFileNamesEveryListener(t *testing.T) {
	path := filepath.Join(t.TempDir(), "addrs.json")
	s := start(t, map[string]string{
		"RLS_ADDR_FILE":    path,
		"RLS_METRICS_ADDR": "127.0.0.1:0",
		"RLS_DEBUG_ADDR":   "127.0.0.1:0",
	})
	var addrs addrfile.Addrs
	require.Eventually(t, func() bool {
		var err error
		addrs, err = addrfile.Read(path)
		return err == nil
	}, 10*time.Second, 10*time.Millisecond, "Serve writes RLS_ADDR_FILE")
	assert.Equal(t, addrfile.Addrs{
		addrfile.GRPC:    s.srv.GRPCAddr().String(),
		addrfile.HTTP:    s.srv.HTTPAddr().String(),
		addrfile.Metrics: s.srv.MetricsAddr().String(),
		addrfile.Debug:   s.srv.DebugAddr().String(),
	}, addrs)
	for _, u := range []string{addrs[addrfile.HTTP] + "/healthcheck", addrs[addrfile.Metrics] + "/metrics", addrs[addrfile.Debug] + "/"} {
		resp, err := http.Get("http://" + u)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, u)
	}
}

func TestAddrFileThatCannotBeWrittenStopsServe(t *testing.T) {
	s := start(t, map[string]string{"RLS_ADDR_FILE": filepath.Join(t.TempDir(), "missing", "addrs.json")})
	err := s.stop()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "RLS_ADDR_FILE")
}
