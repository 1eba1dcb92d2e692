package server

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/rls"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
)

// started is a server serving on loopback ports for one test.
type started struct {
	srv    *Server
	conn   *grpc.ClientConn
	client rlsv3.RateLimitServiceClient
	http   string
	stop   func() error
}

// start serves the example configuration with the memory backend on free
// loopback ports; env adds or overrides RLS_* variables.
func start(t *testing.T, env map[string]string) *started {
	t.Helper()
	t.Setenv("RLS_GRPC_ADDR", "127.0.0.1:0")
	t.Setenv("RLS_HTTP_ADDR", "127.0.0.1:0")
	t.Setenv("RLS_CONFIG_PATH", "../../config")
	for k, v := range env {
		t.Setenv(k, v)
	}
	settings, err := LoadSettings()
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := New(ctx, settings, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()

	conn, err := grpc.NewClient(srv.GRPCAddr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	s := &started{srv: srv, conn: conn, client: rlsv3.NewRateLimitServiceClient(conn), http: "http://" + srv.HTTPAddr().String()}
	var stopped bool
	var stopErr error
	s.stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			stopErr = <-done
			conn.Close()
		}
		return stopErr
	}
	t.Cleanup(func() { s.stop() })
	return s
}

func loginRequest(addr string) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{
		Domain: "edge",
		Descriptors: []*ratelimitv3.RateLimitDescriptor{{
			Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "path", Value: "/login"}, {Key: "remote_address", Value: addr}},
		}},
	}
}

func TestServeGRPCEndToEnd(t *testing.T) {
	s := start(t, nil)
	ctx := context.Background()

	// The example config allows 5 logins a minute per address.
	for i := range 5 {
		resp, err := s.client.ShouldRateLimit(ctx, loginRequest("192.0.2.1"))
		require.NoError(t, err)
		require.Equal(t, rlsv3.RateLimitResponse_OK, resp.GetOverallCode(), "call %d", i)
		assert.EqualValues(t, 4-i, resp.GetStatuses()[0].GetLimitRemaining())
	}
	resp, err := s.client.ShouldRateLimit(ctx, loginRequest("192.0.2.1"))
	require.NoError(t, err)
	require.Equal(t, rlsv3.RateLimitResponse_OVER_LIMIT, resp.GetOverallCode())
	wait := resp.GetStatuses()[0].GetDurationUntilReset().AsDuration()
	assert.Greater(t, wait, 59*time.Second)
	assert.LessOrEqual(t, wait, 60*time.Second)
	assert.Equal(t, "retry-after", resp.GetResponseHeadersToAdd()[0].GetKey())
	// Another address has its own limit.
	resp, err = s.client.ShouldRateLimit(ctx, loginRequest("192.0.2.2"))
	require.NoError(t, err)
	assert.Equal(t, rlsv3.RateLimitResponse_OK, resp.GetOverallCode())

	// Bad input is refused with a message, and the server keeps serving.
	_, err = s.client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "edge"})
	assert.Equal(t, codes.InvalidArgument, status.Code(err))
	_, err = s.client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{})
	assert.Equal(t, codes.InvalidArgument, status.Code(err))
	_, err = s.client.ShouldRateLimit(ctx, loginRequest("192.0.2.3"))
	assert.NoError(t, err)
}

func TestHealthAndReflection(t *testing.T) {
	s := start(t, nil)
	ctx := context.Background()
	hc := healthpb.NewHealthClient(s.conn)
	for _, svc := range []string{"", "envoy.service.ratelimit.v3.RateLimitService"} {
		resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		require.NoError(t, err)
		assert.Equal(t, healthpb.HealthCheckResponse_SERVING, resp.GetStatus())
	}

	streamCtx, cancel := context.WithCancel(ctx)
	defer cancel() // an open stream would hold up the graceful stop
	stream, err := reflectionpb.NewServerReflectionClient(s.conn).ServerReflectionInfo(streamCtx)
	require.NoError(t, err)
	require.NoError(t, stream.Send(&reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{},
	}))
	got, err := stream.Recv()
	require.NoError(t, err)
	var names []string
	for _, svc := range got.GetListServicesResponse().GetService() {
		names = append(names, svc.GetName())
	}
	assert.Contains(t, names, "envoy.service.ratelimit.v3.RateLimitService")
	assert.Contains(t, names, "grpc.health.v1.Health")
}

