package server

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/ratewarden/ratewarden/internal/settings"
)

// started is a server serving on loopback ports for one test.
type started struct {
	srv    *Server
	conn   *grpc.ClientConn
	client rlsv3.RateLimitServiceClient
	http   string
	stop   func() error
}

// loadSettings returns the settings of the variables env, read as the
// server reads its environment, and of no other variable.
func loadSettings(env map[string]string) (settings.Settings, error) {
	return settings.Load(func(name string) (string, bool) {
		v, ok := env[name]
		return v, ok
	})
}

// start serves the example configuration with the memory backend on free
// loopback ports; env adds or overrides RLS_* variables.
func start(t testing.TB, env map[string]string) *started {
	t.Helper()
	vars := map[string]string{"RLS_GRPC_ADDR": "127.0.0.1:0", "RLS_HTTP_ADDR": "127.0.0.1:0", "RLS_CONFIG_PATH": "../../config"}
	maps.Copy(vars, env)
	set, err := loadSettings(vars)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := New(ctx, set, slog.New(slog.NewTextHandler(io.Discard, nil)))
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

func TestConfigErrorStopsStartup(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, writeFile(dir+"/bad.yaml", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n"))
	set, err := loadSettings(map[string]string{"RLS_CONFIG_PATH": dir, "RLS_GRPC_ADDR": "127.0.0.1:0", "RLS_HTTP_ADDR": ""})
	require.NoError(t, err)
	_, err = New(context.Background(), set, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "bad.yaml:4")
	assert.Contains(t, err.Error(), "unit")
}

func writeFile(path, data string) error { return os.WriteFile(path, []byte(data), 0o644) }

// TestShutdownEndsQuotaStreams: a Rate Limit Quota Service stream lasts as
// long as its Envoy, so the server ends it when it stops rather than
// waiting for it: with one open, the server stops well within
// RLS_SHUTDOWN_TIMEOUT, and the stream ends with OK.
func TestShutdownEndsQuotaStreams(t *testing.T) {
	s := start(t, map[string]string{"RLS_SHUTDOWN_TIMEOUT": "20s"})
	stream, err := rlqsv3.NewRateLimitQuotaServiceClient(s.conn).StreamRateLimitQuotas(t.Context())
	require.NoError(t, err)
	require.NoError(t, stream.Send(&rlqsv3.RateLimitQuotaUsageReports{Domain: "edge"}))
	began := time.Now()
	require.NoError(t, s.stop())
	assert.Less(t, time.Since(began), 5*time.Second, "the stream did not hold the stop")
	_, err = stream.Recv()
	assert.ErrorIs(t, err, io.EOF)
}
