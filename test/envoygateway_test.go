package test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/ratewarden/ratewarden/internal/addrfile"
	"github.com/ratewarden/ratewarden/internal/metrics"
	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
	"github.com/ratewarden/ratewarden/internal/testkit/xdstest"
)

// envoyGatewayDeployment is the environment Envoy Gateway gives its rate
// limit container (expectedRateLimitContainerEnv in its
// internal/infrastructure/kubernetes/ratelimit/resource.go), with
// Prometheus on, as by default, and with redisTLS a Redis that wants TLS and
// a client certificate (a BackendTrafficPolicy's redis.tls.certificateRef).
// Only the paths and the addresses are the test's: mount maps the path of
// a file in one of the Deployment's volumes (/certs, /redis-certs,
// /etc/statsd-exporter) to where the test put it, the xDS server is
// xdsServer (envoy-gateway:18001 there), Redis redisURL, and Prometheus
// listens on prometheusAddr (:19001 there). Envoy Gateway sets no port of
// gRPC or HTTP: the server's defaults, 8081 and 8080, are what its Service
// and probes use, and the test's harness moves them to ports the kernel
// picks.
func envoyGatewayDeployment(mount func(string) string, xdsServer, redisURL, prometheusAddr string, redisTLS bool) map[string]string {
	env := map[string]string{
		"RUNTIME_ROOT":                       mount("/data"),
		"RUNTIME_SUBDIRECTORY":               "ratelimit",
		"RUNTIME_IGNOREDOTFILES":             "true",
		"RUNTIME_WATCH_ROOT":                 "false",
		"LOG_LEVEL":                          "info",
		"USE_STATSD":                         "false",
		"CONFIG_TYPE":                        "GRPC_XDS_SOTW",
		"CONFIG_GRPC_XDS_SERVER_URL":         xdsServer,
		"CONFIG_GRPC_XDS_NODE_ID":            "envoy-ratelimit",
		"GRPC_SERVER_USE_TLS":                "true",
		"GRPC_SERVER_TLS_CERT":               mount("/certs/tls.crt"),
		"GRPC_SERVER_TLS_KEY":                mount("/certs/tls.key"),
		"GRPC_SERVER_TLS_CA_CERT":            mount("/certs/ca.crt"),
		"CONFIG_GRPC_XDS_SERVER_USE_TLS":     "true",
		"CONFIG_GRPC_XDS_CLIENT_TLS_CERT":    mount("/certs/tls.crt"),
		"CONFIG_GRPC_XDS_CLIENT_TLS_KEY":     mount("/certs/tls.key"),
		"CONFIG_GRPC_XDS_SERVER_TLS_CACERT":  mount("/certs/ca.crt"),
		"FORCE_START_WITHOUT_INITIAL_CONFIG": "true",
		"REDIS_SOCKET_TYPE":                  "tcp",
		"REDIS_URL":                          redisURL,
		"USE_PROMETHEUS":                     "true",
		"PROMETHEUS_ADDR":                    prometheusAddr,
		"PROMETHEUS_MAPPER_YAML":             mount("/etc/statsd-exporter/conf.yaml"),
	}
	if redisTLS {
		env["REDIS_TLS"] = "true"
		env["REDIS_TLS_CLIENT_CERT"] = mount("/redis-certs/tls.crt")
		env["REDIS_TLS_CLIENT_KEY"] = mount("/redis-certs/tls.key")
	}
	return env
}

// envoyGatewayProbe runs the probe Envoy Gateway generates for its rate
// limit container (resource.go), as the kubelet runs it: its startup,
// readiness and liveness probes alike GET /healthcheck on port 8080 (here
// the server's HTTP address) within a second, and pass on a status from 200
// to 399; they differ only in how often they run and how many failures
// they take. It returns nil when the probe passes, else why not.
func envoyGatewayProbe(srv *serverProcess) error {
	resp, err := (&http.Client{Timeout: time.Second}).Get("http://" + srv.HTTPAddr + "/healthcheck")
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("GET /healthcheck: %s", resp.Status)
	}
	return nil
}