func TestHTTPEndpoints(t *testing.T) {
	s := start(t, nil)

	resp, err := http.Get(s.http + "/healthcheck")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	body := `{"domain":"edge","descriptors":[{"entries":[{"key":"path","value":"/login"},{"key":"remote_address","value":"198.51.100.7"}]}]}`
	for i := range 5 {
		resp, err := http.Post(s.http+"/json", "application/json", strings.NewReader(body))
		require.NoError(t, err)
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, "call %d: %s", i, out)
		assert.Contains(t, string(out), `"overallCode":"OK"`)
	}
	resp, err = http.Post(s.http+"/json", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	assert.Contains(t, string(out), `"overallCode":"OVER_LIMIT"`)
	assert.NotEmpty(t, resp.Header.Get("Retry-After"))

	resp, err = http.Post(s.http+"/json", "application/json", strings.NewReader(`{"domain":""}`))
	require.NoError(t, err)
	out, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Contains(t, string(out), "domain must not be empty")

	resp, err = http.Post(s.http+"/json", "application/json", bytes.NewReader([]byte("{not json")))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)

	resp, err = http.Get(s.http + "/rlconfig")
	require.NoError(t, err)
	out, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, string(out), "edge")
	assert.Contains(t, string(out), "sliding_window_log")
}

func TestGracefulShutdownTurnsHealthNotServing(t *testing.T) {
	s := start(t, map[string]string{"RLS_SHUTDOWN_DELAY": "300ms"})
	hc := healthpb.NewHealthClient(s.conn)
	done := make(chan error, 1)
	go func() { done <- s.stop() }()
	require.Eventually(t, func() bool {
		resp, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{})
		return err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_NOT_SERVING
	}, 250*time.Millisecond, 5*time.Millisecond, "health turns NOT_SERVING before the listeners close")
	// Calls made while draining are still answered.
	_, err := s.client.ShouldRateLimit(context.Background(), loginRequest("203.0.113.9"))
	assert.NoError(t, err)
	assert.NoError(t, <-done)
}

