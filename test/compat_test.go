package test

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/addrfile"
	"github.com/ratewarden/ratewarden/internal/metrics"
	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
)

// TestEnvoyproxyRatelimitEnvironment runs the server binary with the
// environment of a Deployment made for envoyproxy/ratelimit, as Istio's
// sample writes it, with Prometheus as Envoy Gateway turns it on: the
// limits under RUNTIME_ROOT, Redis at REDIS_URL, envoyproxy/ratelimit's
// metric names on PROMETHEUS_ADDR, and a warning for what is not read.
func TestEnvoyproxyRatelimitEnvironment(t *testing.T) {
	redis := redistest.SharedStandalone(t)
	root := t.TempDir()
	dir := filepath.Join(root, "ratelimit", "config")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(`
domain: compat
descriptors:
  - key: PATH
    value: /productpage
    rate_limit: {unit: minute, requests_per_unit: 2}
`), 0o644))
	srv := startServerAt(t, "", map[string]string{
		"LOG_LEVEL":                     "info",
		"REDIS_SOCKET_TYPE":             "tcp",
		"REDIS_URL":                     redis.Addr(),
		"USE_STATSD":                    "false",
		"RUNTIME_ROOT":                  root,
		"RUNTIME_SUBDIRECTORY":          "ratelimit",
		"RUNTIME_WATCH_ROOT":            "false",
		"RUNTIME_IGNOREDOTFILES":        "true",
		"USE_PROMETHEUS":                "true",
		"PROMETHEUS_ADDR":               "127.0.0.1:0",
		"DEBUG_HOST":                    "127.0.0.1",
		"DEBUG_PORT":                    "0",
		"EXPIRATION_JITTER_MAX_SECONDS": "300",
		"RLS_BACKEND_TIMEOUT":           "5s", // what is read, not latency, is under test
		"RLS_KEY_PREFIX":                "compat-" + strings.ReplaceAll(t.Name(), "/", "-") + ":",
	})

	req := &rlsv3.RateLimitRequest{Domain: "compat", Descriptors: []*ratelimitv3.RateLimitDescriptor{{
		Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "PATH", Value: "/productpage"}},
	}}}
	var codes []rlsv3.RateLimitResponse_Code
	for range 3 {
		resp, err := srv.Client.ShouldRateLimit(context.Background(), req)
		require.NoError(t, err)
		codes = append(codes, resp.GetOverallCode())
	}
	assert.Equal(t, []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT}, codes,
		"the limits under RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config are in force")

	keys, err := redis.Client(t).Keys(context.Background(), "compat-*").Result()
	require.NoError(t, err)
	assert.NotEmpty(t, keys, "the limits are counted in the Redis of REDIS_URL")

	resp, err := http.Get("http://" + srv.Addrs[addrfile.Metrics] + "/metrics")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	var rules []string
	for line := range strings.SplitSeq(string(body), "\n") {
		if strings.HasPrefix(line, metrics.RatelimitRulePrefix) {
			rules = append(rules, line)
		}
	}
	assert.ElementsMatch(t, []string{
		metrics.RatelimitTotalHits + `{domain="compat",key1="PATH_/productpage"} 3`,
		metrics.RatelimitWithinLimit + `{domain="compat",key1="PATH_/productpage"} 2`,
		metrics.RatelimitNearLimit + `{domain="compat",key1="PATH_/productpage"} 1`,
		metrics.RatelimitOverLimit + `{domain="compat",key1="PATH_/productpage"} 1`,
		metrics.RatelimitShadowMode + `{domain="compat",key1="PATH_/productpage"} 0`,
	}, rules, "envoyproxy/ratelimit's names on PROMETHEUS_ADDR")

	resp, err = http.Get("http://" + srv.Addrs[addrfile.Debug] + "/rlconfig")
	require.NoError(t, err)
	body, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	assert.Contains(t, string(body), "compat", "the debug port serves /rlconfig")

	logs := srv.Output()
	for _, want := range []string{
		`msg="read envoyproxy/ratelimit variable" from=RUNTIME_ROOT,RUNTIME_SUBDIRECTORY setting=RLS_CONFIG_PATH value=` + dir,
		`level=WARN msg="envoyproxy/ratelimit variable ignored" variables=EXPIRATION_JITTER_MAX_SECONDS`,
	} {
		assert.True(t, strings.Contains(logs, want), "the log says %s", want)
	}
}

// TestEnvoyproxyRatelimitVariableRefused shows a value that cannot be
// honoured stopping the server with the variable's name.
func TestEnvoyproxyRatelimitVariableRefused(t *testing.T) {
	p, exited := runUntilExit(t, map[string]string{"REDIS_SOCKET_TYPE": "unix", "REDIS_URL": "/var/run/nutcracker/ratelimit.sock"}, 10*time.Second, 0)
	require.True(t, exited && p.ExitCode() != 0, "the server stops by itself: %s", p.Output())
	assert.Contains(t, p.Output(), "REDIS_SOCKET_TYPE is unix")
}
