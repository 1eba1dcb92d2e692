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
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ratewarden/ratewarden/internal/testkit/rlstest"
)

// TestEnvoyExampleConfiguration serves envoyproxy/ratelimit's example
// configuration, unchanged, and plays its quota script against the server
// binary: the request with both quota descriptors is admitted while either
// has room, and the answer carries the dynamic metadata of the quotas that
// admitted it.
func TestEnvoyExampleConfiguration(t *testing.T) {
	srv := startServer(t, map[string]string{
		"RLS_CONFIG_PATH":               filepath.Join("..", "internal", "config", "testdata", "envoyproxy", "example.yaml"),
		"RLS_DEFAULT_ALGORITHM":         "sliding_window_log",
		"RLS_RESPONSE_DYNAMIC_METADATA": "true",
	})
	ctx := context.Background()
	req := &rlsv3.RateLimitRequest{Domain: "rl", Descriptors: []*ratelimitv3.RateLimitDescriptor{
		rlstest.Descriptor("service", "service_1"), rlstest.Descriptor("service", "service_2"),
	}}
	ok, over := rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT
	for i, want := range []struct {
		overall  rlsv3.RateLimitResponse_Code
		statuses []rlsv3.RateLimitResponse_Code
		metadata any
	}{
		{ok, []rlsv3.RateLimitResponse_Code{ok, ok}, map[string]any{"service_with_quota": map[string]any{"name": "service_1"}}},
		{ok, []rlsv3.RateLimitResponse_Code{over, ok}, map[string]any{"service_with_quota": map[string]any{"name": "service_2"}}},
		{over, []rlsv3.RateLimitResponse_Code{over, over}, nil},
	} {
		resp, err := srv.Client.ShouldRateLimit(ctx, req)
		require.NoError(t, err)
		assert.Equal(t, want.overall, resp.GetOverallCode(), "request %d", i+1)
		assert.Equal(t, want.statuses, rlstest.Codes(resp), "request %d", i+1)
		md := resp.GetDynamicMetadata().AsMap()
		assert.Equal(t, "rl", md["domain"])
		assert.Equal(t, want.metadata, md["metadata"], "request %d", i+1)
	}

	// The same over HTTP: spent quotas are a 429.
	body := `{"domain":"rl","descriptors":[{"entries":[{"key":"service","value":"service_1"}]},{"entries":[{"key":"service","value":"service_2"}]}]}`
	resp, err := http.Post("http://"+srv.HTTPAddr+"/json", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	assert.Contains(t, string(out), `"dynamicMetadata"`)
}

// TestServerStartsBeforeItsLimits starts the server binary on a directory
// that does not exist yet: it serves and is live but not ready, answering
// every request with envoyproxy/ratelimit's error before its first
// configuration (gRPC Unknown), until the directory and a file appear.
func TestServerStartsBeforeItsLimits(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data", "ratelimit", "config")
	srv := startServer(t, map[string]string{"RLS_CONFIG_PATH": dir})
	ctx := context.Background()
	assert.False(t, srv.Serving(ctx))
	for path, want := range map[string]int{"/healthcheck": http.StatusOK, "/ready": http.StatusServiceUnavailable} {
		resp, err := http.Get("http://" + srv.HTTPAddr + path)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, want, resp.StatusCode, "%s: live, not ready", path)
	}
	req := &rlsv3.RateLimitRequest{Domain: "late", Descriptors: []*ratelimitv3.RateLimitDescriptor{rlstest.Descriptor("k", "v")}}
	_, err := srv.Client.ShouldRateLimit(ctx, req)
	assert.Equal(t, codes.Unknown, status.Code(err), "%v", err)
	assert.ErrorContains(t, err, "no rate limit configuration loaded")

	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "late.yaml"),
		[]byte("domain: late\ndescriptors:\n  - {key: k, rate_limit: {unit: hour, requests_per_unit: 0}}\n"), 0o644))
	require.Eventually(t, func() bool { return srv.Serving(ctx) }, 10*time.Second, 20*time.Millisecond)
	answer, err := srv.Client.ShouldRateLimit(ctx, req)
	require.NoError(t, err)
	assert.Equal(t, rlsv3.RateLimitResponse_OVER_LIMIT, answer.GetOverallCode())
}