// copyFile copies the file src to dst, making dst's directory.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	data, err := os.ReadFile(src)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(dst), 0o755))
	require.NoError(t, os.WriteFile(dst, data, 0o600))
}

// TestEnvoyGatewayDeployment runs the server binary in place of
// envoyproxy/ratelimit, with the environment Envoy Gateway's generated
// Deployment gives it, in envoyproxy/ratelimit's variables, with
// envoy-gateway.yaml's container.env (and a backend timeout a busy test host
// can keep), and its certificates: limits from Envoy
// Gateway's xDS server over mutual TLS, gRPC served over TLS, Redis with and
// without TLS. It starts before the first limits, not ready, answering
// every request with envoyproxy/ratelimit's error before its first
// configuration, so that Envoy's failure mode decides (a FailClosed policy
// denies); is ready after the first xDS update; and enforces the limits in
// Redis for every replica. All along it answers the probes of the
// Deployment as Envoy Gateway generates them, all on /healthcheck, as
// envoyproxy/ratelimit does: they pass once Redis has answered, before the
// first limits and through a later Redis outage, so nothing is restarted
// and the pods stay in rotation; and a pod started while Redis is down
// fails them until Redis answers, as envoyproxy/ratelimit's, whose HTTP
// port opens only after its first PING, so it stays out of rotation.
func TestEnvoyGatewayDeployment(t *testing.T) {
	for _, c := range []struct {
		name     string
		redisTLS bool
	}{{"redis", false}, {"redis over TLS", true}} {
		t.Run(c.name, func(t *testing.T) { testEnvoyGatewayDeployment(t, c.redisTLS) })
	}
}

