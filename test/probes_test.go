package test

import (
	"context"
	"io"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
)

// healthServiceNames are the grpc.health.v1 names readiness answers for.
var healthServiceNames = []string{"", "envoy.service.ratelimit.v3.RateLimitService", "ratelimit"}

// get returns the status and body of an HTTP GET of path on the server, or
// 0 and the error when it does not answer.
func (p *serverProcess) get(path string) (int, string) {
	client := http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get("http://" + p.HTTPAddr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// probe reports whether path answers 200.
func (p *serverProcess) probe(path string) bool {
	code, _ := p.get(path)
	return code == http.StatusOK
}

// grpcHealth returns the gRPC health status for each service name.
func (p *serverProcess) grpcHealth(t *testing.T) map[string]healthpb.HealthCheckResponse_ServingStatus {
	t.Helper()
	out := make(map[string]healthpb.HealthCheckResponse_ServingStatus)
	for _, name := range healthServiceNames {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		resp, err := p.Health.Check(ctx, &healthpb.HealthCheckRequest{Service: name})
		cancel()
		require.NoError(t, err, "service %q", name)
		out[name] = resp.GetStatus()
	}
	return out
}

func allStatus(st healthpb.HealthCheckResponse_ServingStatus) map[string]healthpb.HealthCheckResponse_ServingStatus {
	out := make(map[string]healthpb.HealthCheckResponse_ServingStatus)
	for _, name := range healthServiceNames {
		out[name] = st
	}
	return out
}

// TestProbesThroughARedisOutage: liveness stays up while Redis is down or
// out of memory; readiness and gRPC health follow Redis.
func TestProbesThroughARedisOutage(t *testing.T) {
	redis := redistest.Standalone(t)
	srv := startServer(t, map[string]string{
		"RLS_CONFIG_PATH":             writeConfig(t, faultLimits),
		"RLS_BACKEND":                 "redis",
		"RLS_REDIS_ADDRS":             redis.Addr(),
		"RLS_BACKEND_HEALTH_INTERVAL": "100ms",
	})
	ready := func(want bool) {
		t.Helper()
		require.Eventually(t, func() bool { return srv.probe("/ready") == want }, 10*time.Second, 20*time.Millisecond, "/ready should be %v", want)
	}
	ready(true)
	assert.Equal(t, allStatus(healthpb.HealthCheckResponse_SERVING), srv.grpcHealth(t))

	redis.Stop()
	ready(false)
	code, body := srv.get("/ready")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "backend unreachable")
	assert.Equal(t, allStatus(healthpb.HealthCheckResponse_NOT_SERVING), srv.grpcHealth(t))
	for range 5 {
		code, body := srv.get("/healthcheck")
		require.Equal(t, http.StatusOK, code, "liveness while Redis is down: %s", body)
		time.Sleep(100 * time.Millisecond)
	}

	require.NoError(t, redis.Start())
	ready(true)
	assert.Equal(t, allStatus(healthpb.HealthCheckResponse_SERVING), srv.grpcHealth(t))

	// Redis answers PING but refuses writes: out of memory, noeviction.
	ctx := context.Background()
	admin := redis.Client(t)
	require.NoError(t, admin.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err())
	require.NoError(t, admin.ConfigSet(ctx, "maxmemory", "100000").Err())
	ready(false)
	code, body = srv.get("/ready")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "backend refuses writes")
	assert.Contains(t, body, "OOM command not allowed")
	assert.Equal(t, allStatus(healthpb.HealthCheckResponse_NOT_SERVING), srv.grpcHealth(t))
	assert.True(t, srv.probe("/healthcheck"), "liveness while Redis refuses writes")
	require.NoError(t, admin.ConfigSet(ctx, "maxmemory", "0").Err())
	ready(true)
}

// TestProbesOnSIGTERM: from SIGTERM on, liveness and readiness both fail.
func TestProbesOnSIGTERM(t *testing.T) {
	srv := startServer(t, map[string]string{"RLS_SHUTDOWN_DELAY": "3s"})
	require.True(t, srv.probe("/healthcheck"))
	require.True(t, srv.probe("/ready"))
	srv.Signal(syscall.SIGTERM)
	require.Eventually(t, func() bool {
		return !srv.probe("/healthcheck") && !srv.probe("/ready")
	}, 2*time.Second, 20*time.Millisecond)
	code, body := srv.get("/healthcheck")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "shutting down")
	assert.Equal(t, allStatus(healthpb.HealthCheckResponse_NOT_SERVING), srv.grpcHealth(t))
}

// TestProbesNameARefusedPassword: readiness, liveness, the log and the
// answers give Redis's own reply to a missing or wrong password. A Redis
// that refuses the password has not answered: the server is not live, as
// envoyproxy/ratelimit, which cannot connect, never opens its HTTP port.
func TestProbesNameARefusedPassword(t *testing.T) {
	redis := redistest.Standalone(t)
	require.NoError(t, redis.Client(t).ConfigSet(context.Background(), "requirepass", "pw").Err())
	for _, tc := range []struct{ password, want string }{
		{"", "NOAUTH Authentication required"},
		{"guess", "WRONGPASS"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			srv := startServer(t, map[string]string{
				"RLS_CONFIG_PATH":    writeConfig(t, faultLimits),
				"RLS_BACKEND":        "redis",
				"RLS_REDIS_ADDRS":    redis.Addr(),
				"RLS_REDIS_PASSWORD": tc.password,
			})
			code, body := srv.get("/ready")
			assert.Equal(t, http.StatusServiceUnavailable, code)
			assert.Contains(t, body, tc.want)
			assert.Contains(t, srv.Output(), tc.want)
			code, body = srv.get("/healthcheck")
			assert.Equal(t, http.StatusServiceUnavailable, code)
			assert.Contains(t, body, "waiting for the backend's first answer: backend unreachable: "+tc.want)

			_, err := srv.Client.ShouldRateLimit(context.Background(), faultRequest("user", "auth"))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), "unexpected reply")
		})
	}
}