func TestSettingsErrorsNameTheVariable(t *testing.T) {
	for _, tc := range []struct{ key, value, want string }{
		{"RLS_BACKEND", "postgres", "RLS_BACKEND"},
		{"RLS_DEFAULT_ALGORITHM", "leaky", "RLS_DEFAULT_ALGORITHM"},
		{"RLS_FAILURE_MODE", "maybe", "RLS_FAILURE_MODE"},
		{"RLS_BACKEND_TIMEOUT", "soon", "RLS_BACKEND_TIMEOUT"},
		{"RLS_BACKEND_TIMEOUT", "0s", "RLS_BACKEND_TIMEOUT"},
		{"RLS_SHADOW_MODE", "perhaps", "RLS_SHADOW_MODE"},
		{"RLS_LOG_LEVEL", "loud", "RLS_LOG_LEVEL"},
		{"RLS_ALLOW_NEGATIVE_HITS", "sometimes", "RLS_ALLOW_NEGATIVE_HITS"},
		{"RLS_MAX_DESCRIPTORS", "0", "RLS_MAX_DESCRIPTORS"},
		{"RLS_MAX_ENTRIES", "-1", "RLS_MAX_ENTRIES"},
		{"RLS_MAX_HITS", "0", "RLS_MAX_HITS"},
		{"RLS_MAX_HITS", "-1", "RLS_MAX_HITS"},
		{"RLS_MAX_LOG_HITS", "100001", "RLS_MAX_LOG_HITS"},
		{"RLS_MAX_OVERRIDE_LOG_SIZE", "0", "RLS_MAX_OVERRIDE_LOG_SIZE"},
		{"RLS_MAX_OVERRIDE_LIFETIME", "500ms", "RLS_MAX_OVERRIDE_LIFETIME"},
		{"RLS_MAX_UNMATCHED_ENTRIES", "0", "RLS_MAX_UNMATCHED_ENTRIES"},
		{"RLS_MAX_UNMATCHED_KEY_BYTES", "-5", "RLS_MAX_UNMATCHED_KEY_BYTES"},
		{"RLS_REDIS_PIPELINES_PER_CPU", "0", "RLS_REDIS_PIPELINES_PER_CPU"},
	} {
		t.Run(tc.key+"="+tc.value, func(t *testing.T) {
			t.Setenv(tc.key, tc.value)
			_, err := LoadSettings()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestTypedSettingsNameWhatTheyAccept: a setting typed as a name (backend,
// algorithm, failure mode) is refused with the variable and the names it
// accepts, and read into its type once.
func TestTypedSettingsNameWhatTheyAccept(t *testing.T) {
	for _, tc := range []struct{ key, value, accepted string }{
		{"RLS_BACKEND", "postgres", "want memory or redis"},
		{"RLS_DEFAULT_ALGORITHM", "leaky", "want fixed_window, sliding_window_log, sliding_window_counter or token_bucket"},
		{"RLS_FAILURE_MODE", "maybe", "want error, allow or deny"},
	} {
		t.Run(tc.key, func(t *testing.T) {
			t.Setenv(tc.key, tc.value)
			_, err := LoadSettings()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.key)
			assert.Contains(t, err.Error(), tc.accepted)
		})
	}
	t.Setenv("RLS_BACKEND", "redis")
	t.Setenv("RLS_DEFAULT_ALGORITHM", "token_bucket")
	t.Setenv("RLS_FAILURE_MODE", "deny")
	s, err := LoadSettings()
	require.NoError(t, err)
	assert.Equal(t, BackendRedis, s.Backend)
	opts := s.ServiceOptions(slog.New(slog.DiscardHandler))
	assert.Equal(t, algorithms.TokenBucket, opts.DefaultAlgorithm)
	assert.Equal(t, rls.FailDeny, opts.FailureMode)
}

func TestVariablesWithoutThePrefixAreIgnored(t *testing.T) {
	t.Setenv("BACKEND", "redis")
	t.Setenv("CONFIG_PATH", "/nowhere")
	t.Setenv("REDIS_ADDRS", "bad address")
	t.Setenv("TLS_CA_FILE", "/nowhere.pem")
	t.Setenv("RLS_REDIS_ADDRS", "127.0.0.1:6379,127.0.0.1:6380")
	t.Setenv("RLS_REDIS_TLS_CA_FILE", "/etc/ca.pem")
	s, err := LoadSettings()
	require.NoError(t, err)
	assert.Equal(t, BackendMemory, s.Backend)
	assert.Equal(t, "./config", s.ConfigPath)
	assert.Equal(t, []string{"127.0.0.1:6379", "127.0.0.1:6380"}, s.Redis.Addrs)
	assert.Equal(t, "/etc/ca.pem", s.Redis.TLSCaFile)
}

func TestConfigErrorStopsStartup(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, writeFile(dir+"/bad.yaml", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n"))
	t.Setenv("RLS_CONFIG_PATH", dir)
	t.Setenv("RLS_GRPC_ADDR", "127.0.0.1:0")
	t.Setenv("RLS_HTTP_ADDR", "")
	settings, err := LoadSettings()
	require.NoError(t, err)
	_, err = New(context.Background(), settings, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "bad.yaml:4")
	assert.Contains(t, err.Error(), "unit")
}

func writeFile(path, data string) error { return os.WriteFile(path, []byte(data), 0o644) }