func testEnvoyGatewayDeployment(t *testing.T, redisTLS bool) {
	certs := redistest.NewCerts(t)
	root := t.TempDir()
	mount := func(path string) string { return filepath.Join(root, filepath.FromSlash(path)) }
	// The Secret envoy-rate-limit, mounted at /certs: one certificate, for
	// serving gRPC and for the xDS client, and the CA of Envoy Gateway.
	copyFile(t, certs.PeerCertFile, mount("/certs/tls.crt"))
	copyFile(t, certs.PeerKeyFile, mount("/certs/tls.key"))
	copyFile(t, certs.CAFile, mount("/certs/ca.crt"))

	var redis *redistest.Server
	redisURL := ""
	if redisTLS {
		redis = redistest.StandaloneTLS(t, certs.Server(true))
		redisURL = redis.TLSAddr()
		// The Secret of redis.tls.certificateRef, mounted at /redis-certs.
		copyFile(t, certs.ClientCertFile, mount("/redis-certs/tls.crt"))
		copyFile(t, certs.ClientKeyFile, mount("/redis-certs/tls.key"))
	} else {
		redis = redistest.Standalone(t)
		redisURL = redis.Addr()
	}

	xdsTLS, caPool := xdstest.MutualTLS(t, certs)
	xs := xdstest.Start(t, xdsTLS)
	xdsServer := strings.Replace(xs.Addr(), "127.0.0.1", "localhost", 1) // the name its certificate carries
	// The generated environment, with envoy-gateway.yaml's container.env
	// merged in as Envoy Gateway merges it.
	env := withContainerEnv(envoyGatewayDeployment(mount, xdsServer, redisURL, "127.0.0.1:0", redisTLS), envoyGatewayConfig(t))
	// The test's own RLS_ variable: a longer budget for Redis's answer than
	// the default, which this busy test host may miss, since what is read
	// from Envoy Gateway's environment, not latency, is under test.
	env["RLS_BACKEND_TIMEOUT"] = "2s"
	if redisTLS {
		// Envoy Gateway names no CA for Redis: the server's certificate is
		// verified against the system's roots, here the test's CA.
		env["SSL_CERT_FILE"] = certs.CAFile
	}
	// Envoy's side of gRPC: TLS, verifying the server against Envoy
	// Gateway's CA.
	envoyTLS := credentials.NewTLS(&tls.Config{RootCAs: caPool, MinVersion: tls.VersionTLS12})
	srv := startServerWith(t, "", env, envoyTLS)
	ctx := context.Background()

	// probes checks that Envoy Gateway's probes pass on s, or fail.
	probes := func(s *serverProcess, when string, pass bool) {
		t.Helper()
		if pass {
			assert.NoError(t, envoyGatewayProbe(s), "%s: Envoy Gateway's probes", when)
		} else {
			assert.Error(t, envoyGatewayProbe(s), "%s: Envoy Gateway's probes", when)
		}
	}

	// Started, before Envoy Gateway has sent any limits: its probes pass
	// (Redis answers), gRPC health says not ready, and every request gets
	// envoyproxy/ratelimit's error before its first configuration, so that
	// Envoy's failure mode decides, as with envoyproxy/ratelimit and
	// Envoy Gateway's FORCE_START_WITHOUT_INITIAL_CONFIG.
	probes(srv, "before the first limits", true)
	assert.False(t, srv.Serving(ctx))
	const listener, route = "default/eg/http", "httproute/default/backend/rule/0/match/0/*"
	rules := []xdstest.Rule{
		{Headers: []xdstest.HeaderMatch{{Name: "x-user-id", Distinct: true}}, Requests: 3, Unit: rlsconfv3.RateLimitUnit_HOUR},
	}
	g := gatewayRoute{client: srv.Client, listener: listener, route: route}
	askAs := func(s *serverProcess, user string) error {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err := s.Client.ShouldRateLimit(rctx, &rlsv3.RateLimitRequest{
			Domain: listener, Descriptors: xdstest.Descriptors(t, route, rules, xdstest.HTTPRequest{Headers: map[string]string{"x-user-id": user}}),
		})
		return err
	}
	err := askAs(srv, "alice")
	assert.Equal(t, codes.Unknown, status.Code(err), "no limits yet: %v", err)
	assert.ErrorContains(t, err, "no rate limit configuration loaded")

	// gRPC is TLS, and not mutual: Envoy's client certificate is not asked
	// for (GRPC_SERVER_TLS_CA_CERT is read by neither server), a plaintext
	// client is refused.
	plain, err := grpc.NewClient(srv.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer plain.Close()
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	_, err = healthpb.NewHealthClient(plain).Check(pctx, &healthpb.HealthCheckRequest{})
	cancel()
	assert.Equal(t, codes.Unavailable, status.Code(err), "plaintext gRPC: %v", err)

	// The first update makes the server ready.
	xs.Set("envoy-ratelimit", "1", xdstest.Config(listener, route, rules...))
	_, err = xs.WaitFor(20*time.Second, func(r xdstest.Request) bool { return r.ACK("1") })
	require.NoError(t, err, "the server accepts Envoy Gateway's limits over mutual TLS\n%s", srv.Output())
	assert.Equal(t, "envoy-ratelimit", xs.Requests()[0].Node.GetId())
	require.Eventually(t, func() bool { return srv.Serving(ctx) }, 10*time.Second, 20*time.Millisecond, "ready after the first update")
	probes(srv, "with the limits", true)

	// The limits are enforced in Redis: a second replica, started the same
	// way (in a pod of its own, so every port of its own here: the kernel
	// picks them), shares them.
	assert.Equal(t, 3, g.admitted(t, rules, "bob", 10))
	keys, err := redis.Client(t).Keys(ctx, "ratewarden:*").Result()
	require.NoError(t, err)
	assert.NotEmpty(t, keys, "the limits are counted in the Redis of REDIS_URL")
	replica := startServerWith(t, "", env, envoyTLS)
	require.Eventually(t, func() bool { return replica.Serving(ctx) }, 20*time.Second, 20*time.Millisecond, "the replica takes the limits too")
	g2 := gatewayRoute{client: replica.Client, listener: listener, route: route}
	assert.Equal(t, 0, g2.admitted(t, rules, "bob", 1), "bob's 3 an hour are spent on the first replica")
	assert.Equal(t, 3, g2.admitted(t, rules, "carol", 10))
	assert.Equal(t, 0, g.admitted(t, rules, "carol", 1))

	// Prometheus, where Envoy Gateway scrapes it, with envoyproxy/ratelimit's names.
	code, body := httpGet(t, "http://"+srv.Addrs[addrfile.Metrics]+"/metrics")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, metrics.RatelimitOverLimit+`{domain="default/eg/http"`)

	// A Redis outage leaves the pods alive and in rotation by Envoy
	// Gateway's probes, so Kubernetes restarts nothing; requests get the
	// failure mode, and gRPC health says not ready. Over several backend
	// health checks (one a second), nothing flips back.
	redis.Stop()
	require.Eventually(t, func() bool { return !srv.Serving(ctx) }, 10*time.Second, 20*time.Millisecond, "gRPC health follows Redis")
	for range 3 {
		probes(srv, "Redis down", true)
		time.Sleep(500 * time.Millisecond)
	}
	assert.Equal(t, codes.Unavailable, status.Code(askAs(srv, "dave")), "RLS_FAILURE_MODE error: Envoy's failure_mode_deny decides")
	// A pod started during the outage, a replica rescheduled, say, fails
	// its probes until Redis answers, as envoyproxy/ratelimit's: out of
	// rotation, and restarted if Redis stays away longer than the startup
	// probe waits (30 times 10 seconds).
	late := startServerWith(t, "", env, envoyTLS)
	for range 3 {
		probes(late, "started while Redis is down", false)
		time.Sleep(500 * time.Millisecond)
	}
	code, body = late.get("/healthcheck")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "waiting for the backend's first answer")
	require.NoError(t, redis.Start())
	for _, s := range []*serverProcess{srv, late} {
		require.Eventually(t, func() bool { return s.Serving(ctx) }, 10*time.Second, 20*time.Millisecond, "ready again with Redis")
		probes(s, "Redis back", true)
	}
	// Limits from xDS record every hit, as envoyproxy/ratelimit counts
	// them, and a hit that certainly missed Redis is recorded once it
	// answers again, unless RLS_GIVE_BACK_TIMEOUT passed first; one sent on
	// a connection that broke may have run, and is not sent again. Redis
	// was down, so dave's call during the outage counts only if it was
	// recorded later.
	var deferred map[string]float64
	require.Eventually(t, func() bool {
		deferred = scrapeMetrics(t, srv)
		return deferredFate(deferred, "recorded")+deferredFate(deferred, "dropped")+deferredFate(deferred, "uncertain") >= 1
	}, 15*time.Second, 20*time.Millisecond, "the hit of the outage is recorded, dropped or left uncertain")
	recorded := deferredFate(deferred, "recorded")
	t.Logf("the hit of the outage: recorded %d, dropped %d, uncertain %d", recorded, deferredFate(deferred, "dropped"), deferredFate(deferred, "uncertain"))
	assert.Equal(t, 3-recorded, g.admitted(t, rules, "dave", 10), "enforced again, with the hit of the outage if it was recorded")
	late.Stop()

	logs := srv.Output()
	for _, want := range []string{
		`msg="read envoyproxy/ratelimit variable" from=CONFIG_TYPE setting=RLS_CONFIG_SOURCE value=xds`,
		`msg="read envoyproxy/ratelimit variable" from=CONFIG_GRPC_XDS_CLIENT_TLS_CERT setting=RLS_XDS_TLS_CERT_FILE`,
		`level=WARN msg="envoyproxy/ratelimit variable ignored" variables=GRPC_SERVER_TLS_CA_CERT`,
	} {
		assert.Contains(t, logs, want)
	}
	assert.NotContains(t, logs, "level=ERROR")

	srv.Stop()
	assert.Equal(t, 0, srv.ExitCode(), "SIGTERM stops the server cleanly")
}

// deferredFate returns, from a server's scraped metrics m, how many
// deferred charges ended with result: recorded, dropped or uncertain.
func deferredFate(m map[string]float64, result string) int {
	return int(m[metrics.DeferredCharges+`{result="`+result+`"}`])
}
